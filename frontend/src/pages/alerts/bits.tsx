// Small pieces the alerts page's sections share.
import { Link } from "react-router";
import { formatCount } from "../../lib/format";

const SEVERITY_TONE: Record<string, string> = { critical: "bad", warning: "warn", info: "info" };

export function SeverityBadge({ severity }: { severity: string | undefined }) {
  if (!severity) return <span className="muted">–</span>;
  return (
    <span className={`badge badge-${SEVERITY_TONE[severity] ?? "muted"}`} data-severity={severity}>
      {severity}
    </span>
  );
}

export function RunLink({ runId }: { runId: string | null | undefined }) {
  if (!runId) return <span className="muted">–</span>;
  return (
    <Link to={`/runs/${encodeURIComponent(runId)}`} className="mono">
      {runId}
    </Link>
  );
}

export function TableLink({ table }: { table: string | null | undefined }) {
  if (!table) return <span className="muted">–</span>;
  return (
    <Link to={`/tables/${encodeURIComponent(table)}`} className="mono">
      {table}
    </Link>
  );
}

/** Previous/next over a list the backend pages with limit and offset. */
export function Pager({
  label,
  offset,
  limit,
  count,
  onOffset,
}: {
  label: string;
  offset: number;
  limit: number;
  count: number;
  onOffset: (offset: number) => void;
}) {
  if (count <= limit && offset === 0) return null;
  const last = Math.min(offset + limit, count);
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - limit))}>
        ← Newer
      </button>
      <span className="muted">
        {formatCount(count === 0 ? 0 : offset + 1)}–{formatCount(last)} of {formatCount(count)}
      </span>
      <button type="button" disabled={last >= count} onClick={() => onOffset(offset + limit)}>
        Older →
      </button>
    </nav>
  );
}

/** Seconds as a duration a reader compares ("4 h 00 min"), "0 s" as `zero`. */
export function seconds(s: number, zero = "0 s"): string {
  if (s === 0) return zero;
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return s % 60 ? `${minutes} min ${Math.round(s % 60)} s` : `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
}
