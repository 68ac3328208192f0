// Small pieces every page uses: status and severity badges, the loading, error and empty
// states, figures and table ids.
import type { ReactNode } from "react";

const TONES: Record<string, string> = {
  succeeded: "ok",
  ok: "ok",
  committed: "ok",
  finalized: "ok",
  firing: "bad",
  failed: "bad",
  mismatch: "bad",
  error: "bad",
  aborted: "bad",
  stalled: "warn",
  pending: "warn",
  resuming: "info",
  running: "info",
  intended: "info",
  resolved: "muted",
  inactive: "muted",
  refused: "muted", // a second driver turned away; the run is the first one's
  // an overwrite's steps (its rows staged, then swapped in)
  staging: "info",
  staged: "warn",
  swap_asked: "warn",
  swapped: "ok",
};

export function StatusBadge({ status, label }: { status: string; label?: string }) {
  return (
    <span className={`badge badge-${TONES[status] ?? "muted"}`} data-status={status}>
      {label ?? status}
    </span>
  );
}

const SEVERITY_TONES: Record<string, string> = { critical: "bad", warning: "warn", info: "info" };

/** An alert's severity; "–" when it has none. */
export function SeverityBadge({ severity }: { severity: string | undefined }) {
  if (!severity) return <span className="muted">–</span>;
  return (
    <span className={`badge badge-${SEVERITY_TONES[severity] ?? "muted"}`} data-severity={severity}>
      {severity}
    </span>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="state" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function ErrorNote({ message, onRetry }: { message: string; onRetry?: () => void }) {
  return (
    <div className="state state-error" role="alert">
      <span>{message}</span>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="state state-empty">{children}</p>;
}

/** Loading until the first answer; an error above the last good answer afterwards. */
export function QueryState<T>({
  query,
  what,
  children,
}: {
  query: { data: T | undefined; error: string | null; reload: () => void };
  what: string;
  children: (data: T) => ReactNode;
}) {
  if (query.data === undefined) {
    return query.error ? <ErrorNote message={query.error} onRetry={query.reload} /> : <Loading what={what} />;
  }
  return (
    <>
      {query.error && <ErrorNote message={`Could not refresh ${what}: ${query.error}`} onRetry={query.reload} />}
      {children(query.data)}
    </>
  );
}

/** A labelled figure; `note` is what it means, shown on hover (and to screen readers as
 * the figure's description). */
export function Stat({ label, value, testId, note }: { label: string; value: ReactNode; testId?: string; note?: string }) {
  return (
    <div className="stat">
      <dt>{label}</dt>
      <dd data-testid={testId} title={note} className={note ? "has-note" : undefined}>
        {value}
      </dd>
    </div>
  );
}

/** A `project.dataset.table` id that wraps only at its dots. */
export function TableId({ id }: { id: string }) {
  const parts = id.split(".");
  return (
    <span className="mono table-id">
      {parts.map((part, index) => (
        <span key={index}>
          {index > 0 && (
            <>
              .<wbr />
            </>
          )}
          {part}
        </span>
      ))}
    </span>
  );
}

/** An error code's name (`ALREADY_EXISTS`) that a narrow column header may break after its
 * last underscore. */
export function CodeName({ code }: { code: string }) {
  const cut = code.lastIndexOf("_") + 1;
  return (
    <>
      {code.slice(0, cut)}
      <wbr />
      {code.slice(cut)}
    </>
  );
}
