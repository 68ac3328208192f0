// The overview against a stubbed API: what needs a look and every table, each linking
// to its page; the sparklines' words; the empty state.
import { cleanup, render, screen, within } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import { OverviewPage } from "../OverviewPage";
import { sparkLabel, sparkPoints } from "./Sparkline";
import type { Overview, OverviewHour } from "./types";

const mocks = vi.hoisted(() => ({ GET: vi.fn() }));

vi.mock("../../api/client", async (importActual) => ({
  ...(await importActual<typeof import("../../api/client")>()),
  api: { GET: mocks.GET },
}));
vi.mock("../../lib/live", () => ({ useLiveReload: () => undefined }));

const NOW = "2026-11-01T12:30:00Z";
const FRESH = "p.billing.usage";
const STALE = "p.billing.invoices";

function hours(last: Partial<OverviewHour> = {}): OverviewHour[] {
  return Array.from({ length: 24 }, (_, h) => ({
    start: new Date(Date.parse("2026-10-31T13:00:00Z") + h * 3_600_000).toISOString(),
    requests: 0,
    already_exists: 0,
    out_of_range: 0,
    ...(h === 23 ? last : {}),
  }));
}

const busy: Overview = {
  generated_at: NOW,
  today_since: "2026-11-01T00:00:00Z",
  window_since: "2026-10-31T13:00:00Z",
  stale_after_s: 86400,
  runs: [
    {
      run_id: "nightly-7",
      job: "billing",
      table: STALE,
      status: "failed",
      since: "2026-10-29T12:00:09Z",
      reason: "The job failed after batch 3 committed: disk full",
      cause: {
        kind: "error",
        headline: "The job failed after batch 3 committed: disk full",
        batch: "3",
        batch_stage: "committed",
        error: "OSError: disk full",
      },
      link: "/runs/nightly-7",
    },
    {
      run_id: "stream-2",
      job: "usage",
      table: FRESH,
      status: "stalled",
      since: "2026-11-01T12:02:00Z",
      reason: "nothing heard from it since 2026-11-01 12:02:00 UTC",
      cause: null,
      link: "/runs/stream-2",
    },
  ],
  runs_count: 2,
  alerts: [
    {
      id: 5,
      rule_id: 3,
      rule: "Run failed",
      severity: "critical",
      run_id: "nightly-7",
      table: STALE,
      summary: "run nightly-7 failed: disk full",
      since: "2026-11-01T12:25:00Z",
      link: "/alerts?state=firing&rule=3",
      subject_link: "/runs/nightly-7",
    },
  ],
  alerts_count: 1,
  tables: [
    {
      table: STALE,
      last_commit_at: "2026-10-29T12:00:06Z",
      freshness: "stale",
      rows_committed_today: 0,
      requests: 0,
      already_exists: 0,
      out_of_range: 0,
      hours: hours(),
      rows_dead_lettered: 0,
      reconciliation: {
        id: 2,
        scope: "table",
        run_id: null,
        table: STALE,
        status: "mismatch",
        checked_at: "2026-11-01T12:25:00Z",
        link: `/tables/${STALE}`,
      },
      link: `/tables/${STALE}`,
    },
    {
      table: FRESH,
      last_commit_at: "2026-11-01T12:00:06Z",
      freshness: "fresh",
      rows_committed_today: 12345,
      requests: 40,
      already_exists: 3,
      out_of_range: 1,
      hours: hours({ requests: 40, already_exists: 3, out_of_range: 1 }),
      rows_dead_lettered: 5,
      reconciliation: null,
      link: `/tables/${FRESH}`,
    },
  ],
  tables_count: 2,
  totals: {
    rows_committed_today: 12345,
    requests: 40,
    already_exists: 3,
    out_of_range: 1,
    hours: hours({ requests: 40, already_exists: 3, out_of_range: 1 }),
    rows_dead_lettered: 5,
  },
  reconciliation: {
    id: 2,
    scope: "table",
    run_id: null,
    table: STALE,
    status: "mismatch",
    checked_at: "2026-11-01T12:25:00Z",
    link: `/tables/${STALE}`,
  },
};

function renderWith(answer: Overview) {
  mocks.GET.mockImplementation((path: string) => {
    if (path === "/api/overview") return Promise.resolve({ data: answer, response: new Response(null, { status: 200 }) });
    throw new Error(`unexpected GET ${path}`);
  });
  render(
    <MemoryRouter>
      <OverviewPage />
    </MemoryRouter>,
  );
}

afterEach(cleanup);

