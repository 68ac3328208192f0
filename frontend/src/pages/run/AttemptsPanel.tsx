// Every attempt of the run (the first and each resume), with the tail of its log.
import { useState } from "react";
import { api, type Attempt } from "../../api/client";
import { Empty, QueryState, StatusBadge } from "../../components/ui";
import { durationBetween, formatCount, formatDuration, formatTime } from "../../lib/format";
import { useQuery } from "../../lib/useQuery";

const TAIL = 200;

function LogTail({ runId, attempt, version }: { runId: string; attempt: number; version: string }) {
  const log = useQuery(
    () =>
      api.GET("/api/runs/{run_id}/attempts/{number}/log", {
        params: { path: { run_id: runId, number: attempt }, query: { tail: TAIL } },
      }),
    `${runId}/${attempt}/${version}`,
  );
  return (
    <QueryState query={log} what="the log">
      {(body) => (
        <>
          <p className="muted">
            {body.path} on {body.host}
            {body.truncated ? `, last ${TAIL} lines` : ""}
            {body.live ? ", still being written" : ""}
          </p>
          <pre className="log" data-testid={`attempt-log-${attempt}`}>
            {body.lines.join("\n") || "(empty)"}
          </pre>
        </>
      )}
    </QueryState>
  );
}

function AttemptRow({ runId, attempt, version }: { runId: string; attempt: Attempt; version: string }) {
  const [showLog, setShowLog] = useState(false);
  const launch = attempt.launch;
  return (
    <>
      <tr data-testid="attempt-row">
        <td>{attempt.number}</td>
        <td>
          <StatusBadge status={attempt.status} />
        </td>
        <td>{formatTime(attempt.started_at)}</td>
        <td className="number">
          {formatDuration(durationBetween(attempt.started_at, attempt.finished_at ?? attempt.last_event_at))}
        </td>
        <td className="number">{formatCount(attempt.rows_reported)}</td>
        <td>
          {launch
            ? `${launch.trigger === "auto" ? "auto-resume" : `resumed by ${launch.actor}`}${
                launch.approved_by ? ` (approved by ${launch.approved_by})` : ""
              }, pid ${launch.pid ?? "–"}${
                launch.exit_code !== null && launch.exit_code !== undefined ? `, exit ${launch.exit_code}` : ""
              }`
            : "started outside the control plane"}
        </td>
        <td className="error">{attempt.error ?? ""}</td>
        <td>
          {launch && (
            <button type="button" aria-expanded={showLog} onClick={() => setShowLog(!showLog)}>
              {showLog ? "Hide log" : "Log"}
            </button>
          )}
        </td>
      </tr>
      {showLog && (
        <tr>
          <td colSpan={8}>
            <LogTail runId={runId} attempt={attempt.number} version={version} />
          </td>
        </tr>
      )}
    </>
  );
}

export function AttemptsPanel({ runId, attempts, version }: { runId: string; attempts: Attempt[]; version: string }) {
  return (
    <section aria-labelledby="attempts-title">
      <h2 id="attempts-title">Attempts</h2>
      {attempts.length === 0 ? (
        <Empty>No attempt recorded.</Empty>
      ) : (
        <div className="table-wrap">
          <table data-testid="attempts-table">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Status</th>
                <th scope="col">Started</th>
                <th scope="col" className="number">
                  Duration
                </th>
                <th scope="col" className="number">
                  Rows reported
                </th>
                <th scope="col">Launched</th>
                <th scope="col">Error</th>
                <th scope="col">
                  <span className="visually-hidden">Log</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {attempts.map((attempt) => (
                <AttemptRow key={attempt.attempt_id} runId={runId} attempt={attempt} version={version} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p className="muted">Logs are kept for attempts the control plane launched (resumes).</p>
    </section>
  );
}
