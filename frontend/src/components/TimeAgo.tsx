// How long ago something happened, its exact time on hover.
import { formatDuration, formatTime } from "../lib/format";

/** "12 min ago", measured against `now`: when the backend answered (so a test's clock is its own). */
export function TimeAgo({ iso, now }: { iso: string | null | undefined; now: string }) {
  if (!iso) return <span className="muted">–</span>;
  const ms = Math.max(0, Date.parse(now) - Date.parse(iso));
  return (
    <time dateTime={iso} title={formatTime(iso)}>
      {ms < 1000 ? "just now" : `${formatDuration(ms)} ago`}
    </time>
  );
}
