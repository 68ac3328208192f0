// `/tables`: every table runs have loaded, most recently loaded first, with its totals.
import { Link, useSearchParams } from "react-router";
import { api, type TableTotals } from "../../api/client";
import { codeCountColumn } from "../../components/codeCountColumn";
import { FigureCount, Freshness, VerdictLink } from "../../components/TableFigures";
import { DataTable, type Column } from "../../components/DataTable";
import { tablePath } from "../../components/links";
import { Pager } from "../../components/Pager";
import { CodeName, Empty, QueryState } from "../../components/ui";
import { formatCount } from "../../lib/format";
import { useLiveReload } from "../../lib/live";
import { pageFromParams } from "../../lib/paging";
import { useQuery } from "../../lib/useQuery";
import { RunsByStatus } from "./TableCells";

export function TableList() {
  const [params] = useSearchParams();
  const page = pageFromParams(params, 50, 500);
  const tables = useQuery(
    () => api.GET("/api/tables", { params: { query: page } }),
    `tables?limit=${page.limit}&offset=${page.offset}`,
  );
  useLiveReload(tables.reload);
  // "5 min ago" is measured against when the answer was read.
  const now = new Date().toISOString();

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
                  columns={totalsColumns(now)}
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

// The overview's figures of each table first (the same definition), then its totals over
// every run into it.
function totalsColumns(now: string): Column<TableTotals>[] {
  return [
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
    { id: "freshness", header: "Freshness", cell: (totals) => <Freshness figures={totals.figures} now={now} /> },
    {
      id: "rows-today",
      header: "Rows today",
      headerTitle: "rows of batches committed since 00:00 UTC",
      cell: (totals) => <FigureCount figure="rows-today" count={totals.figures.rows_committed_today} />,
      align: "end",
    },
    codeCountColumn("ALREADY_EXISTS", (totals) => totals.figures.already_exists, {
      id: "already-exists-24h",
      header: (
        <>
          <CodeName code="ALREADY_EXISTS" /> 24&nbsp;h
        </>
      ),
      headerTitle: "append requests answered ALREADY_EXISTS over the last 24 hours",
      cell: (totals) => <FigureCount figure="already-exists" count={totals.figures.already_exists} />,
    }),
    codeCountColumn("OUT_OF_RANGE", (totals) => totals.figures.out_of_range, {
      id: "out-of-range-24h",
      header: (
        <>
          <CodeName code="OUT_OF_RANGE" /> 24&nbsp;h
        </>
      ),
      headerTitle: "append requests answered OUT_OF_RANGE over the last 24 hours",
      cell: (totals) => <FigureCount figure="out-of-range" count={totals.figures.out_of_range} />,
    }),
    {
      id: "latest-check",
      header: "Latest check",
      headerTitle: "the newest reconciliation touching the table: of a run into it, or of it whole",
      cell: (totals) => <VerdictLink verdict={totals.figures.reconciliation} now={now} />,
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
      header: "Rows, every run",
      headerTitle: "rows of committed batches over every run into the table",
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
    {
      id: "key-column",
      header: "Key column",
      cell: (totals) => totals.key_column ?? <span className="muted">none</span>,
      className: "mono",
      cellAttributes: () => ({ "data-testid": "table-key-column" }),
    },
  ];
}
