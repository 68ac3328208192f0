// The batch timeline: committed batches in the order they committed, their figures in
// a list a keyboard reaches, and a batch chosen there, or clicked on a chart, opening
// its receipt in the commit history.
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { cloneElement, createRef, type ReactElement } from "react";
import { afterEach, describe, expect, it, onTestFinished, vi } from "vitest";
import type { Batch } from "../../api/client";
import { BatchesTable, batchKey, type BatchesTableHandle } from "./BatchesTable";
import { BatchTimeline, TIMELINE_LIMIT, timelinePoints } from "./BatchTimeline";

// ResponsiveContainer draws nothing in jsdom (no layout): as there, unless a test asks
// for charts of a fixed size.
const charts = vi.hoisted(() => ({ sized: false }));
vi.mock("recharts", async (original) => ({
  ...(await original<typeof import("recharts")>()),
  ResponsiveContainer: ({ children }: { children: ReactElement<{ width?: number; height?: number }> }) =>
    charts.sized ? cloneElement(children, { width: 600, height: 240 }) : null,
}));

afterEach(() => {
  cleanup();
  charts.sized = false;
});

/** Charts 600 × 240 px at the page's top left, so pointer positions mean something. */
function sizedCharts() {
  charts.sized = true;
  const box = { x: 0, y: 0, left: 0, top: 0, right: 600, bottom: 240, width: 600, height: 240 };
  vi.spyOn(HTMLElement.prototype, "getBoundingClientRect").mockReturnValue({ ...box, toJSON: () => box } as DOMRect);
  vi.spyOn(HTMLElement.prototype, "offsetWidth", "get").mockReturnValue(600);
  vi.spyOn(HTMLElement.prototype, "offsetHeight", "get").mockReturnValue(240);
}

/** The select and its button under the charts (the figures' rows have buttons of their own). */
function picker() {
  return within(screen.getByTestId("timeline-open"));
}

/** Batch `id`, intended at 12:00:`id*10` and committed `took` seconds later. */
function committed(id: number | null, rows: number, took: number, commitMs: number, extra: Partial<Batch> = {}): Batch {
  const intent = Date.UTC(2026, 10, 1, 12, 0, (id ?? 0) * 10);
  return {
    table: "p.d.orders",
    query_id: "q",
    batch_id: id,
    write: null,
    mode: "pending",
    state: "committed",
    expected_rows: rows,
    rows,
    streams: [],
    resolved: false,
    stamped: false,
    replays: 0,
    rows_rewritten: 0,
    dead_lettered_rows: 0,
    dead_letter_table: null,
    dead_letter_streams: [],
    abort_reason: null,
    commit_ms: commitMs,
    intent_at: new Date(intent).toISOString(),
    committed_at: new Date(intent + took * 1000).toISOString(),
    aborted_at: null,
    skipped_at: null,
    commit_time: null,
    source_offsets: null,
    key_checksum: null,
    ...extra,
  };
}

const THREE = [committed(0, 1200, 4.5, 850), committed(1, 30, 2, 120), committed(2, 5000, 12.25, 3400)];

function cells(row: HTMLElement): (string | null)[] {
  return within(row)
    .getAllByRole("cell")
    .map((cell) => cell.textContent);
}

describe("timelinePoints", () => {
  it("keeps committed batches in commit order, with duration and commit latency in seconds", () => {
    const late = committed(5, 10, 1, 200);
    const early = committed(6, 20, 1, 300, { committed_at: "2026-11-01T11:00:00Z", intent_at: null });
    const intended = { ...committed(7, 5, 1, 0), state: "intent" as const, committed_at: null };
    const { points, omitted } = timelinePoints([late, intended, early]);

    expect(omitted).toBe(0);
    expect(points.map((p) => [p.label, p.rows, p.durationS, p.commitS])).toEqual([
      ["6", 20, null, 0.3], // its intent's time unknown: no duration
      ["5", 10, 1, 0.2],
    ]);
    expect(points.map((p) => p.key)).toEqual([batchKey(early), batchKey(late)]);
  });

  it("keeps the latest batches when there are more than the limit", () => {
    const many = Array.from({ length: 7 }, (_, i) => committed(i, i, 1, 10));
    const { points, omitted } = timelinePoints(many, 5);

    expect(omitted).toBe(2);
    expect(points.map((p) => p.label)).toEqual(["2", "3", "4", "5", "6"]);
  });
});

