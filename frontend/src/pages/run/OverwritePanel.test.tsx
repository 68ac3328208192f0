// The run page's overwrite: what its swap replaced and the step it stopped at.
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { Batch, RunDetail } from "../../api/client";
import { OverwritePanel } from "./OverwritePanel";

afterEach(cleanup);

type Overwrite = NonNullable<Batch["overwrite"]>;

const SWAPPED: Overwrite = {
  step: "swapped",
  staging_table: "p.d._onceover_staging_orders_0123",
  scope: "the rows of the partitions (by day) the new rows fall in",
  job_id: "onceover_overwrite_ab12_1",
  attempt: 1,
  rows_inserted: 300,
  rows_replaced: 120,
  partitions: ["20261101", "20261102", "__NULL__"],
  partition_count: 5,
  swap_started_at: "2026-11-01T12:00:03Z",
  swapped_at: "2026-11-01T12:00:04Z",
};

function run(status: RunDetail["status"], overwrite: Overwrite | null): RunDetail {
  const batch = { table: "p.d.orders", query_id: "nightly", batch_id: null, write: "id-orders", overwrite } as Batch;
  return { status, batches: [batch] } as RunDetail;
}

function shown(testId: string): string | null {
  return within(screen.getByTestId("overwrite-panel")).getByTestId(testId).textContent;
}

describe("OverwritePanel", () => {
  it("shows nothing for a run that only appended", () => {
    const { container } = render(<OverwritePanel run={run("succeeded", null)} />);
    expect(container.innerHTML).toBe("");
  });

  it("shows the rows replaced and inserted, the scope, the partitions touched and the job", () => {
    render(<OverwritePanel run={run("succeeded", SWAPPED)} />);
    expect(shown("overwrite-step")).toBe("Swapped");
    expect(shown("overwrite-rows-replaced")).toBe("120");
    expect(shown("overwrite-rows-inserted")).toBe("300");
    expect(shown("overwrite-scope")).toBe("the rows of the partitions (by day) the new rows fall in");
    expect(shown("overwrite-partitions")).toBe("20261101, 20261102, __NULL__ and 2 more");
    expect(screen.getByText("Partitions touched (5)")).toBeTruthy();
    expect(shown("overwrite-job")).toBe("onceover_overwrite_ab12_1");
    expect(screen.getByTestId("overwrite").textContent).not.toContain("stopped at");
  });

  it("says where a run that did not finish stopped, and what the table holds there", () => {
    const asked = { ...SWAPPED, step: "swap_asked", partitions: null, partition_count: null, swapped_at: null };
    render(<OverwritePanel run={run("failed", asked as Overwrite)} />);
    const overwrite = screen.getByTestId("overwrite");
    expect(overwrite.getAttribute("data-step")).toBe("swap_asked");
    expect(overwrite.textContent).toContain("stopped at Swap asked for");
    expect(overwrite.textContent).toContain("the table holds the old rows or the new, never both");
    expect(shown("overwrite-partitions")).toBe("the whole table");
    cleanup();

    const staged: Overwrite = {
      ...SWAPPED,
      step: "staged",
      scope: null,
      job_id: null,
      attempt: null,
      rows_replaced: null,
      partitions: null,
      partition_count: null,
      swap_started_at: null,
      swapped_at: null,
    };
    render(<OverwritePanel run={run("running", staged)} />);
    expect(screen.getByTestId("overwrite").textContent).not.toContain("stopped at");
    expect(shown("overwrite-step")).toBe("Staged");
    expect(shown("overwrite-rows-inserted")).toBe("300");
    expect(shown("overwrite-rows-replaced")).toBe("–");
    expect(shown("overwrite-job")).toBe("–");
  });
});
