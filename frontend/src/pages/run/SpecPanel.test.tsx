// The spec panel: what it says about approval, and what operators (only) may decide.
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunSpec } from "../../api/client";
import { SpecPanel } from "./SpecPanel";

afterEach(cleanup);

const STATE: RunSpec = {
  spec: { module: "jobs.load_files", args: ["--table", "p.d.t", "--password", "***"] },
  digest: "a".repeat(64),
  approved_by: "alice",
  approved_at: "2026-01-01T00:00:00Z",
  proposed: { module: "jobs.generate", args: ["--out", "/etc"] },
  proposed_digest: "b".repeat(64),
  proposed_at: "2026-01-01T01:00:00Z",
  proposed_by_attempt: "evil",
};

describe("SpecPanel", () => {
  it("shows the pinned spec, who approved it, and the proposal an operator may approve", async () => {
    const decide = vi.fn(async () => ({ ...STATE, spec: STATE.proposed, proposed: null }));
    const onDecided = vi.fn();
    render(<SpecPanel runId="r" state={STATE} operator onDecided={onDecided} decide={decide} />);

    expect(screen.getByTestId("spec-command").textContent).toBe(
      "python -m jobs.load_files --table p.d.t --password ***",
    );
    expect(screen.getByTestId("spec-approval").textContent).toContain("Approved by alice");
    expect(screen.getByTestId("spec-proposed").textContent).toContain("python -m jobs.generate --out /etc");
    fireEvent.click(screen.getByRole("button", { name: "Approve the new spec" }));
    await waitFor(() => expect(onDecided).toHaveBeenCalledTimes(1));
    expect(decide).toHaveBeenCalledWith("b".repeat(64), "approve");
  });

  it("offers viewers no decision, and says an unapproved spec waits", () => {
    render(
      <SpecPanel runId="r" state={{ ...STATE, approved_by: null, approved_at: null }} operator={false} onDecided={() => {}} />,
    );
    expect(screen.getByTestId("spec-approval").textContent).toContain("auto-resume waits");
    expect(screen.queryByRole("button")).toBeNull();
  });

  it("keeps the reason when a decision is refused", async () => {
    render(
      <SpecPanel runId="r" state={STATE} operator onDecided={() => {}} decide={async () => "the spec changed"} />,
    );
    fireEvent.click(screen.getByRole("button", { name: "Reject it" }));
    expect((await screen.findByRole("alert")).textContent).toContain("the spec changed");
  });
});
