// The re-drive panel and dialog. The API calls are functions handed in here; the real
// ones against a real backend are exercised by tests/browser (Chromium).
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RedriveAccepted, RedrivePlan, RunDetail } from "../../api/client";
import { RedriveDialog, RedrivePanel, redriveOffer } from "./RedrivePanel";

afterEach(cleanup);

const PLAN: RedrivePlan = {
  run_id: "load-1",
  dead_letter_tables: ["p.d.dead"],
  dead_letter_table: "p.d.dead",
  rows_set_aside: 5,
  rows_redriven: 2,
  rows_to_send: 3,
  ledger: "/ckpt/onceover",
  key: "id",
  module: "onceover_jobs.redrive",
  command: ["python", "-P", "-m", "onceover_jobs.redrive", "load-1", "--dead-letter=p.d.dead"],
  cwd: "/logs/load-1/work",
  log_path: "/logs/load-1/redrive-1.log",
  launch: 1,
  digest: "cd".repeat(32),
  warnings: [],
};

const ACCEPTED: RedriveAccepted = {
  run_id: "load-1",
  launch: 1,
  status: "launched",
  requested_at: "2026-01-01T00:00:00Z",
  actor: "ops",
  pid: 4242,
  log_path: "/logs/load-1/redrive-1.log",
  plan: PLAN,
};

function runWith(redrives: Partial<RunDetail["redrives"]>): RunDetail {
  return {
    redrives: {
      rows_set_aside: 5,
      rows_redriven: 0,
      rows_still_set_aside: 5,
      runs: [],
      launches: [],
      unavailable: null,
      ...redrives,
    },
  } as RunDetail;
}

describe("RedrivePanel", () => {
  it("accounts for the set-aside rows from the re-drive runs", () => {
    const run = runWith({
      rows_redriven: 4,
      rows_still_set_aside: 1,
      runs: [
        {
          run_id: "load-1:redrive-1",
          number: 1,
          status: "succeeded",
          rows_landed: 4,
          rows_set_aside_again: 1,
          started_at: "2026-01-01T00:00:00Z",
          finished_at: "2026-01-01T00:01:00Z",
        },
      ],
    });
    render(
      <MemoryRouter>
        <RedrivePanel run={run} />
      </MemoryRouter>,
    );
    expect(screen.getByTestId("redrive-set-aside").textContent).toBe("5");
    expect(screen.getByTestId("redrive-redriven").textContent).toBe("4");
    expect(screen.getByTestId("redrive-still-set-aside").textContent).toBe("1");
    expect(screen.getByTestId("redrive-runs").textContent).toContain("load-1:redrive-1");
    expect(screen.getByTestId("redrive-runs").textContent).toContain("1 refused again");
  });

  it("says why a run cannot be re-driven, and offers one that can", () => {
    expect(redriveOffer(runWith({ unavailable: "no ledger" }))).toEqual({
      offered: false,
      why: "Cannot re-drive: no ledger",
    });
    expect(redriveOffer(runWith({ rows_still_set_aside: 0 })).offered).toBe(false);
    expect(redriveOffer(runWith({})).offered).toBe(true);
  });
});

describe("RedriveDialog", () => {
  it("shows the plan, launches it on confirm with its digest, then shows the answer", async () => {
    const launch = vi.fn(async () => ACCEPTED);
    const onLaunched = vi.fn();
    render(
      <RedriveDialog
        runId="load-1"
        open
        onClose={() => {}}
        onLaunched={onLaunched}
        loadPlan={async () => PLAN}
        launch={launch}
      />,
    );
    await screen.findByTestId("redrive-plan");
    expect(screen.getByTestId("redrive-plan-rows").textContent).toBe("3");
    expect(screen.getByTestId("redrive-plan-command").textContent).toContain("--dead-letter=p.d.dead");
    expect(launch).not.toHaveBeenCalled();

    fireEvent.click(screen.getByRole("button", { name: "Re-drive rows" }));

    await screen.findByTestId("redrive-launched");
    expect(launch).toHaveBeenCalledWith("load-1", PLAN.digest);
    expect(onLaunched).toHaveBeenCalledWith(ACCEPTED);
    expect(screen.getByTestId("redrive-launched").textContent).toContain("pid 4242");
    expect(screen.queryByRole("button", { name: "Re-drive rows" })).toBeNull();
  });

  it("shows a refusal and offers nothing to confirm", async () => {
    render(
      <RedriveDialog
        runId="load-1"
        open
        onClose={() => {}}
        onLaunched={() => {}}
        loadPlan={async () => "run 'load-1' set no rows aside"}
      />,
    );
    await waitFor(() => expect(screen.getByText(/cannot be re-driven: run 'load-1' set no rows aside/)).toBeTruthy());
    expect((screen.getByRole("button", { name: "Re-drive rows" }) as HTMLButtonElement).disabled).toBe(true);
  });
});
