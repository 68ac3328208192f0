// `/tables`: every table runs have loaded, most recently loaded first, with its totals.
import { Link, useSearchParams } from "react-router";
import { api, type TableTotals } from "../../api/client";
import { Empty, QueryState } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { useQuery } from "../../lib/useQuery";
import { Pager } from "../../components/Pager";
import { pageFromParams } from "../../lib/paging";
import { RunsByStatus, VerdictBadge } from "./TableCells";
import { useLiveReload } from "../../lib/live";

export function tablePath(table: string): string {
  return `/tables/${encodeURIComponent(table)}`;
}

export function TableList() {
  const [params] = useSearchParams();
  const page = pageFromParams(params, 50, 500);
  const tables = useQuery(
    () => api.GET("/api/tables", { params: { query: page } }),
    `tables?limit=${page.limit}&offset=${page.offset}`,
  );
  useLiveReload(tables.reload);

  return (
    <>
      <div className="page-header">
        <h1>Tables</h1>
        {tables.loading && tables.data && <span className="muted">Refreshing…</span>}
      </div>
      <section aria-label="Tables">
        <QueryState query={tables} what="the tables">
          {(answer) =>
            answer.count === 0 ? (
              <Empty>No table has been loaded yet.</Empty>
            ) : (
              <>
                {answer.data.length > 0 ? (
                  <TableTotalsTable tables={answer.data} />
                ) : (
                  <Empty>No tables on this page.</Empty>
                )}
                <Pager page={page} shown={answer.data.length} count={answer.count} label="Tables" />
              </>
            )
          }
        </QueryState>
      </section>
    </>
  );
}

function TableTotalsTable({ tables }: { tables: TableTotals[] }) {
  return (
    <div className="table-wrap">
      <table className="tp-tables-table">
        <thead>
          <tr>
            <th scope="col">Table</th>
            <th scope="col" className="number">Runs</th>
            <th scope="col" className="number">Rows committed</th>
            <th scope="col" className="number">Batches</th>
            <th scope="col" className="number code">ALREADY_<wbr />EXISTS</th>
            <th scope="col" className="number code">OUT_OF_<wbr />RANGE</th>
            <th scope="col">Last loaded</th>
            <th scope="col">Key column</th>
            <th scope="col">Reconciliation</th>
          </tr>
        </thead>
        <tbody>
          {tables.map((totals) => (
            <TableTotalsRow key={totals.table} totals={totals} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function TableTotalsRow({ totals }: { totals: TableTotals }) {
  return (
    <tr data-testid="table-row" data-table={totals.table}>
      <th scope="row" className="tp-table-id">
        <Link to={tablePath(totals.table)} data-testid="table-link">
          {totals.table}
        </Link>
      </th>
      <td className="number" data-testid="table-runs">
        {formatCount(totals.runs)}
        <RunsByStatus byStatus={totals.runs_by_status} />
      </td>
      <td className="number" data-testid="table-rows-committed">
        {formatCount(totals.rows_committed)}
      </td>
      <td className="number" data-testid="table-batches">
        {formatCount(totals.batches_committed)}
      </td>
      <td className="number" data-testid="table-already-exists">
        {formatCount(totals.already_exists)}
      </td>
      <td className="number" data-testid="table-out-of-range">
        {formatCount(totals.out_of_range)}
      </td>
      <td data-testid="table-last-loaded">{formatTime(totals.last_started_at)}</td>
      <td className="mono" data-testid="table-key-column">
        {totals.key_column ?? <span className="muted">none</span>}
      </td>
      <td>
        <VerdictBadge verdict={totals.reconciliation} />
      </td>
    </tr>
  );
}
