// The runs that loaded one table, newest first, paged by `offset` in the URL.
import { Link, useSearchParams } from "react-router";
import { api, type Run } from "../../api/client";
import { Empty, QueryState, StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import type { Query } from "../../lib/useQuery";
import { useQuery } from "../../lib/useQuery";
import { Pager } from "../../components/Pager";
import { pageFromParams, type Page } from "../../lib/paging";

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
              <div className="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Run</th>
                      <th scope="col">Status</th>
                      <th scope="col">Job</th>
                      <th scope="col">Started</th>
                      <th scope="col" className="number">Rows committed</th>
                    </tr>
                  </thead>
                  <tbody>
                    {answer.data.map((run) => (
                      <TableRunRow key={run.run_id} run={run} />
                    ))}
                  </tbody>
                </table>
              </div>
              <Pager page={page} shown={answer.data.length} count={answer.count} label="Runs" />
            </>
          )
        }
      </QueryState>
    </section>
  );
}

function TableRunRow({ run }: { run: Run }) {
  return (
    <tr data-testid="table-run-row" data-run-id={run.run_id}>
      <td className="mono">
        <Link to={`/runs/${encodeURIComponent(run.run_id)}`}>{run.run_id}</Link>
      </td>
      <td>
        <StatusBadge status={run.status} />
      </td>
      <td>{run.job ?? <span className="muted">–</span>}</td>
      <td>{formatTime(run.started_at)}</td>
      <td className="number" data-testid="table-run-rows-committed">
        {formatCount(run.rows_committed)}
      </td>
    </tr>
  );
}
