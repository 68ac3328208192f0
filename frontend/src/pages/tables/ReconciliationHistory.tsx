// A table's whole-table checks, newest first; a check just run here shows at the top
// at once, before the history is re-read.
import type { Reconciliation } from "../../api/client";
import { Empty, QueryState } from "../../components/ui";
import type { Query } from "../../lib/useQuery";
import { ReconciliationCheck } from "./ReconciliationCheck";
import { mergeChecks } from "./tableData";

type History = { data: Reconciliation[]; count: number };

export function ReconciliationHistory({ history, justRun }: { history: Query<History>; justRun: Reconciliation[] }) {
  return (
    <QueryState query={history} what="the reconciliation history">
      {(answer) => {
        const checks = mergeChecks(justRun, answer.data);
        if (checks.length === 0) return <Empty>This table has never been reconciled.</Empty>;
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
