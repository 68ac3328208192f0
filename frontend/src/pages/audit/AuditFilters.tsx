// The audit log's filters: who, which action, and when. Typed filters apply on submit
// (not on every keystroke); the time range applies as soon as it is picked.
import type { FormEvent } from "react";
import { useSearchParams } from "react-router";
import { TimeRangePicker } from "../../components/TimeRangePicker";
import { KNOWN_ACTIONS } from "./auditQuery";

const FILTERED_BY = ["actor", "action", "range", "since", "until", "offset"];

export function AuditFilters() {
  const [params, setParams] = useSearchParams();
  const actor = params.get("actor") ?? "";
  const action = params.get("action") ?? "";
  const filtered = FILTERED_BY.some((name) => params.has(name));

  const apply = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next = new URLSearchParams(params);
    for (const name of ["actor", "action"] as const) {
      const value = String(form.get(name) ?? "").trim();
      if (value) next.set(name, value);
      else next.delete(name);
    }
    next.delete("offset"); // new filters start at their first page
    setParams(next);
  };

  const clear = () => {
    const next = new URLSearchParams(params);
    for (const name of FILTERED_BY) next.delete(name);
    setParams(next);
  };

  return (
    <div className="filters audit-filters">
      {/* Keyed by the URL's values so going back or following a link shows what is applied. */}
      <form key={`${actor}\u0000${action}`} className="filters" onSubmit={apply} aria-label="Audit filters">
        <label>
          Actor
          <input name="actor" defaultValue={actor} placeholder="any" data-testid="audit-actor" autoComplete="off" />
        </label>
        <label>
          Action
          <input
            name="action"
            defaultValue={action}
            placeholder="any"
            list="audit-actions"
            data-testid="audit-action"
            autoComplete="off"
          />
        </label>
        <datalist id="audit-actions">
          {KNOWN_ACTIONS.map((name) => (
            <option key={name} value={name} />
          ))}
        </datalist>
        <button type="submit">Apply</button>
      </form>
      <TimeRangePicker />
      {filtered && (
        <button type="button" onClick={clear}>
          Clear filters
        </button>
      )}
    </div>
  );
}
