// A table's figures as the overview, the Tables list and a table's page all show them,
// from the one definition the API answers (`OverviewTablePublic`: the overview's rows and
// `figures` on `/api/tables`). Each carries `data-figure` so a test can read one page
// against another.
import { Link } from "react-router";
import type { components } from "../api/schema";
import { formatCount, formatTime } from "../lib/format";
import { TimeAgo } from "./TimeAgo";
import { StatusBadge } from "./ui";

export type TableFigures = components["schemas"]["OverviewTablePublic"];
export type OverviewVerdict = components["schemas"]["OverviewVerdictPublic"];

/** Fresh or stale, and how long since the last commit. */
export function Freshness({ figures, now }: { figures: TableFigures; now: string }) {
  const stale = figures.freshness === "stale";
  return (
    <span className="ov-freshness" data-figure="freshness" data-value={figures.freshness}>
      <span className={`badge badge-${stale ? "warn" : "ok"}`} data-testid="table-freshness" data-freshness={figures.freshness}>
        {figures.freshness}
      </span>{" "}
      {figures.last_commit_at ? (
        <span className="muted">
          last commit <TimeAgo iso={figures.last_commit_at} now={now} />
        </span>
      ) : (
        <span className="muted">never committed</span>
      )}
    </span>
  );
}

/** A count of the figures: `figure` names it for tests (rows-today, already-exists, ...). */
export function FigureCount({ figure, count }: { figure: string; count: number }) {
  return (
    <span data-figure={figure} data-value={count}>
      {formatCount(count)}
    </span>
  );
}

/** The newest check touching the table (of a run into it or of it whole), linking to it. */
export function VerdictLink({ verdict, now }: { verdict: OverviewVerdict | null | undefined; now: string }) {
  if (!verdict) {
    return (
      <span className="muted nowrap" data-figure="check" data-value="never" data-testid="table-verdict" data-status="never">
        never checked
      </span>
    );
  }
  const what = verdict.scope === "run" ? `run ${verdict.run_id}` : "the whole table";
  return (
    <Link
      to={verdict.link}
      className="ov-verdict"
      data-testid="overview-verdict"
      data-status={verdict.status}
      data-figure="check"
      data-value={`${verdict.id}:${verdict.status}`}
      title={`Reconciliation of ${what}`}
      aria-label={`Reconciliation of ${what}: ${verdict.status}, ${formatTime(verdict.checked_at)}`}
    >
      <StatusBadge status={verdict.status} /> <TimeAgo iso={verdict.checked_at} now={now} />
    </Link>
  );
}
