// Resume: first the plan (a dry run: what the job will find and do), then, on confirm,
// the resume itself under one idempotency key, so a double click resumes once. The
// confirm approves the spec the plan shows (by its digest): the command came from the
// job's own events, which any ingest token can send, so an operator's eyes are the gate.
import { useEffect, useState } from "react";
import { api, errorMessage, type ResumeAccepted, type ResumePlan } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { Dialog } from "../../components/Dialog";
import { ErrorNote, Loading, StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { PendingIntentsTable } from "./PendingIntents";

type PendingSwap = ResumePlan["overwrites"][number];

// An overwrite the ledger holds committed to its staging table, by how far its swap got.
const OVERWRITE_COLUMNS: Column<PendingSwap>[] = [
  {
    id: "write",
    header: "Write",
    cell: (o) => (
      <>
        <span className="mono">{o.table}</span>
        {o.write !== null && <span className="muted"> write {o.write}</span>}
        {o.batch_id !== null && <span className="muted"> batch {o.batch_id}</span>}
      </>
    ),
  },
  { id: "step", header: "Step", cell: (o) => <StatusBadge status={o.step} label={o.step.replace("_", " ")} /> },
  { id: "staged-rows", header: "Staged rows", cell: (o) => formatCount(o.staged_rows), align: "end" },
  {
    id: "resume-will",
    header: "A resume",
    cell: (o) => o.resume_will,
    cellAttributes: () => ({ "data-testid": "overwrite-resume-will" }),
  },
];

export function ResumePlanView({ plan }: { plan: ResumePlan }) {
  return (
    <div data-testid="resume-plan">
      <p>
        Attempt <strong>{plan.attempt}</strong> of run <code>{plan.run_id}</code> restarts{" "}
        <code>{plan.module}</code> on its checkpoint. Committed batches are not written again; a batch whose
        commit was intended but not confirmed is finished or skipped by the ledger, never appended twice.
      </p>
      <dl className="stats">
        <div className="stat">
          <dt>Committed so far</dt>
          <dd data-testid="plan-committed">
            {formatCount(plan.committed_rows)} rows in {formatCount(plan.committed_batches)} batches
          </dd>
        </div>
        <div className="stat">
          <dt>Last committed batch</dt>
          <dd>{plan.last_committed_batch ?? "none"}</dd>
        </div>
        <div className="stat">
          <dt>Spark planned / finished</dt>
          <dd>
            {plan.spark_last_planned_batch ?? "–"} / {plan.spark_last_finished_batch ?? "–"}
          </dd>
        </div>
      </dl>
      <h3>Intended, not confirmed ({plan.pending_intents.length})</h3>
      {plan.pending_intents.length === 0 ? (
        <p className="muted" data-testid="plan-no-intents">
          None: the job starts after the last committed batch.
        </p>
      ) : (
        <PendingIntentsTable intents={plan.pending_intents} testId="plan-intents" />
      )}
      {plan.overwrites.length > 0 && (
        <>
          <h3>Overwrites ({plan.overwrites.length})</h3>
          <DataTable
            label="Overwrites"
            testId="plan-overwrites"
            columns={OVERWRITE_COLUMNS}
            rows={plan.overwrites}
            rowKey={(o) => `${o.table}/${o.query_id}/${o.batch_id ?? "-"}/${o.write ?? ""}`}
          />
        </>
      )}
      <SpecApproval plan={plan} />
      {plan.warnings.length > 0 && (
        <ul className="field-error" data-testid="plan-warnings">
          {plan.warnings.map((warning) => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
      <details>
        <summary>Command, checkpoint and ledger</summary>
        <dl>
          <dt>Checkpoint</dt>
          <dd className="mono">{plan.checkpoint ?? "–"}</dd>
          <dt>Ledger</dt>
          <dd className="mono">{plan.ledger}</dd>
          <dt>Command</dt>
          <dd className="mono">{plan.command.join(" ")}</dd>
          <dt>Log</dt>
          <dd className="mono">{plan.log_path}</dd>
        </dl>
      </details>
    </div>
  );
}

function SpecApproval({ plan }: { plan: ResumePlan }) {
  const spec = plan.spec;
  const digest = (spec.digest ?? "").slice(0, 12);
  if (spec.approved_by) {
    return (
      <p data-testid="plan-approval">
        Spec <code>{digest}</code> approved by <strong>{spec.approved_by}</strong>
        {spec.approved_at ? ` at ${formatTime(spec.approved_at)}` : ""}.
      </p>
    );
  }
  return (
    <div data-testid="plan-approval">
      <p>
        <strong>No operator has approved this command yet.</strong> It is what the job reported when it started
        (spec <code>{digest}</code>); resuming approves it, and lets auto-resume launch it again.
      </p>
      <pre className="command" data-testid="plan-command">
        {plan.command.join(" ")}
      </pre>
    </div>
  );
}

type PlanState = { kind: "loading" } | { kind: "ready"; plan: ResumePlan } | { kind: "refused"; message: string };

export function ResumeDialog({
  runId,
  open,
  onClose,
  onResumed,
  loadPlan = defaultLoadPlan,
  resume = defaultResume,
}: {
  runId: string;
  open: boolean;
  onClose: () => void;
  onResumed: (accepted: ResumeAccepted) => void;
  loadPlan?: (runId: string) => Promise<ResumePlan | string>;
  resume?: (runId: string, idempotencyKey: string, specDigest: string) => Promise<ResumeAccepted | string>;
}) {
  const [plan, setPlan] = useState<PlanState>({ kind: "loading" });
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const [idempotencyKey, setIdempotencyKey] = useState("");

  useEffect(() => {
    if (!open) return;
    let current = true;
    setPlan({ kind: "loading" });
    setFailure(null);
    setIdempotencyKey(newKey());
    void loadPlan(runId).then((answer) => {
      if (!current) return;
      setPlan(typeof answer === "string" ? { kind: "refused", message: answer } : { kind: "ready", plan: answer });
    });
    return () => {
      current = false;
    };
  }, [open, runId, loadPlan]);

  const confirm = async () => {
    if (plan.kind !== "ready") return;
    setBusy(true);
    const answer = await resume(runId, idempotencyKey, plan.plan.spec.digest ?? "");
    setBusy(false);
    if (typeof answer === "string") setFailure(answer);
    else onResumed(answer);
  };

  return (
    <Dialog open={open} title={`Resume ${runId}?`} onClose={onClose}>
      {plan.kind === "loading" && <Loading what="the resume plan" />}
      {plan.kind === "refused" && <ErrorNote message={`This run cannot be resumed: ${plan.message}`} />}
      {plan.kind === "ready" && <ResumePlanView plan={plan.plan} />}
      {failure && <ErrorNote message={`The resume was refused: ${failure}`} />}
      <div className="actions">
        <button type="button" className="primary" disabled={plan.kind !== "ready" || busy} onClick={confirm}>
          {busy ? "Resuming…" : "Resume run"}
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

function newKey(): string {
  return typeof crypto.randomUUID === "function"
    ? crypto.randomUUID()
    : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

async function defaultLoadPlan(runId: string): Promise<ResumePlan | string> {
  const { data, error, response } = await api.POST("/api/runs/{run_id}/resume", {
    params: { path: { run_id: runId }, query: { dry_run: true } },
  });
  if (data && "command" in data) return data as ResumePlan;
  return errorMessage(error, `the backend answered ${response.status}`);
}

async function defaultResume(
  runId: string,
  idempotencyKey: string,
  specDigest: string,
): Promise<ResumeAccepted | string> {
  const { data, error, response } = await api.POST("/api/runs/{run_id}/resume", {
    params: {
      path: { run_id: runId },
      query: specDigest ? { approve_spec: specDigest } : {},
      header: { "Idempotency-Key": idempotencyKey },
    },
  });
  if (data && "attempt_id" in data) return data as ResumeAccepted;
  return errorMessage(error, `the backend answered ${response.status}`);
}
