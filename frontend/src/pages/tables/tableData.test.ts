import { describe, expect, it } from "vitest";
import type { Reconciliation } from "../../api/client";
import { keyColumnProblem, mergeChecks, runStatusCounts } from "./tableData";

function check(id: number, status: Reconciliation["status"] = "ok"): Reconciliation {
  return {
    id,
    scope: "table",
    run_id: null,
    table: "proj-1.ds.t",
    key: "id",
    stamped: true,
    overwrite: false,
    replaced_partitions: null,
    status,
    expected_rows: 10,
    actual_rows: 10,
    distinct_keys: 10,
    rows_without_key: 0,
    duplicate_key_count: 0,
    duplicate_rows: 0,
    duplicate_keys: [],
    missing_rows: 0,
    extra_rows: 0,
    batches: [],
    runs: [],
    mismatched_batches: [],
    warnings: [],
    error: null,
    trigger: "api",
    actor: "ann",
    checked_at: "2024-01-01T00:00:00Z",
    duration_ms: 10,
  };
}

describe("runStatusCounts", () => {
  it("puts problems first and drops zero counts", () => {
    expect(runStatusCounts({ succeeded: 4, failed: 1, running: 0, stalled: 2 })).toEqual([
      ["failed", 1],
      ["stalled", 2],
      ["succeeded", 4],
    ]);
  });
});

describe("mergeChecks", () => {
  it("shows a check just run first and each check once", () => {
    const merged = mergeChecks([check(3, "mismatch")], [check(3, "mismatch"), check(2), check(1)]);
    expect(merged.map((c) => c.id)).toEqual([3, 2, 1]);
  });
  it("shows a just-run check the history has not caught up with", () => {
    expect(mergeChecks([check(5)], [check(2)]).map((c) => c.id)).toEqual([5, 2]);
  });
});

describe("keyColumnProblem", () => {
  it("accepts a column name or nothing", () => {
    expect(keyColumnProblem("")).toBeNull();
    expect(keyColumnProblem("event_id")).toBeNull();
    expect(keyColumnProblem("1bad")).not.toBeNull();
    expect(keyColumnProblem("a-b")).not.toBeNull();
  });
});
