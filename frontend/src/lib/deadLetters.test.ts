import { describe, expect, it } from "vitest";
import { deadLetterNote } from "./deadLetters";

describe("deadLetterNote", () => {
  it("names the dead-letter table and says the rows are not in rows committed", () => {
    const note = deadLetterNote({ rows_dead_lettered: 1234, rejected_requests: 0, dead_letter_table: "p.d.orders_dlq" });
    expect(note).toBe(
      "1,234 row(s) BigQuery refused, set aside in p.d.orders_dlq exactly once by the committed batches " +
        "(not in rows committed; the rest of each batch was loaded).",
    );
  });

  it("adds the refused requests the tasks reported, retries included", () => {
    const note = deadLetterNote({ rows_dead_lettered: 3, rejected_requests: 2 });
    expect(note).toContain("set aside in a dead-letter table exactly once");
    expect(note).toContain("2 refused request(s) reported by the tasks (a retried task reports its rows again).");
  });
});
