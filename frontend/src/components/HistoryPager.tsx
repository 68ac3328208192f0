// Newer / older through a newest-first history the backend pages with limit and offset.
import { formatCount } from "../lib/format";

/** Nothing when everything fits on one page. */
export function HistoryPager({
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
