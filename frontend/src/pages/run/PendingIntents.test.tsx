// The run page's panel of intended, unconfirmed batches: what it shows for each answer of
// GET /api/runs/{id}/intents. The real answer, from a real crashed job's checkpoint and
// BigQuery, is checked by tests/browser/test_dashboard.py.
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { PendingIntent } from "../../api/client";
import { PendingIntentsPanel } from "./PendingIntents";

const mocks = vi.hoisted(() => ({ GET: vi.fn() }));
vi.mock("../../api/client", async (importActual) => ({
  ...(await importActual<typeof import("../../api/client")>()),
  api: { GET: mocks.GET },
}));

afterEach(cleanup);
beforeEach(() => mocks.GET.mockReset());

const INTENT: PendingIntent = {
  query_id: "q",
  batch_id: 3,
  table: "p.d.orders",
  write: null,
  expected_rows: 750,
  intent_at: "2026-01-01T00:00:00Z",
  streams: ["s1"],
  mode: "pending",
  in_bigquery: "committed",
  commit_time: "2026-01-01T00:00:02Z",
  resume_will: "record it committed and skip it",
};

const answer = (data: unknown) => Promise.resolve({ data, response: new Response(null, { status: 200 }) });

describe("PendingIntentsPanel", () => {
  it("shows a batch committed in BigQuery, not in the checkpoint, with its commit time", async () => {
    mocks.GET.mockReturnValue(answer({ run_id: "r1", pending_intents: [INTENT], unavailable: null }));
    render(<PendingIntentsPanel runId="r1" version="v1" />);

    const cell = await screen.findByTestId("intent-in-bigquery");
    expect(cell.textContent).toContain("Committed in BigQuery, not in the checkpoint");
    expect(cell.textContent).toContain("committed");
    expect(screen.getByTestId("intent-resume-will").textContent).toBe("record it committed and skip it");
    expect(mocks.GET).toHaveBeenCalledWith("/api/runs/{run_id}/intents", { params: { path: { run_id: "r1" } } });
  });

  it("says so when nothing is pending, and why when the checkpoint cannot be read", async () => {
    mocks.GET.mockReturnValue(answer({ run_id: "r1", pending_intents: [], unavailable: null }));
    render(<PendingIntentsPanel runId="r1" version="v1" />);
    expect((await screen.findByTestId("intents-none")).textContent).toContain("None");
    cleanup();

    mocks.GET.mockReturnValue(answer({ run_id: "r2", pending_intents: [], unavailable: "no launch spec" }));
    render(<PendingIntentsPanel runId="r2" version="v1" />);
    expect((await screen.findByTestId("intents-unavailable")).textContent).toContain("no launch spec");
  });
});
