// The alert rules: their list, and (for operators) creating, editing (a PUT replaces
// the whole rule) and deleting them. What is being edited is in the URL (?edit=).
import { useState } from "react";
import { api, errorMessage, type AlertRule, type AlertRuleCreate } from "../../api/client";
import { ConfirmDialog } from "../../components/ConfirmDialog";
import { DataTable, type Column } from "../../components/DataTable";
import { ErrorNote, QueryState, SeverityBadge, StatusBadge } from "../../components/ui";
import { formatSeconds } from "../../lib/format";
import type { Query } from "../../lib/useQuery";
import { formFailure, type FormFailure } from "./apiErrors";
import { RuleForm } from "./RuleForm";
import { describeParams, NEW_RULE, valuesOfRule } from "./ruleForm";
import { useUrlState } from "./urlState";

export type RulesQuery = Query<{ data: AlertRule[]; count: number }>;

export function RulesSection({ rules, operator }: { rules: RulesQuery; operator: boolean }) {
  const [params, change] = useUrlState();
  const editing = operator ? params.get("edit") : null;
  const [notice, setNotice] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<AlertRule | null>(null);

  const saved = (message: string) => {
    setNotice(message);
    change({ edit: null });
    rules.reload();
  };

  return (
    <>
      {notice && (
        <p role="status" className="notice" data-testid="rules-notice">
          {notice}
        </p>
      )}
      {editing && (
        <RuleEditor
          editing={editing}
          rules={rules.data?.data}
          onSaved={saved}
          onCancel={() => change({ edit: null })}
        />
      )}
      <section aria-labelledby="rules-title" data-testid="rules">
        <div className="section-header">
          <h2 id="rules-title">Rules</h2>
          {operator && !editing && (
            <button type="button" className="primary" onClick={() => change({ edit: "new" })}>
              New rule
            </button>
          )}
        </div>
        <QueryState query={rules} what="the alert rules">
          {({ data }) => (
            <RulesTable
              rules={data}
              operator={operator}
              onEdit={(rule) => change({ edit: rule.id })}
              onDelete={setDeleting}
            />
          )}
        </QueryState>
      </section>
      {deleting && (
        <DeleteRuleDialog
          rule={deleting}
          onClose={() => setDeleting(null)}
          onDeleted={(rule) => {
            setDeleting(null);
            if (params.get("edit") === String(rule.id)) change({ edit: null });
            setNotice(`Rule “${rule.name}” deleted; its firing alerts resolve at the next evaluation.`);
            rules.reload();
          }}
        />
      )}
    </>
  );
}

/** The form for a new rule (`editing` = "new") or for the rule whose id it is. */
function RuleEditor({
  editing,
  rules,
  onSaved,
  onCancel,
}: {
  editing: string;
  rules: AlertRule[] | undefined;
  onSaved: (message: string) => void;
  onCancel: () => void;
}) {
  if (editing === "new") {
    const create = async (body: AlertRuleCreate): Promise<FormFailure | null> => {
      const { data, error, response } = await api.POST("/api/alert-rules", { body });
      if (!data) return formFailure(error, response.status);
      onSaved(`Rule “${data.name}” created.`);
      return null;
    };
    return <RuleForm key="new" title="New rule" initial={NEW_RULE} submitLabel="Create rule" onSubmit={create} onCancel={onCancel} />;
  }
  if (!rules) return null; // the list is loading; the form opens once it is there
  const rule = rules.find((r) => String(r.id) === editing);
  if (!rule) return <ErrorNote message={`There is no rule ${editing} to edit (was it deleted?).`} onRetry={onCancel} />;
  const replace = async (body: AlertRuleCreate): Promise<FormFailure | null> => {
    const { data, error, response } = await api.PUT("/api/alert-rules/{rule_id}", {
      params: { path: { rule_id: rule.id } },
      body,
    });
    if (!data) return formFailure(error, response.status);
    onSaved(`Rule “${data.name}” saved.`);
    return null;
  };
  return (
    <RuleForm
      key={rule.id}
      title={`Edit rule “${rule.name}”`}
      initial={valuesOfRule(rule)}
      submitLabel="Save rule"
      onSubmit={replace}
      onCancel={onCancel}
    />
  );
}

function RulesTable({
  rules,
  operator,
  onEdit,
  onDelete,
}: {
  rules: AlertRule[];
  operator: boolean;
  onEdit: (rule: AlertRule) => void;
  onDelete: (rule: AlertRule) => void;
}) {
  const columns: Array<Column<AlertRule> | false> = [
    {
      id: "name",
      header: "Name",
      cell: (rule) => (
        <>
          {rule.name}
          {rule.description && <div className="muted">{rule.description}</div>}
        </>
      ),
      sortValue: (rule) => rule.name,
    },
    { id: "kind", header: "Kind", cell: (rule) => rule.kind, className: "mono", sortValue: (rule) => rule.kind },
    {
      id: "params",
      header: "Params",
      cell: (rule) => describeParams(rule) || <span className="muted">defaults</span>,
      className: "mono",
    },
    {
      id: "scope",
      header: "Scope",
      cell: (rule) => (rule.scope === "all" ? "all runs" : `${rule.scope} ${rule.scope_value ?? ""}`),
    },
    { id: "severity", header: "Severity", cell: (rule) => <SeverityBadge severity={rule.severity} /> },
    { id: "for", header: "For", cell: (rule) => formatSeconds(rule.for_s), sortValue: (rule) => rule.for_s },
    {
      id: "repeat",
      header: "Repeat",
      cell: (rule) => formatSeconds(rule.repeat_interval_s, "never"),
      sortValue: (rule) => rule.repeat_interval_s,
    },
    {
      id: "state",
      header: "State",
      cell: (rule) => (
        <StatusBadge status={rule.enabled ? "ok" : "inactive"} label={rule.enabled ? "enabled" : "disabled"} />
      ),
    },
    operator && {
      id: "actions",
      header: "Actions",
      cell: (rule) => (
        <div className="actions">
          <button type="button" onClick={() => onEdit(rule)} aria-label={`Edit rule ${rule.name}`}>
            Edit
          </button>
          <button type="button" className="danger" onClick={() => onDelete(rule)} aria-label={`Delete rule ${rule.name}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <DataTable
      label="Rules"
      columns={columns}
      rows={rules}
      rowKey={(rule) => rule.id}
      rowAttributes={(rule) => ({ "data-testid": "rule-row", "data-rule-id": rule.id })}
      empty={`No rules yet.${operator ? " Create one to be told when exactly-once is at risk." : ""}`}
    />
  );
}

function DeleteRuleDialog({
  rule,
  onClose,
  onDeleted,
}: {
  rule: AlertRule;
  onClose: () => void;
  onDeleted: (rule: AlertRule) => void;
}) {
  const remove = async () => {
    const { error, response } = await api.DELETE("/api/alert-rules/{rule_id}", {
      params: { path: { rule_id: rule.id } },
    });
    if (!response.ok) return errorMessage(error, `the backend answered ${response.status}`);
    onDeleted(rule);
    return null;
  };
  return (
    <ConfirmDialog title="Delete this rule?" confirmLabel="Delete rule" busyLabel="Deleting…" act={remove} onClose={onClose}>
      <p>
        Rule <strong>{rule.name}</strong> stops being evaluated; its firing alerts resolve (and say so) at the next
        round. Its alerts' history stays.
      </p>
    </ConfirmDialog>
  );
}
