// The plan dialog's logic. The API calls are functions handed in here; the real ones
// against a real backend and a real job are exercised by tests/browser (Chromium).
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ResumeAccepted, ResumePlan } from "../../api/client";
import { ResumeDialog } from "./ResumeDialog";

afterEach(cleanup);

const PLAN: ResumePlan = {
  run_id: "load-1",
  attempt: 2,
  status: "failed",
  module: "jobs.load_files",
  command: ["python", "-m", "jobs.load_files"],
  cwd: null,
  checkpoint: "/ckpt",
  ledger: "/ckpt/onceover",
  log_path: "/logs/load-1-2.log",
  committed_batches: 1,
  committed_rows: 1500,
  last_committed_batch: 0,
  spark_last_planned_batch: 1,
  spark_last_finished_batch: 0,
  overwrites: [],
  pending_intents: [
    {
      query_id: "q",
      batch_id: 1,
      table: "p.d.orders",
      write: null,
      expected_rows: 1500,
      intent_at: "2026-01-01T00:00:00Z",
      streams: ["s1", "s2"],
      mode: "pending",
      in_bigquery: "committed",
      commit_time: "2026-01-01T00:00:02Z",
      resume_will: "record it committed and skip it: BigQuery committed it at 2026-01-01T00:00:02Z",
    },
  ],
  queries: [],
  warnings: ["the checkpoint was written by another host"],
  spec: {
    spec: { module: "jobs.load_files", args: [] },
    digest: "ab".repeat(32),
    approved_by: null,
    approved_at: null,
    proposed: null,
    proposed_digest: null,
    proposed_at: null,
    proposed_by_attempt: null,
  },
};

function accepted(key: string): ResumeAccepted {
  return {
    run_id: "load-1",
    attempt: 2,
    attempt_id: "a2",
    idempotency_key: key,
    approved_by: "operator",
    log_url: "/api/runs/load-1/attempts/2/log",
    plan: PLAN,
    requested_at: "2026-01-01T00:00:00Z",
    status: "resuming",
  };
}

describe("ResumeDialog", () => {
  it("shows the plan, then resumes once with one idempotency key", async () => {
    let release: (plan: ResumePlan) => void = () => {};
    const loadPlan = vi.fn(() => new Promise<ResumePlan>((resolve) => (release = resolve)));
    const resume = vi.fn(async (_run: string, key: string, _digest: string) => accepted(key));
    const onResumed = vi.fn();
    render(
      <ResumeDialog runId="load-1" open onClose={() => {}} onResumed={onResumed} loadPlan={loadPlan} resume={resume} />,
    );

    const confirm = screen.getByRole("button", { name: "Resume run" });
    expect(confirm).toHaveProperty("disabled", true); // no plan, no resume
    release(PLAN);
    await screen.findByTestId("resume-plan");
    expect(screen.getByTestId("plan-committed").textContent).toBe("1,500 rows in 1 batches");
    expect(screen.getByTestId("plan-intents").textContent).toContain("1,500");
    expect(screen.getByTestId("intent-in-bigquery").textContent).toContain("Committed in BigQuery, not in the checkpoint");
    expect(screen.getByTestId("intent-resume-will").textContent).toContain("skip it");
    expect(screen.getByTestId("plan-warnings").textContent).toContain("another host");
    expect(confirm).toHaveProperty("disabled", false);

    fireEvent.click(confirm);
    await waitFor(() => expect(onResumed).toHaveBeenCalledTimes(1));
    expect(loadPlan).toHaveBeenCalledWith("load-1");
    expect(resume).toHaveBeenCalledTimes(1);
    const key = resume.mock.calls[0][1];
    // Confirming approves the spec the plan showed, by its digest.
    expect(resume.mock.calls[0][2]).toBe("ab".repeat(32));
    expect(screen.getByTestId("plan-approval").textContent).toContain("No operator has approved this command yet");
    expect(key).toMatch(/.{16,}/);
    expect(onResumed.mock.calls[0][0].idempotency_key).toBe(key);
  });

  it("says what a resume does with each overwrite, by the step its swap reached", async () => {
    const overwrite = (write: string, step: "staged" | "swap_asked" | "swapped", will: string) => ({
      query_id: "nightly",
      batch_id: null,
      table: "p.d.orders",
      write,
      staging_table: "p.d._onceover_staging_x",
      step,
      staged_rows: 300,
      job_id: step === "staged" ? null : `job_${write}`,
      resume_will: will,
    });
    const plan: ResumePlan = {
      ...PLAN,
      overwrites: [
        overwrite("id-a", "staged", "swaps the staged rows in without staging them again"),
        overwrite("id-b", "swap_asked", "asks BigQuery for the same swap job again (it runs once)"),
      ],
    };
    render(<ResumeDialog runId="load-1" open onClose={() => {}} onResumed={() => {}} loadPlan={async () => plan} />);
    const table = await screen.findByTestId("plan-overwrites");
    expect(within(table).getAllByRole("row").slice(1).map((row) => row.textContent)).toEqual([
      "p.d.orders write id-astaged300swaps the staged rows in without staging them again",
      "p.d.orders write id-bswap asked300asks BigQuery for the same swap job again (it runs once)",
    ]);
  });

  it("says why a run cannot be resumed and offers no confirm", async () => {
    const resume = vi.fn();
    render(
      <ResumeDialog
        runId="load-1"
        open
        onClose={() => {}}
        onResumed={() => {}}
        loadPlan={async () => "run load-1 is succeeded; only failed or stalled runs resume"}
        resume={resume}
      />,
    );
    expect((await screen.findByRole("alert")).textContent).toContain("only failed or stalled runs resume");
    expect(screen.getByRole("button", { name: "Resume run" })).toHaveProperty("disabled", true);
    expect(resume).not.toHaveBeenCalled();
  });

  it("keeps the dialog open with the reason when the resume is refused", async () => {
    const onResumed = vi.fn();
    render(
      <ResumeDialog
        runId="load-1"
        open
        onClose={() => {}}
        onResumed={onResumed}
        loadPlan={async () => PLAN}
        resume={async () => "another resume of this run is under way"}
      />,
    );
    fireEvent.click(await screen.findByRole("button", { name: "Resume run" }, {}));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("under way"));
    expect(onResumed).not.toHaveBeenCalled();
    expect(screen.getByTestId("resume-plan")).toBeTruthy();
  });
});
