// The run's committed batches over time, as Spark UI's streaming tab draws them: rows
// per batch (bars) above how long each batch took from intent to commit and how long
// its commit took (lines). Hover a batch for its figures; click it (or choose it below
// the charts, or arrow to it on a chart and press Enter) to open its receipt in the
// commit history.
import { useEffect, useMemo, useRef, useState, type KeyboardEvent, type RefObject } from "react";
import {
  Bar,
  BarChart,
  CartesianGrid,
  Cell,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
  useActiveTooltipDataPoints,
  type MouseHandlerDataParam,
  type TooltipContentProps,
} from "recharts";
import type { Batch } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { Empty } from "../../components/ui";
import { formatCount, formatDuration, formatTime } from "../../lib/format";
import { batchKey, batchName, writeLabel } from "./BatchesTable";

/** The most batches drawn: the latest ones. */
export const TIMELINE_LIMIT = 200;

// Fixed colours that read on the light and the dark background alike (as RequestCharts').
const ROWS_COLOUR = "#3b82c4";
const TABLE_COLOURS = ["#3b82c4", "#2a9d8f", "#c2548f", "#d9a21b", "#8a8f98", "#7d5bbe"];
const DURATION_COLOUR = "#7d5bbe";
const COMMIT_COLOUR = "#d6803f";

/** One committed batch record, as the charts and the list show it. */
export interface TimelinePoint {
  key: string;
  /** Unique per point: the x category, so two batches committed in one second stay two bars. */
  slot: string;
  /** "7", or "write" for a batch write. */
  label: string;
  /** "batch 7 to p.d.orders, write #1". */
  name: string;
  table: string;
  write: string | null;
  committedAt: string;
  rows: number | null;
  /** committed_at − intent_at, seconds; null when the intent's time is unknown. */
  durationS: number | null;
  /** commit_ms in seconds. */
  commitS: number | null;
}

/** The latest `limit` committed batches in the order they committed, and how many were left out. */
export function timelinePoints(batches: Batch[], limit = TIMELINE_LIMIT): { points: TimelinePoint[]; omitted: number } {
  const committed = batches
    .map((batch, order) => ({ batch, order, at: Date.parse(batch.committed_at ?? "") }))
    .filter(({ batch, at }) => batch.state === "committed" && !Number.isNaN(at))
    .sort((a, b) => a.at - b.at || a.order - b.order);
  const kept = committed.slice(Math.max(0, committed.length - limit));
  const points = kept.map(({ batch, at }, index): TimelinePoint => {
    const intent = Date.parse(batch.intent_at ?? "");
    const duration = Number.isNaN(intent) || at < intent ? null : (at - intent) / 1000;
    return {
      key: batchKey(batch),
      slot: String(index),
      label: batch.batch_id === null ? "write" : String(batch.batch_id),
      name: batchName(batch),
      table: batch.table,
      write: batch.write,
      committedAt: batch.committed_at ?? "",
      rows: batch.rows ?? batch.expected_rows,
      durationS: duration,
      commitS: batch.commit_ms === null ? null : batch.commit_ms / 1000,
    };
  });
  return { points, omitted: committed.length - kept.length };
}

function seconds(s: number | null): string {
  return s === null ? "–" : formatDuration(s * 1000);
}

