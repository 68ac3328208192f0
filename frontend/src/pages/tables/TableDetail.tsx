// `/tables/:table`: one table's totals, its runs, and its reconciliations, which an
// operator can add to.
import { Link } from "react-router";
import { api, type TableTotals } from "../../api/client";
import { ErrorNote, Loading } from "../../components/ui";
import { useIsOperator } from "../../lib/auth";
import { useQuery, type Query } from "../../lib/useQuery";
import { findTableTotals } from "./findTable";
import { ReconcileTableForm } from "./ReconcileTableForm";
import { ReconciliationHistory } from "./ReconciliationHistory";
import { TableRuns, useTableRuns } from "./TableRuns";
import { TableSummary } from "./TableSummary";
import { useLiveReload } from "../../lib/live";
import { useTableReconcile } from "./useTableReconcile";

const HISTORY_LIMIT = 20;

export function TableDetail({ table }: { table: string }) {
  const operator = useIsOperator();
  const totals = useQuery(() => findTableTotals(table), `table-totals:${table}`);
  const { runs, page } = useTableRuns(table);
  const history = useQuery(
    () => api.GET("/api/tables/{table}/reconciliations", { params: { path: { table }, query: { limit: HISTORY_LIMIT } } }),
    `table-reconciliations:${table}`,
  );
  // The new check changes the table's verdict too.
  const checking = useTableReconcile(table, () => {
    history.reload();
    totals.reload();
  });
  useLiveReload(() => {
    totals.reload();
    runs.reload();
    history.reload();
  });

  const unknown = totals.data === null;
  // The key is prefilled from the totals, so the form waits for them (or for their failure).
  const formReady = totals.data !== undefined || totals.error !== null;
  return (
    <>
      <p className="tp-breadcrumbs">
        <Link to="/tables">← Tables</Link>
      </p>
      <div className="page-header">
        <h1 className="tp-mono-heading">{table}</h1>
      </div>
      <section aria-labelledby="table-totals-title">
        <h2 id="table-totals-title">Totals</h2>
        <TotalsState totals={totals} table={table} />
      </section>
      {!unknown && (
        <>
          <TableRuns runs={runs} page={page} />
          <section aria-labelledby="table-reconciliations-title">
            <h2 id="table-reconciliations-title">Reconciliation</h2>
            {operator && formReady && (
              <ReconcileTableForm
                initialKey={totals.data?.key_column ?? ""}
                busy={checking.busy}
                error={checking.error}
                onReconcile={(key) => void checking.reconcile(key)}
              />
            )}
            <ReconciliationHistory
              history={history}
              justRun={checking.justRun}
              latest={totals.data?.figures.reconciliation}
            />
          </section>
        </>
      )}
    </>
  );
}

/** The totals, or why there are none: still loading, failed, or a table no run loaded. */
function TotalsState({ totals, table }: { totals: Query<TableTotals | null>; table: string }) {
  if (totals.data === undefined) {
    return totals.error ? (
      <ErrorNote message={`Could not read the table's totals: ${totals.error}`} onRetry={totals.reload} />
    ) : (
      <Loading what="the table's totals" />
    );
  }
  if (totals.data === null) {
    return (
      <p className="state state-empty" role="status" data-testid="table-unknown">
        Unknown table: no run has loaded <code>{table}</code>. <Link to="/tables">See the tables that were loaded</Link>.
      </p>
    );
  }
  return (
    <>
      {totals.error && <ErrorNote message={`Could not refresh the totals: ${totals.error}`} onRetry={totals.reload} />}
      <TableSummary totals={totals.data} />
    </>
  );
}
