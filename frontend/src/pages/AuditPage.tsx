// Audit log: every mutating call, newest first, filtered by actor, action and time.
import { useSearchParams } from "react-router";
import { Empty, QueryState } from "../components/ui";
import { useIsOperator } from "../lib/auth";
import { useQuery } from "../lib/useQuery";
import { AuditFilters } from "./audit/AuditFilters";
import { AUDIT_PAGE, auditQueryKey, loadAudit } from "./audit/auditQuery";
import { AuditTable } from "./audit/AuditTable";
import { Pager } from "../components/Pager";
import { pageFromParams } from "../lib/paging";
import "./audit/audit.css";

export function AuditPage() {
  const operator = useIsOperator();
  return (
    <>
      <div className="page-header">
        <h1>Audit log</h1>
      </div>
      {operator ? (
        <AuditLog />
      ) : (
        <section>
          <p className="state state-error" role="alert" data-testid="audit-forbidden">
            The audit log is for operators only; sign in with an operator token to read it.
          </p>
        </section>
      )}
    </>
  );
}

function AuditLog() {
  const [params] = useSearchParams();
  const page = pageFromParams(params, AUDIT_PAGE.defaultLimit, AUDIT_PAGE.maxLimit);
  // The URL's params are read inside the loader, at request time (see loadAudit).
  const entries = useQuery(() => loadAudit(params), `audit?${auditQueryKey(params)}`);

  return (
    <>
      <AuditFilters />
      <section aria-label="Audit entries">
        <div className="audit-toolbar">
          <button type="button" onClick={entries.reload} disabled={entries.loading}>
            {entries.loading && entries.data ? "Refreshing…" : "Refresh"}
          </button>
        </div>
        <QueryState query={entries} what="the audit log">
          {(answer) =>
            answer.count === 0 ? (
              <Empty>No audit entries match.</Empty>
            ) : (
              <>
                <p className="muted" data-testid="audit-count">
                  {answer.count} {answer.count === 1 ? "entry" : "entries"}
                </p>
                <AuditTable entries={answer.data} />
                <Pager page={page} shown={answer.data.length} count={answer.count} label="Audit log" />
              </>
            )
          }
        </QueryState>
      </section>
    </>
  );
}
