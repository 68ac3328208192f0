// One row per write: a micro-batch that writes two tables, one of them twice, is three
// rows, each with its own rows and state (before, the writes shared one React key).
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { Batch } from "../../api/client";
import { MODE_NOTES } from "../../lib/modes";
import { BatchesTable, batchKey } from "./BatchesTable";

afterEach(cleanup);

function write(table: string, place: string | null, rows: number, state: Batch["state"]): Batch {
  return {
    table,
    query_id: "q",
    batch_id: 7,
    write: place,
    mode: "pending",
    state,
    expected_rows: rows,
    rows: state === "committed" ? rows : null,
    streams: [],
    resolved: false,
    stamped: false,
    replays: 0,
    rows_rewritten: 0,
    dead_lettered_rows: 0,
    dead_letter_table: null,
    dead_letter_streams: [],
    abort_reason: null,
    commit_ms: null,
    intent_at: "2026-01-01T00:00:00Z",
    committed_at: null,
    aborted_at: null,
    skipped_at: null,
  };
}

describe("BatchesTable", () => {
  it("shows each write of a micro-batch as a row of its own", () => {
    const batches = [
      write("p.d.orders", "0", 30, "committed"),
      write("p.d.orders", "1", 20, "intent"),
      write("p.d.summary", "id-daily", 2, "committed"),
    ];
    expect(new Set(batches.map(batchKey)).size).toBe(3);

    render(<BatchesTable batches={batches} />);

    const rows = screen.getAllByTestId("batch-row");
    expect(rows).toHaveLength(3);
    expect(rows.map((row) => within(row).getAllByRole("cell").slice(0, 4).map((c) => c.textContent))).toEqual([
      ["7", "p.d.orders", "#0", "committed"],
      ["7", "p.d.orders", "#1", "intended"],
      ["7", "p.d.summary", "daily", "committed"],
    ]);
  });

  it("shows a buffered-mode write's mode with what it means", () => {
    render(<BatchesTable batches={[{ ...write("p.d.orders", null, 5, "intent"), mode: "buffered" }]} />);

    const mode = within(screen.getByTestId("batch-row"))
      .getAllByRole("cell")
      .find((cell) => cell.textContent === "buffered");
    expect(mode?.getAttribute("title")).toBe(MODE_NOTES.buffered);
  });

  it("notes the rows a write set aside, naming the dead-letter table on hover", () => {
    const batch = { ...write("p.d.orders", null, 5, "committed"), dead_lettered_rows: 1200, dead_letter_table: "p.d.dlq" };
    render(<BatchesTable batches={[batch]} />);

    const note = within(screen.getByTestId("batch-row")).getByText("1,200 rows set aside");
    expect(note.getAttribute("title")).toBe("dead-letter table p.d.dlq");
  });

  it("keeps the streaming sink's table narrow: no table or write column", () => {
    render(<BatchesTable batches={[write("p.d.orders", null, 5, "committed")]} />);

    expect(screen.queryByRole("columnheader", { name: "Table" })).toBeNull();
    expect(screen.queryByRole("columnheader", { name: "Write" })).toBeNull();
  });
});
