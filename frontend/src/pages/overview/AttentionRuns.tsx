// Runs that failed or stalled: each links to its page, where it can be resumed.
import { Link } from "react-router";
import { RunLink, TableLink } from "../../components/links";
import { TimeAgo } from "../../components/TimeAgo";
import { Empty, StatusBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
import type { AttentionRun } from "./types";

export const RUNS_SHOWN = 6;

export function AttentionRuns({ runs, count, now }: { runs: AttentionRun[]; count: number; now: string }) {
  const shown = runs.slice(0, RUNS_SHOWN);
  return (
    <section aria-labelledby="ov-runs-title" data-testid="attention-runs">
      <h2 id="ov-runs-title">
        Runs needing attention <span className="ov-count">{formatCount(count)}</span>
      </h2>
      {shown.length === 0 ? (
        <Empty>No run has failed or stalled.</Empty>
      ) : (
        <>
          <div className="table-wrap">
            <table className="ov-table">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Run</th>
                  <th scope="col">Table</th>
                  <th scope="col">Since</th>
                  <th scope="col">Why</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((run) => (
                  <tr key={run.run_id} data-testid="attention-run" data-run-id={run.run_id} data-status={run.status}>
                    <td>
                      <StatusBadge status={run.status} />
                    </td>
                    <td className="ov-id">
                      <RunLink runId={run.run_id} />
                    </td>
                    <td className="ov-id">
                      <TableLink table={run.table} />
                    </td>
                    <td className="nowrap">
                      <TimeAgo iso={run.since} now={now} />
                    </td>
                    <td className="ov-reason" title={run.reason}>
                      <span className="ov-clamp">{run.reason}</span>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {count > shown.length && (
            <p className="ov-more">
              <Link to="/runs?status=failed">{formatCount(count - shown.length)} more: the failed runs</Link>
              {" · "}
              <Link to="/runs?status=stalled">the stalled runs</Link>
            </p>
          )}
        </>
      )}
    </section>
  );
}
