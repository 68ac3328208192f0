// A buffered-mode run's streams: BUFFERED is shown as its type, with what it means.
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { Stream } from "../../api/client";
import { STREAM_TYPE_NOTES } from "../../lib/modes";
import { StreamsTable } from "./StreamsTable";

afterEach(cleanup);

function stream(name: string, streamType: Stream["stream_type"], state: Stream["state"]): Stream {
  return {
    name,
    stream_type: streamType,
    table: "p.d.orders",
    query_id: "q",
    batch_id: 0,
    write: null,
    partition: 0,
    task_attempt: 0,
    state,
    next_offset: 40,
    appends: 2,
    rows: 40,
    bytes: 400,
    already_exists: 0,
    out_of_range: 0,
    errors: 0,
    row_count: null,
    last_error: null,
    last_error_at: null,
    created_at: "2026-01-01T00:00:00Z",
    updated_at: "2026-01-01T00:00:00Z",
  };
}

describe("StreamsTable", () => {
  it("shows a BUFFERED stream's type with its meaning", () => {
    render(<StreamsTable streams={[stream("p/d/t/streams/b0", "BUFFERED", "committed")]} />);

    const cells = within(screen.getByTestId("stream-row")).getAllByRole("cell");
    expect(cells[1].textContent).toBe("BUFFERED");
    expect(cells[1].getAttribute("title")).toBe(STREAM_TYPE_NOTES.BUFFERED);
    expect(STREAM_TYPE_NOTES.BUFFERED).toContain("flushed");
  });
});
