// The Tables views against a stubbed API: the list, an unknown table, and a check run
// from the page appearing at the top of the history without a reload.
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Reconciliation, TableTotals } from "../../api/client";
import { TablesPage } from "../TablesPage";

const mocks = vi.hoisted(() => ({ GET: vi.fn(), POST: vi.fn(), operator: true }));

vi.mock("../../api/client", async (importActual) => ({
  ...(await importActual<typeof import("../../api/client")>()),
  api: { GET: mocks.GET, POST: mocks.POST },
}));
vi.mock("../../lib/live", () => ({ useLiveReload: () => undefined }));
vi.mock("../../lib/auth", () => ({ useIsOperator: () => mocks.operator }));

const TABLE = "my-project.billing.usage";

const totals: TableTotals = {
  table: TABLE,
  runs: 3,
  runs_by_status: { succeeded: 2, failed: 1 },
  rows_committed: 12345,
  batches_committed: 7,
  already_exists: 2,
  out_of_range: 0,
  rows_dead_lettered: 42,
  rejected_requests: 5,
  first_started_at: "2024-01-01T00:00:00Z",
  last_started_at: "2024-01-02T00:00:00Z",
  key_column: "event_id",
  figures: {
    table: TABLE,
    last_commit_at: "2024-01-02T00:05:00Z",
    freshness: "stale",
    rows_committed_today: 0,
    requests: 0,
    already_exists: 0,
    out_of_range: 0,
    hours: [],
    rows_dead_lettered: 0,
    reconciliation: null,
    link: `/tables/${TABLE}`,
  },
};

function check(id: number, status: Reconciliation["status"]): Reconciliation {
  return {
    id,
    scope: "table",
    run_id: null,
    table: TABLE,
    key: "event_id",
    stamped: true,
    overwrite: false,
    replaced_partitions: null,
    status,
    expected_rows: 100,
    actual_rows: status === "ok" ? 100 : 102,
    distinct_keys: 100,
    rows_without_key: 0,
    duplicate_key_count: status === "ok" ? 0 : 2,
    duplicate_rows: status === "ok" ? 0 : 2,
    duplicate_keys: status === "ok" ? [] : [{ key: "k1", count: 2, run_id: "run-1", batch_id: 3 }],
    missing_rows: 0,
    extra_rows: status === "ok" ? 0 : 2,
    batches: [],
    runs: [{ run_id: "run-1", status: status === "ok" ? "ok" : "mismatch", expected_rows: 100, actual_rows: 102, distinct_keys: 100, duplicate_keys: 2, duplicate_rows: 2 }],
    mismatched_batches: [],
    warnings: [],
    error: null,
    trigger: "api",
    actor: "ann",
    checked_at: "2024-01-03T00:00:00Z",
    duration_ms: 1200,
  };
}

const ok = (data: unknown) => Promise.resolve({ data, response: new Response(null, { status: 200 }) });

function stubGets(history: Reconciliation[] = [], shown: TableTotals = totals) {
  mocks.GET.mockImplementation((path: string, init?: { params?: { query?: { table?: string } } }) => {
    if (path === "/api/tables") {
      const only = init?.params?.query?.table;
      const found = only === undefined || only === TABLE ? [shown] : [];
      return ok({ data: found, count: found.length });
    }
    if (path === "/api/runs") return ok({ data: [], count: 0 });
    if (path === "/api/tables/{table}/reconciliations") return ok({ data: history, count: history.length });
    throw new Error(`unexpected GET ${path}`);
  });
}

function renderAt(url: string) {
  render(
    <MemoryRouter initialEntries={[url]}>
      <Routes>
        <Route path="/tables" element={<TablesPage />} />
        <Route path="/tables/:table" element={<TablesPage />} />
      </Routes>
    </MemoryRouter>,
  );
}

beforeEach(() => {
  mocks.GET.mockReset();
  mocks.POST.mockReset();
  mocks.operator = true;
});
afterEach(cleanup);

