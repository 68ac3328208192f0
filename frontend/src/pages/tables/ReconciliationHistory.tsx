// A table's whole-table checks, newest first; a check just run here shows at the top
// at once, before the history is re-read. With none, it says which check of a run into
// the table is the latest (the one the totals show), so the two never seem to disagree.
import { Link } from "react-router";
import type { Reconciliation } from "../../api/client";
import type { OverviewVerdict } from "../../components/TableFigures";
import { Empty, QueryState } from "../../components/ui";
import type { Query } from "../../lib/useQuery";
import { ReconciliationCheck } from "./ReconciliationCheck";
import { mergeChecks } from "./tableData";

type History = { data: Reconciliation[]; count: number };

export function ReconciliationHistory({
  history,
  justRun,
  latest,
}: {
  history: Query<History>;
  justRun: Reconciliation[];
  latest: OverviewVerdict | null | undefined;
}) {
  return (
    <QueryState query={history} what="the reconciliation history">
      {(answer) => {
        const checks = mergeChecks(justRun, answer.data);
        if (checks.length === 0) {
          return latest?.scope === "run" ? (
            <Empty>
              No check of the whole table yet. Its latest check was of run{" "}
              <Link to={latest.link} className="mono">
                {latest.run_id}
              </Link>{" "}
              ({latest.status}).
            </Empty>
          ) : (
            <Empty>This table has never been reconciled.</Empty>
          );
        }
        const total = Math.max(answer.count, checks.length);
        return (
          <>
            {total > checks.length && (
              <p className="muted" data-testid="reconciliation-count">
                The newest {checks.length} of {total} checks.
              </p>
            )}
            <div className="tp-checks" data-testid="reconciliation-history">
              {checks.map((check, index) => (
                <ReconciliationCheck key={check.id} check={check} expanded={index === 0} />
              ))}
            </div>
          </>
        );
      }}
    </QueryState>
  );
}
