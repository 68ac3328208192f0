// One row per write: a micro-batch that writes two tables, one of them twice, is three
// rows, each with its own rows and state (before, the writes shared one React key).
import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { Batch } from "../../api/client";
import { MODE_NOTES } from "../../lib/modes";
import { BatchesTable, batchKey, keyChecksum } from "./BatchesTable";

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
    commit_time: null,
    source_offsets: null,
    key_checksum: null,
  };
}

describe("BatchesTable", () => {
  it("shows a change data capture write's upserts and deletes per batch, and no such columns for appends", () => {
    const cdc = { ...write("p.d.accounts", null, 30, "committed"), mode: "default" as const, upserts: 24, deletes: 6 };
    render(<BatchesTable batches={[cdc]} />);
    const headers = screen.getAllByRole("columnheader").map((h) => h.textContent);
    expect(headers).toEqual(expect.arrayContaining(["Upserts", "Deletes"]));
    const cells = within(screen.getByTestId("batch-row")).getAllByRole("cell").map((c) => c.textContent);
    expect(cells.slice(2, 5)).toEqual(["30", "24", "6"]);
    cleanup();

    render(<BatchesTable batches={[write("p.d.orders", null, 30, "committed")]} />);
    expect(screen.queryByRole("columnheader", { name: /Upserts/ })).toBeNull();
  });

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

  it("opens a committed write's receipt from its row, and closes it again", () => {
    const batch: Batch = {
      ...write("p.d.orders", null, 150, "committed"),
      streams: [
        { stream: "projects/p/datasets/d/tables/orders/streams/s0", rows: 100, bytes: 2048 },
        { stream: "projects/p/datasets/d/tables/orders/streams/s1", rows: 50, bytes: 512 },
      ],
      commit_time: "2026-11-01T12:00:06Z",
      committed_at: "2026-11-01T12:00:07Z",
      source_offsets: ['{"logOffset":41}', '{"orders":{"0":1200,"1":1187}}'],
      key_checksum: 9876543210,
    };
    render(<BatchesTable batches={[batch, { ...write("p.d.orders", null, 5, "intent"), batch_id: 8 }]} />);

    expect(screen.queryByTestId("batch-receipt")).toBeNull();
    const buttons = screen.getAllByRole("button", { name: /^Receipt/ });
    expect(buttons).toHaveLength(1); // an intended write has no receipt yet
    const [button] = buttons;
    expect(button.textContent).toBe("Receipt");
    expect(button.getAttribute("aria-expanded")).toBe("false");

    fireEvent.click(button);

    const receipt = screen.getByTestId("batch-receipt");
    expect(button.getAttribute("aria-expanded")).toBe("true");
    expect(button.getAttribute("aria-controls")).toBe(receipt.id);
    const shown = within(receipt);
    expect(shown.getByText("Commit time").nextElementSibling?.getAttribute("title")).toBe("2026-11-01T12:00:06Z");
    expect(shown.getByText("projects/p/datasets/d/tables/orders/streams/s0")).toBeTruthy();
    expect(shown.getByText("100")).toBeTruthy();
    expect(shown.getByText("2.0 KiB")).toBeTruthy();
    expect(shown.getByText("512 B")).toBeTruthy();
    const offsets = shown.getByText('{"logOffset":41}');
    expect(offsets.parentElement?.className).toContain("mono");
    expect(offsets.nextElementSibling?.textContent).toBe('{"orders":{"0":1200,"1":1187}}');
    expect(shown.getByText("9876543210")).toBeTruthy();

    fireEvent.click(button);

    expect(screen.queryByTestId("batch-receipt")).toBeNull();
    expect(button.getAttribute("aria-expanded")).toBe("false");
  });

  it("says what a receipt left null: no offsets for a batch write, no checksum", () => {
    const batch: Batch = { ...write("p.d.orders", "0", 5, "committed"), batch_id: null, committed_at: "2026-11-01T12:00:07Z" };
    render(<BatchesTable batches={[batch]} />);

    fireEvent.click(screen.getByRole("button", { name: /^Receipt/ }));

    const shown = within(screen.getByTestId("batch-receipt"));
    expect(shown.getByText("none (batch write)")).toBeTruthy();
    expect(shown.getByText("Key checksum").nextElementSibling?.textContent).toBe("—");
    expect(shown.getByText("Commit time").nextElementSibling?.textContent).toContain("—");
  });

  it("shows a checksum the browser rounded as rounded", () => {
    expect(keyChecksum(null)).toBe("—");
    expect(keyChecksum(2 ** 53 - 1)).toBe("9007199254740991");
    expect(keyChecksum(2 ** 60)).toBe("≈ 1152921504606846976 (rounded; read it from the API)");
  });
});