describe("/tables", () => {
  it("lists each table with its totals and a link to it", async () => {
    stubGets();
    renderAt("/tables?offset=0&limit=20");
    const row = await screen.findByTestId("table-row");
    expect(within(row).getByTestId("table-rows-committed").textContent).toBe("12,345");
    expect(within(row).getByTestId("table-verdict").textContent).toContain("never checked");
    expect(within(row).getByTestId("table-link").getAttribute("href")).toBe(`/tables/${encodeURIComponent(TABLE)}`);
    expect(mocks.GET).toHaveBeenCalledWith("/api/tables", { params: { query: { limit: 20, offset: 0 } } });
  });

  it("says when nothing was loaded", async () => {
    mocks.GET.mockImplementation(() => ok({ data: [], count: 0 }));
    renderAt("/tables");
    expect(await screen.findByText("No table has been loaded yet.")).toBeTruthy();
  });
});

describe("/tables/:table", () => {
  it("says clearly when the table is unknown", async () => {
    stubGets();
    renderAt("/tables/other-project.ds.nothing");
    expect((await screen.findByTestId("table-unknown")).textContent).toContain("Unknown table");
  });

  it("puts a check run from the page at the top of the history, busy meanwhile", async () => {
    stubGets([check(1, "ok")]);
    let answer: (value: unknown) => void = () => undefined;
    mocks.POST.mockReturnValue(new Promise((resolve) => (answer = resolve)));
    renderAt(`/tables/${encodeURIComponent(TABLE)}`);

    const key = (await screen.findByTestId("reconcile-key")) as HTMLInputElement;
    expect(key.value).toBe("event_id"); // prefilled from the table's key column
    fireEvent.click(screen.getByTestId("reconcile-button"));
    await waitFor(() => expect(screen.getByTestId("reconcile-button").textContent).toBe("Reconciling…"));
    expect((screen.getByTestId("reconcile-button") as HTMLButtonElement).disabled).toBe(true);
    expect(mocks.POST).toHaveBeenCalledWith("/api/tables/{table}/reconcile", {
      params: { path: { table: TABLE } },
      body: { key: "event_id" },
    });

    answer({ data: check(2, "mismatch"), response: new Response(null, { status: 200 }) });
    await waitFor(() => expect(screen.getAllByTestId("reconciliation")).toHaveLength(2));
    const [newest] = screen.getAllByTestId("reconciliation");
    expect(within(newest).getByTestId("reconciliation-status").dataset.status).toBe("mismatch");
    expect(within(newest).getByTestId("reconciliation-extra-rows").textContent).toBe("2");
    expect(within(newest).getAllByTestId("reconciliation-duplicate-key")).toHaveLength(1);
    expect(screen.getByTestId("reconcile-button").textContent).toBe("Reconcile table");
  });

  it("shows the rows set aside over every run, with what they are on hover", async () => {
    stubGets();
    renderAt(`/tables/${encodeURIComponent(TABLE)}`);

    const setAside = await screen.findByTestId("table-rows-dead-lettered");
    expect(setAside.textContent).toBe("42");
    expect(setAside.getAttribute("title")).toContain("42 row(s) BigQuery refused, set aside in a dead-letter table");
    expect(setAside.getAttribute("title")).toContain("5 refused request(s)");
  });

  it("hides the reconcile button from viewers", async () => {
    mocks.operator = false;
    stubGets();
    renderAt(`/tables/${encodeURIComponent(TABLE)}`);
    expect(await screen.findByText("This table has never been reconciled.")).toBeTruthy();
    expect(screen.queryByTestId("reconcile-button")).toBeNull();
  });

  it("shows a run's check as the table's latest on the list, the totals and the history alike", async () => {
    const latest = {
      id: 9, scope: "run" as const, run_id: "run-1", table: TABLE, status: "mismatch" as const,
      checked_at: "2024-01-03T00:00:00Z", link: "/runs/run-1",
    };
    const checked = { ...totals, figures: { ...totals.figures, reconciliation: latest } };
    stubGets([], checked);
    renderAt("/tables");
    const row = await screen.findByTestId("table-row");
    expect(within(row).getByTestId("overview-verdict").dataset.status).toBe("mismatch");
    cleanup();
    renderAt(`/tables/${encodeURIComponent(TABLE)}`);
    const summary = await screen.findByTestId("table-totals");
    expect(within(summary).getByTestId("overview-verdict").getAttribute("href")).toBe("/runs/run-1");
    expect(await screen.findByText(/No check of the whole table yet\. Its latest check was of run/)).toBeTruthy();
  });
});
