// `/tables`: every table runs have loaded, most recently loaded first, with its totals.
import { Link, useSearchParams } from "react-router";
import { api, type TableTotals } from "../../api/client";
import { codeCountColumn } from "../../components/codeCountColumn";
import { DataTable, type Column } from "../../components/DataTable";
import { tablePath } from "../../components/links";
import { Pager } from "../../components/Pager";
import { Empty, QueryState } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { useLiveReload } from "../../lib/live";
import { pageFromParams } from "../../lib/paging";
import { useQuery } from "../../lib/useQuery";
import { RunsByStatus, VerdictBadge } from "./TableCells";

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
                <DataTable
                  label="Tables"
                  className="tp-tables-table"
                  columns={TOTALS_COLUMNS}
                  rows={answer.data}
                  rowKey={(totals) => totals.table}
                  rowAttributes={(totals) => ({ "data-testid": "table-row", "data-table": totals.table })}
                  empty="No tables on this page."
                />
                <Pager page={page} shown={answer.data.length} count={answer.count} label="Tables" />
              </>
            )
          }
        </QueryState>
      </section>
    </>
  );
}

const TOTALS_COLUMNS: Column<TableTotals>[] = [
  {
    id: "table",
    header: "Table",
    cell: (totals) => (
      <Link to={tablePath(totals.table)} data-testid="table-link">
        {totals.table}
      </Link>
    ),
    rowHeader: true,
    className: "tp-table-id",
  },
  {
    id: "runs",
    header: "Runs",
    cell: (totals) => (
      <>
        {formatCount(totals.runs)}
        <RunsByStatus byStatus={totals.runs_by_status} />
      </>
    ),
    align: "end",
    cellAttributes: () => ({ "data-testid": "table-runs" }),
  },
  {
    id: "rows-committed",
    header: "Rows committed",
    cell: (totals) => formatCount(totals.rows_committed),
    align: "end",
    cellAttributes: () => ({ "data-testid": "table-rows-committed" }),
  },
  {
    id: "batches",
    header: "Batches",
    cell: (totals) => formatCount(totals.batches_committed),
    align: "end",
    cellAttributes: () => ({ "data-testid": "table-batches" }),
  },
  codeCountColumn("ALREADY_EXISTS", (totals) => totals.already_exists, {
    cellAttributes: () => ({ "data-testid": "table-already-exists" }),
  }),
  codeCountColumn("OUT_OF_RANGE", (totals) => totals.out_of_range, {
    cellAttributes: () => ({ "data-testid": "table-out-of-range" }),
  }),
  {
    id: "last-loaded",
    header: "Last loaded",
    cell: (totals) => formatTime(totals.last_started_at),
    cellAttributes: () => ({ "data-testid": "table-last-loaded" }),
  },
  {
    id: "key-column",
    header: "Key column",
    cell: (totals) => totals.key_column ?? <span className="muted">none</span>,
    className: "mono",
    cellAttributes: () => ({ "data-testid": "table-key-column" }),
  },
  { id: "reconciliation", header: "Reconciliation", cell: (totals) => <VerdictBadge verdict={totals.reconciliation} /> },
];
