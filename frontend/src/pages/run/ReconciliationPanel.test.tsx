// A run that wrote two tables shows the newest check of each, under the table's name.
import { cleanup, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { Reconciliation } from "../../api/client";
import { ReconciliationPanel, latestPerTable } from "./ReconciliationPanel";

afterEach(cleanup);

function check(id: number, table: string, status: Reconciliation["status"], actual: number): Reconciliation {
  return {
    id,
    scope: "run",
    run_id: "fb",
    table,
    key: "order_id",
    stamped: true,
    overwrite: false,
    replaced_partitions: null,
    status,
    expected_rows: 8,
    actual_rows: actual,
    distinct_keys: 8,
    rows_without_key: 0,
    duplicate_key_count: 0,
    duplicate_rows: 0,
    duplicate_keys: [],
    missing_rows: 0,
    extra_rows: actual - 8,
    batches: [],
    runs: [],
    mismatched_batches: [],
    warnings: [],
    error: null,
    trigger: "api",
    actor: "op",
    checked_at: "2026-01-01T00:00:00Z",
    duration_ms: 5,
  } as Reconciliation;
}

describe("ReconciliationPanel", () => {
  it("shows the newest check of each table the run wrote", () => {
    const history = [check(3, "p.d.summary", "mismatch", 9), check(2, "p.d.orders", "ok", 8), check(1, "p.d.summary", "ok", 8)];
    expect(latestPerTable(history).map((c) => c.id)).toEqual([3, 2]);

    render(<ReconciliationPanel latest={history[0]} history={history} />);

    const tables = screen.getAllByTestId("reconciliation-table");
    expect(tables.map((t) => within(t).getByRole("heading").textContent)).toEqual(["p.d.summary", "p.d.orders"]);
    expect(within(tables[0]).getByTestId("reconciliation-actual").textContent).toContain("9");
    expect(within(tables[1]).getByTestId("reconciliation-actual").textContent).toContain("8");
  });

  it("says an overwrite's check counted the scope it replaced", () => {
    const dynamic = { ...check(5, "p.d.orders", "ok", 8), overwrite: true, replaced_partitions: ["20261101", "__NULL__"] };
    render(<ReconciliationPanel latest={dynamic} history={[dynamic]} />);
    expect(screen.getByTestId("reconciliation-overwrite-scope").textContent).toBe(
      "The run overwrote the table: counted the partitions it replaced (20261101, __NULL__), against the rows it staged.",
    );
    cleanup();
    render(<ReconciliationPanel latest={check(6, "p.d.orders", "ok", 8)} history={[]} />);
    expect(screen.queryByTestId("reconciliation-overwrite-scope")).toBeNull();
  });

  it("says a change data capture table was checked by its key, with no expected row count", () => {
    const byKey = { ...check(7, "p.d.accounts", "ok", 12), method: "changes" as const, key: "id", expected_rows: null, distinct_keys: 12 };
    render(<ReconciliationPanel latest={byKey} history={[byKey]} />);
    expect(screen.getByTestId("reconciliation-by-key").textContent).toContain("checked key by key");
    expect(screen.getByTestId("reconciliation-expected").textContent).toContain("–");
    expect(screen.getByTestId("reconciliation-distinct").textContent).toContain("12");
    expect(screen.queryByTestId("reconciliation-keys-differing")).toBeNull();
    cleanup();

    const againstSource = { ...byKey, compared_with: "p.d.source_state", keys_differing: 2 };
    render(<ReconciliationPanel latest={againstSource} history={[againstSource]} />);
    expect(screen.getByTestId("reconciliation-by-key").textContent).toContain("against the source's state in p.d.source_state");
    expect(screen.getByTestId("reconciliation-keys-differing").textContent).toContain("2");
  });

  it("shows one verdict without a table heading for a run of one table", () => {
    const history = [check(2, "p.d.orders", "ok", 8), check(1, "p.d.orders", "mismatch", 9)];
    render(<ReconciliationPanel latest={history[0]} history={history} />);

    expect(screen.queryAllByTestId("reconciliation-table")).toHaveLength(0);
    expect(screen.getByTestId("reconciliation-actual").textContent).toContain("8");
    expect(screen.queryByTestId("reconciliation-set-aside")).toBeNull(); // no dead-letter table: not shown
  });

  it("shows the rows set aside apart from the expected rows, and those found in the dead-letter table", () => {
    const drift = {
      ...check(4, "p.d.orders", "mismatch", 8),
      rows_set_aside: 3,
      dead_letter_table: "p.d.orders_dlq",
      rows_in_dead_letter_table: 2,
    };
    render(<ReconciliationPanel latest={drift} history={[drift]} />);

    expect(screen.getByTestId("reconciliation-expected").textContent).toBe("8");
    expect(screen.getByTestId("reconciliation-set-aside").textContent).toBe("3");
    const found = screen.getByTestId("reconciliation-dead-letter-rows");
    expect(found.textContent).toBe("2");
    expect(found.getAttribute("title")).toBe("the run's rows in p.d.orders_dlq (run_id = the run)");
  });

  it("names a differing batch's duplicated and missing keys, found by receipt, in a table with headers", () => {
    const base = {
      status: "mismatch" as const,
      distinct_keys: null,
      duplicate_keys: 1,
      duplicate_rows: 1,
      keys_duplicated: [],
      keys_missing: [],
      keys_unexpected: [],
      unresolved_buckets: [],
    };
    const byReceipt: Reconciliation = {
      ...check(5, "p.d.orders", "mismatch", 7),
      method: "receipts",
      queries: 3,
      mismatched_batches: [0, 1],
      batches: [
        {
          ...base,
          batch_id: 0,
          expected_rows: 4,
          actual_rows: 4,
          keys_duplicated: [{ key: "35", key_hash: "aaaaaaaa01", copies: 2 }],
          keys_missing: [{ key: null, key_hash: "0123456789", copies: 0 }],
          unresolved_buckets: [{ bucket: 7, expected_rows: 2, actual_rows: 0 }],
        },
        { ...base, batch_id: 1, status: "ok", expected_rows: 4, actual_rows: 4 },
      ],
    };
    render(<ReconciliationPanel latest={byReceipt} history={[byReceipt]} />);

    expect(screen.getByTestId("reconciliation-queries").textContent).toContain("3 queries");
    const table = screen.getByTestId("batch-differences");
    const headers = within(table).getAllByRole("columnheader").map((h) => h.textContent);
    expect(headers).toContain("Duplicated keys");
    expect(headers).toContain("Missing keys");
    const rows = within(table).getAllByTestId("batch-difference");
    expect(rows.map((r) => r.dataset.batchId)).toEqual(["0"]);
    expect(within(rows[0]).getByTestId("keys-duplicated").textContent).toBe("35 ×2");
    expect(within(rows[0]).getByTestId("keys-missing").textContent).toBe("md5 0123456789…");
    expect(within(rows[0]).getByTestId("unresolved-buckets").textContent).toContain("bucket 7");
  });
});
