// Small pieces the overview's sections share.
import { Link } from "react-router";
import { StatusBadge, TableId } from "../../components/ui";
import { formatDuration, formatTime } from "../../lib/format";
import type { OverviewVerdict } from "./types";

/** "12 min ago", measured against when the backend answered (so a test's clock is its own). */
export function Ago({ iso, now }: { iso: string | null | undefined; now: string }) {
  if (!iso) return <span className="muted">–</span>;
  const ms = Math.max(0, Date.parse(now) - Date.parse(iso));
  return (
    <time dateTime={iso} title={formatTime(iso)}>
      {ms < 1000 ? "just now" : `${formatDuration(ms)} ago`}
    </time>
  );
}

export function RunLink({ runId }: { runId: string }) {
  return (
    <Link to={`/runs/${encodeURIComponent(runId)}`} className="mono">
      {runId}
    </Link>
  );
}

export function TableLink({ table, testId }: { table: string; testId?: string }) {
  return (
    <Link to={`/tables/${encodeURIComponent(table)}`} data-testid={testId}>
      <TableId id={table} />
    </Link>
  );
}

export function VerdictLink({ verdict, now }: { verdict: OverviewVerdict | null | undefined; now: string }) {
  if (!verdict) return <span className="muted">never checked</span>;
  const what = verdict.scope === "run" ? `run ${verdict.run_id}` : "the whole table";
  return (
    <Link
      to={verdict.link}
      className="ov-verdict"
      data-testid="overview-verdict"
      data-status={verdict.status}
      aria-label={`Reconciliation of ${what}: ${verdict.status}, ${formatTime(verdict.checked_at)}`}
    >
      <StatusBadge status={verdict.status} /> <Ago iso={verdict.checked_at} now={now} />
    </Link>
  );
}
