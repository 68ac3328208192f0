// A cell both Tables views show: a table's runs by status. (Its figures, the latest
// check among them, are components/TableFigures.tsx, as the overview shows them.)
import { StatusBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
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
