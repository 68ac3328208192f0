// A small line over 24 hourly counts, drawn inline (no chart library for 24 points).
// Screen readers get the sentence in `label`; everyone gets the total beside it.
import { formatCount } from "../../lib/format";

const WIDTH = 96;
const HEIGHT = 22;
const PAD = 2;

/** SVG polyline points for `values`, scaled to the box; a flat line at the bottom when all are 0. */
export function sparkPoints(values: number[], width = WIDTH, height = HEIGHT): string {
  if (values.length === 0) return "";
  const peak = Math.max(...values, 0);
  const step = values.length > 1 ? (width - 2 * PAD) / (values.length - 1) : 0;
  return values
    .map((value, index) => {
      const x = PAD + index * step;
      const y = height - PAD - (peak > 0 ? (value / peak) * (height - 2 * PAD) : 0);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(" ");
}

export function Sparkline({
  values,
  label,
  tone,
  testId,
  figure,
}: {
  values: number[];
  label: string;
  tone: "info" | "bad";
  testId?: string;
  /** Its total is this figure of a table (data-figure, as on the Tables pages). */
  figure?: string;
}) {
  const total = values.reduce((sum, value) => sum + value, 0);
  return (
    <span className={`ov-spark ov-spark-${tone}${total > 0 ? " ov-spark-some" : ""}`} data-testid={testId}
      data-figure={figure}
      data-value={figure ? total : undefined}
    >
      <svg width={WIDTH} height={HEIGHT} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={label}>
        <polyline points={sparkPoints(values)} fill="none" stroke="currentColor" strokeWidth="1.5" />
      </svg>
      <span className="ov-spark-value">{formatCount(total)}</span>
    </span>
  );
}

/** What a sparkline says to a screen reader: the total and the busiest hour. */
export function sparkLabel(what: string, hours: { start: string; count: number }[]): string {
  const total = hours.reduce((sum, hour) => sum + hour.count, 0);
  if (total === 0) return `${what}: none in the last 24 hours`;
  const busiest = hours.reduce((top, hour) => (hour.count > top.count ? hour : top));
  const at = new Date(busiest.start).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
  return `${what}: ${formatCount(total)} in the last 24 hours, most (${formatCount(busiest.count)}) in the hour from ${at}`;
}
