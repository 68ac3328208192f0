// The run page's rows set aside: the count, where, and the latest rows the tasks named.
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { RunDetail } from "../../api/client";
import { RejectionsPanel } from "./RejectionsPanel";

afterEach(cleanup);

type Rejection = RunDetail["rejections"][number];

function rejection(offset: number, key: string | null, column: string | null, reason: string, table: string | null): Rejection {
  return {
    time: "2026-01-01T00:00:05Z",
    table: "p.d.orders",
    query_id: "q",
    batch_id: 3,
    write: null,
    partition: 1,
    attempt: 0,
    stream: "s1",
    offset,
    key,
    column,
    reason,
    dead_letter_table: table,
  };
}

function run(fields: Partial<RunDetail>): RunDetail {
  return { rows_dead_lettered: 0, rejected_requests: 0, dead_letter_table: null, rejections: [], ...fields } as RunDetail;
}

describe("RejectionsPanel", () => {
  it("shows nothing for a run that had no row refused", () => {
    const { container } = render(<RejectionsPanel run={run({})} />);
    expect(container.innerHTML).toBe("");
  });

  it("shows the count, the dead-letter table and each sample's offset, key, column and reason", () => {
    render(
      <RejectionsPanel
        run={run({
          rows_dead_lettered: 2,
          rejected_requests: 3,
          dead_letter_table: "p.d.orders_dlq",
          rejections: [
            rejection(17, "order-17", "note", "value too long for STRING(10)", "p.d.orders_dlq"),
            rejection(4, null, "amount", "out of NUMERIC(5, 2) range", null),
          ],
        })}
      />,
    );

    expect(screen.getByTestId("rejections-summary").textContent).toBe(
      "2 row(s) BigQuery refused were set aside in p.d.orders_dlq by committed batches, each once; " +
        "3 refused request(s) reported by the tasks.",
    );
    const rows = screen.getAllByTestId("rejection-row");
    expect(rows.map((row) => within(row).getAllByRole("cell").slice(0, 4).map((cell) => cell.textContent))).toEqual([
      ["17", "order-17", "note", "value too long for STRING(10)"],
      ["4", "–", "amount", "out of NUMERIC(5, 2) range"],
    ]);
    expect(within(rows[1]).getByText(/the task failed/)).toBeTruthy();
  });
});
