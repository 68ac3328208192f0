// The run's launch spec: what a resume would start, whether an operator approved it, and
// a different spec a later attempt reported, for an operator to approve or reject. The
// spec comes from the job's own events (any ingest token can send them): nothing is
// launched from it until an operator approves it.
import { useState } from "react";
import { api, errorMessage, type RunSpec } from "../../api/client";
import { ErrorNote } from "../../components/ui";
import { formatTime } from "../../lib/format";

type Decide = (digest: string, decision: "approve" | "reject") => Promise<RunSpec | string>;

function command(spec: Record<string, unknown> | null): string {
  if (!spec) return "–";
  const args = Array.isArray(spec.args) ? (spec.args as unknown[]).map(String) : [];
  return [`python -m ${String(spec.module ?? "?")}`, ...args].join(" ");
}

export function SpecPanel({
  runId,
  state,
  operator,
  onDecided,
  decide,
}: {
  runId: string;
  state: RunSpec;
  operator: boolean;
  onDecided: () => void;
  decide?: Decide;
}) {
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  if (!state.spec) return null;
  const send = async (digest: string, decision: "approve" | "reject") => {
    setBusy(true);
    setFailure(null);
    const answer = await (decide ?? ((d, k) => defaultDecide(runId, d, k)))(digest, decision);
    setBusy(false);
    if (typeof answer === "string") setFailure(answer);
    else onDecided();
  };
  return (
    <section aria-label="Launch spec" data-testid="spec-panel">
      <h2>Launch spec</h2>
      <p className="mono" data-testid="spec-command">
        {command(state.spec)}
      </p>
      <p data-testid="spec-approval">
        {state.approved_by
          ? `Approved by ${state.approved_by}${state.approved_at ? ` at ${formatTime(state.approved_at)}` : ""}.`
          : "Not approved: resumes ask an operator to confirm it, and auto-resume waits."}{" "}
        <span className="muted">spec {(state.digest ?? "").slice(0, 12)}</span>
      </p>
      {operator && state.approved_by === null && state.digest && (
        <button type="button" disabled={busy} onClick={() => void send(state.digest ?? "", "approve")}>
          Approve this spec
        </button>
      )}
      {state.proposed && state.proposed_digest && (
        <div className="field-error" data-testid="spec-proposed">
          <p>
            Attempt <code>{state.proposed_by_attempt ?? "?"}</code> reported a different spec
            {state.proposed_at ? ` at ${formatTime(state.proposed_at)}` : ""}; resumes launch the one above unless an
            operator approves this one:
          </p>
          <p className="mono">{command(state.proposed)}</p>
          {operator && (
            <div className="actions">
              <button type="button" disabled={busy} onClick={() => void send(state.proposed_digest ?? "", "approve")}>
                Approve the new spec
              </button>
              <button type="button" disabled={busy} onClick={() => void send(state.proposed_digest ?? "", "reject")}>
                Reject it
              </button>
            </div>
          )}
        </div>
      )}
      {failure && <ErrorNote message={`The decision was refused: ${failure}`} />}
    </section>
  );
}

async function defaultDecide(runId: string, digest: string, decision: "approve" | "reject"): Promise<RunSpec | string> {
  const { data, error, response } = await api.POST("/api/runs/{run_id}/spec", {
    params: { path: { run_id: runId } },
    body: { digest, decision },
  });
  if (data) return data;
  return errorMessage(error, `the backend answered ${response.status}`);
}
