// Runs that failed or stalled: each links to its page, where it can be resumed.
import { Link } from "react-router";
import { DataTable, type Column } from "../../components/DataTable";
import { RunLink, TableLink } from "../../components/links";
import { TimeAgo } from "../../components/TimeAgo";
import { StatusBadge } from "../../components/ui";
import { CAUSE_LABELS, causeBatch } from "../../lib/causes";
import { formatCount } from "../../lib/format";
import type { AttentionRun } from "./types";

export const RUNS_SHOWN = 6;

function attentionColumns(now: string): Column<AttentionRun>[] {
  return [
    { id: "status", header: "Status", cell: (run) => <StatusBadge status={run.status} /> },
    { id: "run", header: "Run", cell: (run) => <RunLink runId={run.run_id} />, className: "ov-id" },
    { id: "table", header: "Table", cell: (run) => <TableLink table={run.table} />, className: "ov-id" },
    { id: "since", header: "Since", cell: (run) => <TimeAgo iso={run.since} now={now} />, className: "nowrap" },
    {
      id: "why",
      header: "Why",
      // A failed run's cause and batch first, whole; then its headline, at most two lines.
      cell: (run) => (
        <>
          {run.cause && (
            <span className="ov-cause">
              <span className="badge badge-bad">{CAUSE_LABELS[run.cause.kind]}</span>
              {causeBatch(run.cause) && <span className="nowrap"> {causeBatch(run.cause)}</span>}
            </span>
          )}
          <span className="ov-clamp">{run.reason}</span>
        </>
      ),
      className: "ov-reason",
      // The whole of it on hover: a failed run's raw error beneath its cause.
      cellAttributes: (run) => ({
        title: run.cause?.error ? `${run.reason}\n\n${run.cause.error}` : run.reason,
        "data-testid": "attention-why",
        "data-kind": run.cause?.kind ?? "",
      }),
    },
  ];
}

export function AttentionRuns({ runs, count, now }: { runs: AttentionRun[]; count: number; now: string }) {
  const shown = runs.slice(0, RUNS_SHOWN);
  return (
    <section aria-labelledby="ov-runs-title" data-testid="attention-runs">
      <h2 id="ov-runs-title">
        Runs needing attention <span className="ov-count">{formatCount(count)}</span>
      </h2>
      <DataTable
        label="Runs needing attention"
        className="ov-table"
        columns={attentionColumns(now)}
        rows={shown}
        rowKey={(run) => run.run_id}
        rowAttributes={(run) => ({ "data-testid": "attention-run", "data-run-id": run.run_id, "data-status": run.status })}
        empty="No run has failed or stalled."
      />
      {shown.length > 0 && count > shown.length && (
        <p className="ov-more">
          <Link to="/runs?status=failed">{formatCount(count - shown.length)} more: the failed runs</Link>
          {" · "}
          <Link to="/runs?status=stalled">the stalled runs</Link>
        </p>
      )}
    </section>
  );
}
