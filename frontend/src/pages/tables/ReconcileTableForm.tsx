// "Reconcile table" (operators): checks the whole table against BigQuery now. It can
// take seconds, so the button says it is busy and cannot be pressed twice.
import { useState, type FormEvent } from "react";
import { ErrorNote } from "../../components/ui";
import { keyColumnProblem } from "./tableData";

export function ReconcileTableForm({
  initialKey,
  busy,
  error,
  onReconcile,
}: {
  initialKey: string;
  busy: boolean;
  error: string | null;
  onReconcile: (key: string | null) => void;
}) {
  const [key, setKey] = useState(initialKey);
  const problem = keyColumnProblem(key);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (busy || problem) return;
    onReconcile(key.trim() || null); // empty: the backend uses the latest run's key
  };

  return (
    <form className="tp-reconcile-form" onSubmit={submit} aria-busy={busy} data-testid="reconcile-form">
      <div className="filters">
        <label>
          Key column
          <input
            name="key"
            value={key}
            onChange={(event) => setKey(event.target.value)}
            placeholder="the latest run's"
            aria-invalid={problem !== null}
            aria-describedby="reconcile-key-help"
            data-testid="reconcile-key"
            spellCheck={false}
            autoComplete="off"
          />
        </label>
        <button type="submit" className="primary" disabled={busy || problem !== null} data-testid="reconcile-button">
          {busy ? "Reconciling…" : "Reconcile table"}
        </button>
        <span role="status" aria-live="polite" className="muted">
          {busy ? "Counting the table's rows in BigQuery…" : ""}
        </span>
      </div>
      <p id="reconcile-key-help" className={problem ? "field-error" : "muted"}>
        {problem ?? "Rows are compared by this column; leave it empty to use the latest run's key."}
      </p>
      {error && (
        <div data-testid="reconcile-error">
          <ErrorNote message={`Could not reconcile the table: ${error}`} />
        </div>
      )}
    </form>
  );
}
