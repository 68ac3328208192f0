// Every attempt of the run (the first and each resume), with the tail of its log.
import { useState } from "react";
import { api, type Attempt } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { QueryState, StatusBadge } from "../../components/ui";
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

/** How the attempt was started: a resume (by whom, approved by whom), its pid and exit code. */
function launchText(attempt: Attempt): string {
  const launch = attempt.launch;
  if (!launch) return "started outside the control plane";
  const by = launch.trigger === "auto" ? "auto-resume" : `resumed by ${launch.actor}`;
  const approved = launch.approved_by ? ` (approved by ${launch.approved_by})` : "";
  const exit = launch.exit_code !== null && launch.exit_code !== undefined ? `, exit ${launch.exit_code}` : "";
  return `${by}${approved}, pid ${launch.pid ?? "–"}${exit}`;
}

export function AttemptsPanel({ runId, attempts, version }: { runId: string; attempts: Attempt[]; version: string }) {
  // The attempts whose log is shown, by number.
  const [shownLogs, setShownLogs] = useState<ReadonlySet<number>>(() => new Set());
  const toggleLog = (number: number) =>
    setShownLogs((numbers) => {
      const next = new Set(numbers);
      if (!next.delete(number)) next.add(number);
      return next;
    });
  const columns: Column<Attempt>[] = [
    { id: "number", header: "#", cell: (attempt) => attempt.number },
    { id: "status", header: "Status", cell: (attempt) => <StatusBadge status={attempt.status} /> },
    { id: "started", header: "Started", cell: (attempt) => formatTime(attempt.started_at) },
    {
      id: "duration",
      header: "Duration",
      cell: (attempt) =>
        formatDuration(durationBetween(attempt.started_at, attempt.finished_at ?? attempt.last_event_at)),
      align: "end",
    },
    { id: "rows", header: "Rows reported", cell: (attempt) => formatCount(attempt.rows_reported), align: "end" },
    { id: "launched", header: "Launched", cell: launchText },
    { id: "error", header: "Error", cell: (attempt) => attempt.error ?? "", className: "error" },
    {
      id: "log",
      header: <span className="visually-hidden">Log</span>,
      cell: (attempt) =>
        attempt.launch && (
          <button
            type="button"
            aria-expanded={shownLogs.has(attempt.number)}
            onClick={() => toggleLog(attempt.number)}
          >
            {shownLogs.has(attempt.number) ? "Hide log" : "Log"}
          </button>
        ),
    },
  ];
  return (
    <section aria-labelledby="attempts-title">
      <h2 id="attempts-title">Attempts</h2>
      <DataTable
        label="Attempts"
        testId="attempts-table"
        columns={columns}
        rows={attempts}
        rowKey={(attempt) => attempt.attempt_id}
        rowAttributes={() => ({ "data-testid": "attempt-row" })}
        detail={(attempt) =>
          shownLogs.has(attempt.number)
            ? { content: <LogTail runId={runId} attempt={attempt.number} version={version} /> }
            : null
        }
        empty="No attempt recorded."
      />
      <p className="muted">Logs are kept for attempts the control plane launched (resumes).</p>
    </section>
  );
}