describe("BatchTimeline", () => {
  it("lists each committed batch's rows, duration and commit latency, newest first", () => {
    render(<BatchTimeline batches={THREE} onOpen={() => {}} />);

    const clock = (iso: string | null) =>
      new Date(iso ?? "").toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    expect(screen.getByTestId("timeline-summary").textContent).toBe(
      `3 committed batches, ${clock(THREE[0].committed_at)} to ${clock(THREE[2].committed_at)}. Click a batch to open its receipt.`,
    );
    expect(screen.queryByTestId("timeline-cut")).toBeNull();
    expect(screen.getByTestId("timeline-rows-chart")).toBeTruthy();
    expect(screen.getByTestId("timeline-time-chart")).toBeTruthy();
    const rows = screen.getAllByTestId("timeline-row");
    expect(rows.map((row) => [cells(row)[0], ...cells(row).slice(2, 5)])).toEqual([
      ["2", "5,000", "12.3 s", "3.4 s"],
      ["1", "30", "2.0 s", "120 ms"],
      ["0", "1,200", "4.5 s", "850 ms"],
    ]);
    // One table, no named writes: neither column.
    expect(within(screen.getByTestId("timeline-table")).queryByRole("columnheader", { name: "Table" })).toBeNull();
    const options = within(screen.getByTestId("timeline-select")).getAllByRole("option");
    expect(options.map((o) => o.textContent)).toEqual([
      "batch 2 to p.d.orders — 5,000 rows, took 12.3 s, commit 3.4 s",
      "batch 1 to p.d.orders — 30 rows, took 2.0 s, commit 120 ms",
      "batch 0 to p.d.orders — 1,200 rows, took 4.5 s, commit 850 ms",
    ]);
  });

  it("says in one line that it needs two committed batches", () => {
    render(<BatchTimeline batches={[THREE[0], { ...THREE[1], state: "intent", committed_at: null }]} onOpen={() => {}} />);

    expect(screen.getByText(/draws from two committed batches on; this run has one yet/)).toBeTruthy();
    expect(screen.queryByTestId("timeline-rows-chart")).toBeNull();
    expect(screen.queryByRole("button", { name: /Open receipt/ })).toBeNull();
  });

  it("draws the latest batches only, and says so", () => {
    const many = Array.from({ length: TIMELINE_LIMIT + 3 }, (_, i) => committed(i, 1, 1, 10));
    render(<BatchTimeline batches={many} onOpen={() => {}} />);

    expect(screen.getByTestId("timeline-cut").textContent).toBe("the latest 200");
    expect(screen.getByTestId("timeline-summary").textContent).toContain("3 earlier batches are in the commit history only");
    expect(screen.getAllByTestId("timeline-row")).toHaveLength(TIMELINE_LIMIT);
  });

  it("labels the writes of several tables, one row per write", () => {
    const batches = [
      committed(3, 10, 1, 100, { write: "0" }),
      committed(3, 2, 1, 100, { table: "p.d.summary", write: "id-daily" }),
      committed(null, 7, 1, 100, { write: "1" }),
    ];
    render(<BatchTimeline batches={batches} onOpen={() => {}} />);

    // Newest first: batch 3's two writes committed together (in the ledger's order), after
    // the batch write, intended at 12:00:00.
    expect(screen.getAllByTestId("timeline-row").map((row) => cells(row).slice(0, 3))).toEqual([
      ["3", "p.d.summary", "daily"],
      ["3", "p.d.orders", "#0"],
      ["write", "p.d.orders", "#1"],
    ]);
    const key = screen.getByRole("list", { name: "Bar colour by table" });
    expect(within(key).getAllByRole("listitem").map((item) => item.textContent)).toEqual(["p.d.orders", "p.d.summary"]);
    expect(picker().getByRole("button", { name: "Open receipt of batch 3 to p.d.summary, write daily" })).toBeTruthy();
  });

  it("opens the chosen batch's receipt from the select and from its row", () => {
    const onOpen = vi.fn();
    render(<BatchTimeline batches={THREE} onOpen={onOpen} />);

    const open = picker().getByRole("button", { name: "Open receipt of batch 2 to p.d.orders" });
    fireEvent.click(open);
    expect(onOpen).toHaveBeenLastCalledWith(batchKey(THREE[2]));

    fireEvent.change(screen.getByTestId("timeline-select"), { target: { value: batchKey(THREE[0]) } });
    fireEvent.click(picker().getByRole("button", { name: "Open receipt of batch 0 to p.d.orders" }));
    expect(onOpen).toHaveBeenLastCalledWith(batchKey(THREE[0]));

    const rowButton = within(screen.getAllByTestId("timeline-row")[1]).getByRole("button");
    expect(rowButton.getAttribute("aria-label")).toBe("Open receipt of batch 1 to p.d.orders");
    fireEvent.click(rowButton);
    expect(onOpen).toHaveBeenLastCalledWith(batchKey(THREE[1]));
    expect(onOpen).toHaveBeenCalledTimes(3);
  });

  it("expands the batch's receipt in the commit history and moves the focus to it", () => {
    const history = createRef<BatchesTableHandle>();
    const scrolled = vi.fn();
    Element.prototype.scrollIntoView = scrolled; // jsdom has none
    onTestFinished(() => {
      delete (Element.prototype as Partial<Element>).scrollIntoView;
    });
    const batches = [...THREE, { ...committed(3, 9, 1, 10), state: "intent" as const, committed_at: null }];
    render(
      <>
        <BatchTimeline batches={batches} onOpen={(key) => history.current?.openReceipt(key)} />
        <BatchesTable ref={history} batches={batches} />
      </>,
    );
    expect(screen.queryByTestId("batch-receipt")).toBeNull();

    fireEvent.change(screen.getByTestId("timeline-select"), { target: { value: batchKey(THREE[1]) } });
    fireEvent.click(picker().getByRole("button", { name: "Open receipt of batch 1 to p.d.orders" }));

    const receipts = screen.getAllByTestId("batch-receipt");
    expect(receipts).toHaveLength(1);
    const button = screen.getByRole("button", { name: "Receipt of batch 1 to p.d.orders" });
    expect(button.getAttribute("aria-expanded")).toBe("true");
    expect(button.getAttribute("aria-controls")).toBe(receipts[0].id);
    expect(document.activeElement).toBe(button);
    expect(scrolled).toHaveBeenCalledTimes(1);
    expect(scrolled.mock.contexts[0]).toBe(screen.getAllByTestId("batch-row")[1]);

    // Asked again, it stays open and scrolls again; the row's own button still closes it.
    fireEvent.click(picker().getByRole("button", { name: "Open receipt of batch 1 to p.d.orders" }));
    expect(screen.getAllByTestId("batch-receipt")).toHaveLength(1);
    expect(scrolled).toHaveBeenCalledTimes(2);
    fireEvent.click(button);
    expect(screen.queryByTestId("batch-receipt")).toBeNull();
  });

  it("shows a batch's figures on hover and opens its receipt when it is clicked", async () => {
    sizedCharts();
    const onOpen = vi.fn();
    render(<BatchTimeline batches={THREE} onOpen={onOpen} />);
    const chart = screen.getByTestId("timeline-rows-chart");
    expect(chart.querySelectorAll(".recharts-bar-rectangle")).toHaveLength(3);
    const plot = chart.querySelector(".recharts-wrapper")!;

    // The middle third of the plot is batch 1's.
    fireEvent.mouseMove(plot, { clientX: 320, clientY: 120 });
    const tip = await waitFor(() => {
      const shown = chart.querySelector(".chart-tooltip");
      expect(shown).not.toBeNull();
      return shown as HTMLElement;
    });
    expect(tip.querySelector("strong")?.textContent).toBe("Batch 1");
    expect(Array.from(tip.querySelectorAll("dt")).map((dt) => [dt.textContent, dt.nextElementSibling?.textContent])).toEqual(
      expect.arrayContaining([
        ["Table", "p.d.orders"],
        ["Rows", "30"],
        ["Duration", "2.0 s"],
        ["Commit latency", "120 ms"],
      ]),
    );
    fireEvent.click(plot, { clientX: 320, clientY: 120 });
    await waitFor(() => expect(onOpen).toHaveBeenCalledWith(batchKey(THREE[1])));
  });

  it("opens the batch a keyboard reader arrowed to on a chart with Enter", async () => {
    sizedCharts();
    const onOpen = vi.fn();
    render(<BatchTimeline batches={THREE} onOpen={onOpen} />);
    const surface = screen.getByTestId("timeline-time-chart").querySelector<SVGElement>("svg[tabindex='0']")!;

    surface.focus();
    fireEvent.keyDown(surface, { key: "ArrowRight" });
    const shown = await waitFor(() => {
      const title = screen.getByTestId("timeline-time-chart").querySelector(".chart-tooltip strong");
      expect(title?.textContent).toMatch(/^Batch \d$/);
      return Number(title?.textContent?.slice(-1));
    });
    fireEvent.keyDown(surface, { key: "Enter" });

    expect(onOpen).toHaveBeenCalledTimes(1);
    expect(onOpen).toHaveBeenCalledWith(batchKey(THREE[shown]));
  });
});
