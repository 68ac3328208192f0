// A new webhook endpoint: where to, in which format, and which alerts it is sent.
import { useState, type FormEvent } from "react";
import type { AlertRule, WebhookCreate } from "../../api/client";
import { ErrorNote } from "../../components/ui";
import type { FormFailure } from "./apiErrors";
import { FormField } from "../../components/FormField";
import { SEVERITIES, type FieldErrors, type Severity } from "./ruleForm";

const NEW_ENDPOINT: WebhookCreate = {
  name: "",
  url: "",
  format: "standard",
  enabled: true,
  rule_ids: [],
  severities: [],
  send_resolved: true,
};

/** `items` with `item` in it or not. */
function toggled<T>(items: T[], item: T, on: boolean): T[] {
  return on ? [...items.filter((i) => i !== item), item] : items.filter((i) => i !== item);
}

export function WebhookForm({
  rules,
  onSubmit,
  onCancel,
}: {
  rules: AlertRule[];
  onSubmit: (body: WebhookCreate) => Promise<FormFailure | null>;
  onCancel: () => void;
}) {
  const [values, setValues] = useState<WebhookCreate>(NEW_ENDPOINT);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [general, setGeneral] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const set = <K extends keyof WebhookCreate>(key: K, value: WebhookCreate[K]) =>
    setValues((current) => ({ ...current, [key]: value }));
  const severities = values.severities ?? [];
  const ruleIds = values.rule_ids ?? [];

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    const failure = await onSubmit({ ...values, name: values.name.trim(), url: values.url.trim() });
    setBusy(false);
    setErrors(failure?.fields ?? {});
    setGeneral(failure?.general ?? null);
  };

  return (
    <section aria-labelledby="webhook-form-title" data-testid="webhook-form">
      <h2 id="webhook-form-title">New webhook endpoint</h2>
      <form onSubmit={submit} noValidate>
        {general && <ErrorNote message={general} />}
        <div className="form-grid">
          <FormField id="webhook-name" label="Name" error={errors.name} help="the receiver named in each body">
            <input value={values.name} onChange={(e) => set("name", e.target.value)} maxLength={200} />
          </FormField>
          <FormField
            id="webhook-url"
            label="URL"
            error={errors.url}
            help="http or https; link-local and cloud metadata addresses are refused"
          >
            <input type="url" value={values.url} onChange={(e) => set("url", e.target.value)} placeholder="https://" />
          </FormField>
          <FormField
            id="webhook-format"
            label="Format"
            error={errors.format}
            help="standard: Alertmanager's body; slack: {text} for an incoming webhook. Both signed."
          >
            <select value={values.format} onChange={(e) => set("format", e.target.value as WebhookCreate["format"])}>
              <option value="standard">standard</option>
              <option value="slack">slack</option>
            </select>
          </FormField>
          <span>Severities</span>
          <fieldset aria-describedby="webhook-severities-help">
            <legend className="visually-hidden">Severities delivered</legend>
            {SEVERITIES.map((severity: Severity) => (
              <label key={severity}>
                <input
                  type="checkbox"
                  checked={severities.includes(severity)}
                  onChange={(e) => set("severities", toggled(severities, severity, e.target.checked))}
                />
                {severity}
              </label>
            ))}
            <span id="webhook-severities-help" className="muted field-help">
              none ticked: all
            </span>
            {errors.severities && <span className="field-error">{errors.severities}</span>}
          </fieldset>
          <span>Rules</span>
          <fieldset aria-describedby="webhook-rules-help">
            <legend className="visually-hidden">Rules delivered</legend>
            {rules.map((rule) => (
              <label key={rule.id}>
                <input
                  type="checkbox"
                  checked={ruleIds.includes(rule.id)}
                  onChange={(e) => set("rule_ids", toggled(ruleIds, rule.id, e.target.checked))}
                />
                {rule.name}
              </label>
            ))}
            <span id="webhook-rules-help" className="muted field-help">
              {rules.length ? "none ticked: every rule, including rules made later" : "every rule (there are none yet)"}
            </span>
            {errors.rule_ids && <span className="field-error">{errors.rule_ids}</span>}
          </fieldset>
          <FormField id="webhook-send_resolved" label="Send resolved" error={errors.send_resolved} help="deliver resolved notifications too">
            <input type="checkbox" checked={values.send_resolved} onChange={(e) => set("send_resolved", e.target.checked)} />
          </FormField>
          <FormField id="webhook-enabled" label="Enabled" error={errors.enabled}>
            <input type="checkbox" checked={values.enabled} onChange={(e) => set("enabled", e.target.checked)} />
          </FormField>
        </div>
        <div className="actions form-actions">
          <button type="submit" className="primary" disabled={busy}>
            {busy ? "Creating…" : "Create endpoint"}
          </button>
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
