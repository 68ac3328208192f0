// The rule form's values and the API's AlertRuleCreate, both ways. The form keeps
// every input as typed (strings and booleans); only the params the chosen kind takes
// are sent, since the backend refuses (422) a parameter of another kind.
import type { AlertRule, AlertRuleCreate } from "../../api/client";

export type RuleKind = AlertRuleCreate["kind"];
export type RuleScope = AlertRuleCreate["scope"];
export type Severity = AlertRuleCreate["severity"];
type Params = NonNullable<AlertRuleCreate["params"]>;
export type ParamName = keyof Params;

export const KINDS: { kind: RuleKind; label: string; watches: string }[] = [
  { kind: "out_of_range", label: "Out of range", watches: "OUT_OF_RANGE answers: a gap in the client's offsets" },
  {
    kind: "already_exists_rate",
    label: "Already-exists rate",
    watches: "ALREADY_EXISTS answers above a rate (deduplication is normal; only a high rate is news)",
  },
  { kind: "error_rate", label: "Error rate", watches: "other error codes (UNAVAILABLE, INTERNAL, …) above a rate" },
  { kind: "reconciliation", label: "Reconciliation", watches: "the latest reconciliation is a mismatch" },
  { kind: "run_failed", label: "Run failed", watches: "a run's status is failed" },
  { kind: "run_stalled", label: "Run stalled", watches: "a run is stalled (or silent too long)" },
  { kind: "orphan_streams", label: "Orphan streams", watches: "PENDING streams left uncommitted too long" },
  {
    kind: "rows_dead_lettered",
    label: "Rows dead-lettered",
    watches: "rows BigQuery refused, set aside in a dead-letter table by batches committed in the window",
  },
];

export const SEVERITIES: Severity[] = ["critical", "warning", "info"];
export const SCOPES: RuleScope[] = ["all", "job", "table"];

/** The params each kind takes (backend/services/alert_rules.py PARAMS_OF_KIND). */
export const PARAMS_OF_KIND: Record<RuleKind, ParamName[]> = {
  out_of_range: ["window_s", "threshold"],
  already_exists_rate: ["threshold", "per", "window_s"],
  error_rate: ["threshold", "per", "window_s", "codes"],
  reconciliation: ["duplicates_only"],
  run_failed: [],
  run_stalled: ["silent_s"],
  orphan_streams: ["older_than_s", "include_succeeded"],
  rows_dead_lettered: ["window_s", "threshold"],
};

/** How each param reads in the form; `help` says its default, as the backend applies it. */
export const PARAM_FIELDS: Record<ParamName, { label: string; help: (kind: RuleKind) => string }> = {
  window_s: { label: "Window (s)", help: () => "seconds looked at, rounded to whole minutes; default 300" },
  threshold: {
    label: "Threshold",
    help: (kind) =>
      kind === "out_of_range"
        ? "fires above this many answers in the window; default 0 (any)"
        : kind === "rows_dead_lettered"
          ? "fires above this many rows set aside in the window; default 0 (any)"
          : "required: fires above it (per minute, or a share 0..1)",
  },
  per: { label: "Threshold per", help: () => "requests per minute over the window, or a share of all requests" },
  codes: {
    label: "Codes",
    help: () => "comma-separated response codes counted; default every code but OK, ALREADY_EXISTS, OUT_OF_RANGE",
  },
  older_than_s: { label: "Older than (s)", help: () => "uncommitted this long; default 3600" },
  include_succeeded: {
    label: "Include succeeded runs",
    help: () => "count streams of succeeded runs too (those are failed task attempts' streams)",
  },
  duplicates_only: { label: "Duplicates only", help: () => "fire only when duplicate keys are found" },
  silent_s: {
    label: "Silent for (s)",
    help: () => "also fire for a running run silent this long; default: the stall sweep's verdict only",
  },
};

export type RuleFormValues = {
  name: string;
  kind: RuleKind;
  scope: RuleScope;
  scope_value: string;
  severity: Severity;
  for_s: string;
  repeat_interval_s: string;
  enabled: boolean;
  description: string;
  window_s: string;
  threshold: string;
  per: "" | "minute" | "share";
  codes: string;
  older_than_s: string;
  include_succeeded: boolean;
  duplicates_only: boolean;
  silent_s: string;
};

