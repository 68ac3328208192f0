// Creating or editing (replacing whole) an alert rule. Only the params of the chosen
// kind are shown and sent; the backend's 422 is shown next to the field it names.
import { useState, type FormEvent } from "react";
import type { AlertRuleCreate } from "../../api/client";
import { ErrorNote } from "../../components/ui";
import type { FormFailure } from "./apiErrors";
import { FormField } from "../../components/FormField";
import {
  buildRule,
  KINDS,
  PARAM_FIELDS,
  PARAMS_OF_KIND,
  SCOPES,
  SEVERITIES,
  type FieldErrors,
  type ParamName,
  type RuleFormValues,
} from "./ruleForm";

export function RuleForm({
  title,
  initial,
  submitLabel,
  onSubmit,
  onCancel,
}: {
  title: string;
  initial: RuleFormValues;
  submitLabel: string;
  /** Resolves to null when saved, else to what the backend refused. */
  onSubmit: (body: AlertRuleCreate) => Promise<FormFailure | null>;
  onCancel: () => void;
}) {
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [general, setGeneral] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const set = <K extends keyof RuleFormValues>(key: K, value: RuleFormValues[K]) =>
    setValues((current) => ({ ...current, [key]: value }));

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const built = buildRule(values);
    if (built.errors) {
      setErrors(built.errors);
      setGeneral("Some fields need a change.");
      return;
    }
    setBusy(true);
    const failure = await onSubmit(built.body);
    setBusy(false);
    setErrors(failure?.fields ?? {});
    setGeneral(failure?.general ?? null);
  };

  const kind = KINDS.find((k) => k.kind === values.kind);
  const params = PARAMS_OF_KIND[values.kind];
  return (
    <section aria-labelledby="rule-form-title" data-testid="rule-form">
      <h2 id="rule-form-title">{title}</h2>
      <form onSubmit={submit} noValidate>
        {general && <ErrorNote message={general} />}
        <div className="form-grid">
          <FormField id="rule-name" label="Name" error={errors.name} help="becomes the alertname label">
            <input value={values.name} onChange={(e) => set("name", e.target.value)} required maxLength={200} />
          </FormField>
          <FormField id="rule-kind" label="Kind" error={errors.kind} help={kind?.watches}>
            <select value={values.kind} onChange={(e) => set("kind", e.target.value as RuleFormValues["kind"])}>
              {KINDS.map((k) => (
                <option key={k.kind} value={k.kind}>
                  {k.label} ({k.kind})
                </option>
              ))}
            </select>
          </FormField>
          {params.map((name) => (
            <ParamField key={name} name={name} values={values} error={errors[`params.${name}`]} set={set} />
          ))}
          {params.length === 0 && (
            <>
              <span className="muted">Parameters</span>
              <span className="muted">This kind takes none.</span>
            </>
          )}
          <FormField id="rule-scope" label="Scope" error={errors.scope} help="what it watches">
            <select value={values.scope} onChange={(e) => set("scope", e.target.value as RuleFormValues["scope"])}>
              {SCOPES.map((scope) => (
                <option key={scope} value={scope}>
                  {scope === "all" ? "all runs" : `one ${scope}`}
                </option>
              ))}
            </select>
          </FormField>
          {values.scope !== "all" && (
            <FormField
              id="rule-scope_value"
              label={values.scope === "job" ? "Job name" : "Table"}
              error={errors.scope_value}
              help={values.scope === "job" ? "its --job name" : "project.dataset.table"}
            >
              <input value={values.scope_value} onChange={(e) => set("scope_value", e.target.value)} />
            </FormField>
          )}
          <FormField id="rule-severity" label="Severity" error={errors.severity}>
            <select
              value={values.severity}
              onChange={(e) => set("severity", e.target.value as RuleFormValues["severity"])}
            >
              {SEVERITIES.map((severity) => (
                <option key={severity} value={severity}>
                  {severity}
                </option>
              ))}
            </select>
          </FormField>
          <FormField id="rule-for_s" label="For (s)" error={errors.for_s} help="the condition holds this long before it fires">
            <input type="number" min={0} step="any" value={values.for_s} onChange={(e) => set("for_s", e.target.value)} />
          </FormField>
          <FormField
            id="rule-repeat_interval_s"
            label="Repeat every (s)"
            error={errors.repeat_interval_s}
            help="notify again this often while firing; 0: never"
          >
            <input
              type="number"
              min={0}
              step="any"
              value={values.repeat_interval_s}
              onChange={(e) => set("repeat_interval_s", e.target.value)}
            />
          </FormField>
          <FormField id="rule-enabled" label="Enabled" error={errors.enabled} help="a disabled rule resolves its alerts">
            <input type="checkbox" checked={values.enabled} onChange={(e) => set("enabled", e.target.checked)} />
          </FormField>
          <FormField id="rule-description" label="Description" error={errors.description} help="sent as the description annotation">
            <textarea rows={2} value={values.description} onChange={(e) => set("description", e.target.value)} />
          </FormField>
        </div>
        <div className="actions form-actions">
          <button type="submit" className="primary" disabled={busy}>
            {busy ? "Saving…" : submitLabel}
          </button>
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}

function ParamField({
  name,
  values,
  error,
  set,
}: {
  name: ParamName;
  values: RuleFormValues;
  error: string | undefined;
  set: <K extends keyof RuleFormValues>(key: K, value: RuleFormValues[K]) => void;
}) {
  const { label, help } = PARAM_FIELDS[name];
  const id = `rule-params-${name}`;
  const common = { id, label, error, help: help(values.kind) };
  switch (name) {
    case "per":
      return (
        <FormField {...common}>
          <select value={values.per} onChange={(e) => set("per", e.target.value as RuleFormValues["per"])}>
            <option value="">default (minute)</option>
            <option value="minute">minute</option>
            <option value="share">share</option>
          </select>
        </FormField>
      );
    case "codes":
      return (
        <FormField {...common}>
          <input value={values.codes} onChange={(e) => set("codes", e.target.value)} placeholder="UNAVAILABLE, INTERNAL" />
        </FormField>
      );
    case "include_succeeded":
    case "duplicates_only":
      return (
        <FormField {...common}>
          <input type="checkbox" checked={values[name]} onChange={(e) => set(name, e.target.checked)} />
        </FormField>
      );
    default:
      return (
        <FormField {...common}>
          <input type="number" min={0} step="any" value={values[name]} onChange={(e) => set(name, e.target.value)} />
        </FormField>
      );
  }
}
