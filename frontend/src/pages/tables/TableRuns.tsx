// The runs that loaded one table, newest first, paged by `offset` in the URL.
import { Link, useSearchParams } from "react-router";
import { api, type Run } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { runPath } from "../../components/links";
import { Pager } from "../../components/Pager";
import { Empty, QueryState, StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { pageFromParams, type Page } from "../../lib/paging";
import { useQuery, type Query } from "../../lib/useQuery";

type RunsAnswer = { data: Run[]; count: number };

/** The table's runs at the page the URL asks for; the page is returned for the pager. */
export function useTableRuns(table: string): { runs: Query<RunsAnswer>; page: Page } {
  const [params] = useSearchParams();
  const page = pageFromParams(params, 50, 500);
  const runs = useQuery(
    () => api.GET("/api/runs", { params: { query: { table, ...page } } }),
    `runs?table=${table}&limit=${page.limit}&offset=${page.offset}`,
  );
  return { runs, page };
}

export function TableRuns({ runs, page }: { runs: Query<RunsAnswer>; page: Page }) {
  return (
    <section aria-labelledby="table-runs-title">
      <h2 id="table-runs-title">Runs</h2>
      <QueryState query={runs} what="the table's runs">
        {(answer) =>
          answer.count === 0 ? (
            <Empty>No run has loaded this table.</Empty>
          ) : (
            <>
              <DataTable
                label="Runs"
                columns={TABLE_RUN_COLUMNS}
                rows={answer.data}
                rowKey={(run) => run.run_id}
                rowAttributes={(run) => ({ "data-testid": "table-run-row", "data-run-id": run.run_id })}
              />
              <Pager page={page} shown={answer.data.length} count={answer.count} label="Runs" />
            </>
          )
        }
      </QueryState>
    </section>
  );
}

const TABLE_RUN_COLUMNS: Column<Run>[] = [
  { id: "run", header: "Run", cell: (run) => <Link to={runPath(run.run_id)}>{run.run_id}</Link>, className: "mono" },
  { id: "status", header: "Status", cell: (run) => <StatusBadge status={run.status} /> },
  { id: "job", header: "Job", cell: (run) => run.job ?? <span className="muted">–</span> },
  { id: "started", header: "Started", cell: (run) => formatTime(run.started_at) },
  {
    id: "rows-committed",
    header: "Rows committed",
    cell: (run) => formatCount(run.rows_committed),
    align: "end",
    cellAttributes: () => ({ "data-testid": "table-run-rows-committed" }),
  },
];