describe("OverviewPage", () => {
  it("shows the failed and stalled runs, the firing alert and the stale table, each linking to its page", async () => {
    renderWith(busy);

    const runs = await screen.findByTestId("attention-runs");
    const failed = within(runs).getAllByTestId("attention-run")[0];
    expect(failed.dataset.status).toBe("failed");
    expect(within(failed).getByRole("link", { name: "nightly-7" }).getAttribute("href")).toBe("/runs/nightly-7");
    expect(within(failed).getByText("The job failed after batch 3 committed: disk full")).toBeTruthy();
    expect(within(failed).getByText("3 d 0 h ago")).toBeTruthy(); // measured from the answer's time

    const alert = within(screen.getByTestId("firing-alerts")).getByTestId("firing-alert");
    expect(within(alert).getByRole("link", { name: "Run failed" }).getAttribute("href")).toBe(
      "/alerts?state=firing&rule=3",
    );
    expect(within(alert).getByRole("link", { name: "nightly-7" }).getAttribute("href")).toBe("/runs/nightly-7");
    expect(alert.getAttribute("title")).toBe("run nightly-7 failed: disk full");

    const rows = within(screen.getByTestId("overview-tables")).getAllByTestId("overview-table");
    expect(rows.map((row) => [row.dataset.table, row.dataset.freshness])).toEqual([
      [STALE, "stale"],
      [FRESH, "fresh"],
    ]);
    expect(within(rows[0]).getByTestId("overview-table-link").getAttribute("href")).toBe(
      `/tables/${encodeURIComponent(STALE)}`,
    );
    expect(within(rows[0]).getByText(/3 d 0 h ago/)).toBeTruthy();
    expect(within(rows[1]).getByTestId("table-rows-today").textContent).toBe("12,345");
    expect(within(rows[1]).getByTestId("table-dead-lettered").textContent).toBe("5");
    expect(screen.getByText(/no commit for 24 h 00 min/)).toBeTruthy();

    expect(screen.getByTestId("overview-runs-count").textContent).toBe("2");
    expect(screen.getByTestId("overview-alerts-count").textContent).toBe("1");
    expect(screen.getByTestId("overview-stale-count").textContent).toContain("1");
    const [verdict] = within(rows[0]).getAllByTestId("overview-verdict");
    expect(verdict.dataset.status).toBe("mismatch");
    expect(verdict.getAttribute("href")).toBe(`/tables/${STALE}`);
  });

  it("gives each sparkline words and a number", async () => {
    renderWith(busy);
    const row = (await screen.findAllByTestId("overview-table"))[1];
    const already = within(row).getByTestId("table-already-exists");
    expect(within(already).getByRole("img").getAttribute("aria-label")).toMatch(
      /^ALREADY_EXISTS on p\.billing\.usage: 3 in the last 24 hours, most \(3\) in the hour from /,
    );
    expect(already.textContent).toBe("3");
    const gaps = within((await screen.findAllByTestId("overview-table"))[0]).getByTestId("table-out-of-range");
    expect(within(gaps).getByRole("img").getAttribute("aria-label")).toBe(
      "OUT_OF_RANGE on p.billing.invoices: none in the last 24 hours",
    );
  });

  it("says what to do when nothing was loaded yet", async () => {
    renderWith({
      ...busy,
      runs: [],
      runs_count: 0,
      alerts: [],
      alerts_count: 0,
      tables: [],
      tables_count: 0,
      reconciliation: null,
    });
    const empty = await screen.findByTestId("overview-empty");
    expect(empty.textContent).toContain("Start a job that writes with the onceover sink");
    expect(within(empty).getByRole("link", { name: "alert rules" }).getAttribute("href")).toBe("/alerts?tab=rules");
  });

  it("says so when nothing needs a look", async () => {
    renderWith({ ...busy, runs: [], runs_count: 0, alerts: [], alerts_count: 0 });
    expect(await screen.findByText("No run has failed or stalled.")).toBeTruthy();
    expect(screen.getByText(/No alert is firing/)).toBeTruthy();
  });
});

describe("sparkPoints", () => {
  it("scales to the peak and lies flat on the floor when there is nothing", () => {
    expect(sparkPoints([0, 2, 1], 14, 12)).toBe("2.0,10.0 7.0,2.0 12.0,6.0");
    expect(sparkPoints([0, 0], 14, 12)).toBe("2.0,10.0 12.0,10.0");
    expect(sparkPoints([])).toBe("");
  });

  it("labels a quiet day as none", () => {
    expect(sparkLabel("X", [{ start: NOW, count: 0 }])).toBe("X: none in the last 24 hours");
  });
});