export const NEW_RULE: RuleFormValues = {
  name: "",
  kind: "run_failed",
  scope: "all",
  scope_value: "",
  severity: "warning",
  for_s: "0",
  repeat_interval_s: "14400",
  enabled: true,
  description: "",
  window_s: "",
  threshold: "",
  per: "",
  codes: "",
  older_than_s: "",
  include_succeeded: false,
  duplicates_only: false,
  silent_s: "",
};

const text = (n: number | null | undefined) => (n === null || n === undefined ? "" : String(n));

/** The form filled with an existing rule, to edit it. */
export function valuesOfRule(rule: AlertRule): RuleFormValues {
  const params = rule.params ?? {};
  return {
    name: rule.name,
    kind: rule.kind,
    scope: rule.scope,
    scope_value: rule.scope_value ?? "",
    severity: rule.severity,
    for_s: String(rule.for_s),
    repeat_interval_s: String(rule.repeat_interval_s),
    enabled: rule.enabled,
    description: rule.description ?? "",
    window_s: text(params.window_s),
    threshold: text(params.threshold),
    per: params.per ?? "",
    codes: (params.codes ?? []).join(", "),
    older_than_s: text(params.older_than_s),
    include_succeeded: params.include_succeeded ?? false,
    duplicates_only: params.duplicates_only ?? false,
    silent_s: text(params.silent_s),
  };
}

/** Field errors, keyed as the backend names fields: "name", "params.threshold", ... */
export type FieldErrors = Record<string, string>;

export type Built = { body: AlertRuleCreate; errors: null } | { body: null; errors: FieldErrors };

/**
 * The request body the form stands for. Only what cannot be sent at all is refused
 * here (a number field holding something else); the rest (a missing threshold, a
 * scope without its value) is the backend's to judge, so there is one set of rules.
 */
export function buildRule(values: RuleFormValues): Built {
  const errors: FieldErrors = {};
  const number = (field: string, raw: string): number | undefined => {
    if (raw.trim() === "") return undefined;
    const parsed = Number(raw);
    if (!Number.isFinite(parsed)) errors[field] = "enter a number";
    return parsed;
  };
  const required = (field: string, raw: string): number => {
    if (raw.trim() === "") errors[field] = "enter a number of seconds";
    return number(field, raw) ?? 0;
  };

  const params: Params = {};
  for (const name of PARAMS_OF_KIND[values.kind]) {
    const path = `params.${name}`;
    switch (name) {
      case "per":
        if (values.per) params.per = values.per;
        break;
      case "codes": {
        const codes = values.codes
          .split(/[\s,]+/)
          .map((code) => code.trim().toUpperCase())
          .filter(Boolean);
        if (codes.length) params.codes = codes;
        break;
      }
      case "include_succeeded":
      case "duplicates_only":
        if (values[name]) params[name] = true; // false is the default: leave it out
        break;
      default: {
        const value = number(path, values[name]);
        if (value !== undefined) params[name] = value;
      }
    }
  }

  const body: AlertRuleCreate = {
    name: values.name.trim(),
    kind: values.kind,
    scope: values.scope,
    scope_value: values.scope === "all" ? null : values.scope_value.trim() || null,
    severity: values.severity,
    params,
    for_s: required("for_s", values.for_s),
    repeat_interval_s: required("repeat_interval_s", values.repeat_interval_s),
    enabled: values.enabled,
    description: values.description.trim() || null,
  };
  return Object.keys(errors).length ? { body: null, errors } : { body, errors: null };
}

/** A rule's params in a few words, for the rules list. */
export function describeParams(rule: AlertRule): string {
  const params = rule.params ?? {};
  const parts: string[] = [];
  for (const name of PARAMS_OF_KIND[rule.kind]) {
    const value = params[name];
    if (value === null || value === undefined || value === false) continue;
    parts.push(Array.isArray(value) ? `${name}=${value.join(",")}` : value === true ? name : `${name}=${value}`);
  }
  return parts.join(" · ");
}
