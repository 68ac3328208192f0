// Append requests by response code over time (stacked), and rows appended per second.
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { WriteErrors } from "../../api/client";
import { Empty } from "../../components/ui";
import { formatCount, formatShare } from "../../lib/format";

// Fixed colours per code, so OK is always the same green on every chart.
const CODE_COLOURS: Record<string, string> = {
  OK: "#3f9c55",
  ALREADY_EXISTS: "#d9a21b",
  OUT_OF_RANGE: "#d6553f",
};
const OTHER_COLOURS = ["#7d5bbe", "#3b82c4", "#8a8f98", "#c2548f"];

export function codeColour(code: string, index: number): string {
  return CODE_COLOURS[code] ?? OTHER_COLOURS[index % OTHER_COLOURS.length];
}

function clock(iso: string): string {
  return new Date(iso).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
}

export function RequestCharts({ metrics }: { metrics: WriteErrors }) {
  const codes = Object.keys(metrics.totals);
  const points = metrics.series.map((step) => ({
    time: clock(step.start),
    ...step.counts,
    rowsPerSecond: Math.round((step.rows_ok / metrics.step_s) * 10) / 10,
  }));
  return (
    <div className="grid-2">
      <section aria-labelledby="requests-title">
        <h2 id="requests-title">Append requests by response code</h2>
        <p className="muted" data-testid="request-totals">
          {codes.map((code) => `${code} ${formatCount(metrics.totals[code])} (${formatShare(metrics.rates[code])})`).join(" · ")}
        </p>
        {metrics.requests === 0 ? (
          <Empty>No append requests recorded for this run.</Empty>
        ) : (
          <div className="chart" data-testid="requests-chart">
            <ResponsiveContainer>
              <BarChart data={points}>
                <CartesianGrid strokeDasharray="3 3" opacity={0.3} />
                <XAxis dataKey="time" />
                <YAxis allowDecimals={false} />
                <Tooltip />
                <Legend />
                {codes.map((code, index) => (
                  <Bar key={code} dataKey={code} stackId="codes" fill={codeColour(code, index)} isAnimationActive={false} />
                ))}
              </BarChart>
            </ResponsiveContainer>
          </div>
        )}
      </section>
      <section aria-labelledby="rows-title">
        <h2 id="rows-title">Rows appended per second</h2>
        <p className="muted">
          Per {metrics.step_s >= 120 ? `${metrics.step_s / 60} minutes` : "minute"}, rows acknowledged OK; retried
          rows answered ALREADY_EXISTS are not counted again.
        </p>
        {metrics.requests === 0 ? (
          <Empty>Nothing appended yet.</Empty>
        ) : (
          <div className="chart" data-testid="rows-chart">
            <ResponsiveContainer>
              {/* Bars, not a line: a short run has one or two points, and a line of one is a dot. */}
              <BarChart data={points}>
                <CartesianGrid strokeDasharray="3 3" opacity={0.3} />
                <XAxis dataKey="time" />
                <YAxis />
                <Tooltip />
                <Bar dataKey="rowsPerSecond" name="rows/s" fill="#3b82c4" isAnimationActive={false} />
              </BarChart>
            </ResponsiveContainer>
          </div>
        )}
      </section>
    </div>
  );
}
