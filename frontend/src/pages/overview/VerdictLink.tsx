// The latest reconciliation's verdict and age, linking to where the check is shown.
import { Link } from "react-router";
import { TimeAgo } from "../../components/TimeAgo";
import { StatusBadge } from "../../components/ui";
import { formatTime } from "../../lib/format";
import type { OverviewVerdict } from "./types";

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
      <StatusBadge status={verdict.status} /> <TimeAgo iso={verdict.checked_at} now={now} />
    </Link>
  );
}