function clock(iso: string): string {
  return new Date(iso).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** What a batch's tooltip, option and row say. */
function figures(point: TimelinePoint): string {
  return `${formatCount(point.rows)} rows, took ${seconds(point.durationS)}, commit ${seconds(point.commitS)}`;
}

/** The figures table's columns: a table's and a write's only when the run has several. */
function figureColumns(
  severalTables: boolean,
  namedWrites: boolean,
  onOpen: (key: string) => void,
): Array<Column<TimelinePoint> | false> {
  return [
    { id: "batch", header: "Batch", cell: (p) => p.label },
    severalTables && { id: "table", header: "Table", cell: (p) => p.table, sortValue: (p) => p.table },
    namedWrites && { id: "write", header: "Write", cell: (p) => writeLabel(p.write) },
    { id: "committed-at", header: "Committed at", cell: (p) => formatTime(p.committedAt) },
    { id: "rows", header: "Rows", cell: (p) => formatCount(p.rows), align: "end", sortValue: (p) => p.rows },
    {
      id: "duration",
      header: "Duration",
      cell: (p) => seconds(p.durationS),
      align: "end",
      sortValue: (p) => p.durationS,
    },
    {
      id: "commit-latency",
      header: "Commit latency",
      cell: (p) => seconds(p.commitS),
      align: "end",
      sortValue: (p) => p.commitS,
    },
    {
      id: "receipt",
      header: <span className="visually-hidden">Receipt</span>,
      cell: (p) => (
        <button type="button" onClick={() => onOpen(p.key)} aria-label={`Open receipt of ${p.name}`}>
          Open receipt
        </button>
      ),
    },
  ];
}

export function BatchTimeline({ batches, onOpen }: { batches: Batch[]; onOpen: (key: string) => void }) {
  const { points, omitted } = useMemo(() => timelinePoints(batches), [batches]);
  const tables = useMemo(() => Array.from(new Set(points.map((p) => p.table))), [points]);
  const severalTables = tables.length > 1;
  const namedWrites = points.some((p) => p.write !== null);
  const latest = points.at(-1)?.key ?? "";
  const [chosen, setChosen] = useState(latest);
  // The choice follows the newest batch until the reader picks one that is still drawn.
  const selected = points.some((p) => p.key === chosen) ? chosen : latest;
  // The batch each chart's tooltip shows (under the pointer or the keyboard's cursor).
  const activeRows = useRef<TimelinePoint | null>(null);
  const activeTime = useRef<TimelinePoint | null>(null);

  if (points.length < 2) {
    return (
      <section aria-labelledby="timeline-title">
        <h2 id="timeline-title">Batch timeline</h2>
        <Empty>
          The timeline draws from two committed batches on; this run has {points.length === 0 ? "none" : "one"} yet.
        </Empty>
      </section>
    );
  }

  const openAt = (state: MouseHandlerDataParam) => {
    const index = state.activeTooltipIndex;
    const point = index === null || index === undefined ? undefined : points[Number(index)];
    if (point) onOpen(point.key);
  };
  // A keyboard reader arrows along a chart (its tooltip follows) and opens with Enter.
  const openOnEnter = (active: RefObject<TimelinePoint | null>) => (event: KeyboardEvent) => {
    if (event.key === "Enter" && active.current) {
      event.preventDefault();
      onOpen(active.current.key);
    }
  };
  const tableColour = (table: string) => TABLE_COLOURS[tables.indexOf(table) % TABLE_COLOURS.length];
  const first = points[0];
  const last = points[points.length - 1];
  const tooltip = (props: TooltipContentProps) => (
    <BatchTooltip {...props} namedWrites={namedWrites} />
  );

  return (
    <section aria-labelledby="timeline-title" className="batch-timeline">
      <h2 id="timeline-title">Batch timeline</h2>
      <p className="muted" data-testid="timeline-summary">
        {formatCount(points.length)} committed batches, {clock(first.committedAt)} to {clock(last.committedAt)}
        {omitted > 0 && (
          <>
            {" "}
            — <strong data-testid="timeline-cut">the latest {formatCount(TIMELINE_LIMIT)}</strong>; {formatCount(omitted)}{" "}
            earlier {omitted === 1 ? "batch is" : "batches are"} in the commit history only
          </>
        )}
        . Click a batch to open its receipt.
      </p>
      <div className="grid-2">
        <div>
          <h3 id="timeline-rows-title">Rows committed per batch</h3>
          {severalTables && (
            <ul className="chart-key" aria-label="Bar colour by table">
              {tables.map((table) => (
                <li key={table}>
                  <span className="chart-swatch" style={{ background: tableColour(table) }} aria-hidden="true" />
                  <span className="mono">{table}</span>
                </li>
              ))}
            </ul>
          )}
          <div
            className="chart"
            role="group"
            aria-labelledby="timeline-rows-title"
            data-testid="timeline-rows-chart"
            onKeyDown={openOnEnter(activeRows)}
          >
            <ResponsiveContainer>
              <BarChart data={points} syncId="batch-timeline" onClick={openAt} style={{ cursor: "pointer" }}>
                <CartesianGrid strokeDasharray="3 3" opacity={0.3} />
                <XAxis dataKey="slot" tickFormatter={(slot: string) => clock(points[Number(slot)]?.committedAt ?? "")} minTickGap={24} />
                <YAxis allowDecimals={false} tickFormatter={(n: number) => formatCount(n)} />
                <Tooltip content={tooltip} cursor={{ fill: "currentColor", fillOpacity: 0.08 }} />
                <Bar dataKey="rows" name="rows" fill={ROWS_COLOUR} isAnimationActive={false}>
                  {severalTables && points.map((p) => <Cell key={p.key} fill={tableColour(p.table)} />)}
                </Bar>
                <ActiveTracker into={activeRows} />
              </BarChart>
            </ResponsiveContainer>
          </div>
        </div>
        <div>
          <h3 id="timeline-time-title">Batch duration and commit latency</h3>
          <div
            className="chart"
            role="group"
            aria-labelledby="timeline-time-title"
            data-testid="timeline-time-chart"
            onKeyDown={openOnEnter(activeTime)}
          >
            <ResponsiveContainer>
              <LineChart data={points} syncId="batch-timeline" onClick={openAt} style={{ cursor: "pointer" }}>
                <CartesianGrid strokeDasharray="3 3" opacity={0.3} />
                <XAxis dataKey="slot" tickFormatter={(slot: string) => clock(points[Number(slot)]?.committedAt ?? "")} minTickGap={24} />
                <YAxis unit=" s" />
                <Tooltip content={tooltip} cursor={{ stroke: "currentColor", strokeOpacity: 0.35 }} />
                <Legend />
                <Line
                  dataKey="durationS"
                  name="duration (intent → commit)"
                  stroke={DURATION_COLOUR}
                  dot={points.length <= 60 && { r: 2.5, fill: DURATION_COLOUR, stroke: DURATION_COLOUR }}
                  connectNulls
                  isAnimationActive={false}
                />
                <Line
                  dataKey="commitS"
                  name="commit latency"
                  stroke={COMMIT_COLOUR}
                  dot={points.length <= 60 && { r: 2.5, fill: COMMIT_COLOUR, stroke: COMMIT_COLOUR }}
                  connectNulls
                  isAnimationActive={false}
                />
                <ActiveTracker into={activeTime} />
              </LineChart>
            </ResponsiveContainer>
          </div>
        </div>
      </div>
      <div className="timeline-open" data-testid="timeline-open">
        <label>
          Batch
          <select value={selected} onChange={(event) => setChosen(event.target.value)} data-testid="timeline-select">
            {points
              .slice()
              .reverse()
              .map((p) => (
                <option key={p.key} value={p.key}>
                  {p.name} — {figures(p)}
                </option>
              ))}
          </select>
        </label>
        <button type="button" onClick={() => onOpen(selected)}>
          Open receipt of {points.find((p) => p.key === selected)?.name ?? "the batch"}
        </button>
      </div>
      <details className="timeline-figures">
        <summary>Figures per batch</summary>
        <DataTable
          caption="Committed batches drawn on the timeline, newest first"
          captionClassName="visually-hidden"
          testId="timeline-table"
          columns={figureColumns(severalTables, namedWrites, onOpen)}
          rows={points.slice().reverse()}
          rowKey={(p) => p.key}
          rowAttributes={() => ({ "data-testid": "timeline-row" })}
        />
      </details>
    </section>
  );
}

/** Keeps the batch a chart's tooltip shows (pointer or keyboard) where Enter finds it. */
function ActiveTracker({ into }: { into: RefObject<TimelinePoint | null> }) {
  const shown = useActiveTooltipDataPoints<TimelinePoint>();
  useEffect(() => {
    into.current = shown?.[0] ?? null;
  }, [shown, into]);
  return null;
}

function BatchTooltip({
  active,
  payload,
  namedWrites,
}: TooltipContentProps & { namedWrites: boolean }) {
  const point = payload?.[0]?.payload as TimelinePoint | undefined;
  if (!active || !point) return null;
  return (
    <div className="chart-tooltip">
      <strong>{point.label === "write" ? "Batch write" : `Batch ${point.label}`}</strong>
      <dl>
        <dt>Table</dt>
        <dd className="mono">{point.table}</dd>
        {namedWrites && (
          <>
            <dt>Write</dt>
            <dd>{writeLabel(point.write)}</dd>
          </>
        )}
        <dt>Committed</dt>
        <dd>{formatTime(point.committedAt)}</dd>
        <dt>Rows</dt>
        <dd>{formatCount(point.rows)}</dd>
        <dt>Duration</dt>
        <dd>{seconds(point.durationS)}</dd>
        <dt>Commit latency</dt>
        <dd>{seconds(point.commitS)}</dd>
      </dl>
    </div>
  );
}
