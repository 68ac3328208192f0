// Cells both Tables views show: a table's runs by status and its latest check's verdict.
import type { TableTotals } from "../../api/client";
import { StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { runStatusCounts } from "./tableData";

export function RunsByStatus({ byStatus }: { byStatus: Record<string, number> }) {
  const counts = runStatusCounts(byStatus);
  if (counts.length === 0) return null;
  return (
    <span className="tp-runs-by-status" data-testid="table-runs-by-status">
      {counts.map(([status, runs]) => (
        <StatusBadge key={status} status={status} label={`${formatCount(runs)} ${status}`} />
      ))}
    </span>
  );
}

export function VerdictBadge({ verdict }: { verdict: TableTotals["reconciliation"] }) {
  if (!verdict) {
    return (
      <span data-testid="table-verdict" data-status="never">
        <StatusBadge status="never" label="never checked" />
      </span>
    );
  }
  return (
    <span className="tp-verdict" data-testid="table-verdict" data-status={verdict.status}>
      <StatusBadge status={verdict.status} />
      <span className="muted tp-verdict-time">{formatTime(verdict.checked_at)}</span>
    </span>
  );
}
