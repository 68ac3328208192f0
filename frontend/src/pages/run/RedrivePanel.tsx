// Re-drive: a run's set-aside rows sent to their table again once the cause is fixed.
// The panel accounts for them (re-driven and landed, still set aside) from the re-drive
// runs' own events; the dialog shows the plan, and only on confirm launches that exact
// command (by its digest: its dead-letter table and ledger came from the run's events,
// which any ingest token can send, so an operator's eyes are the gate).
import { useEffect, useState } from "react";
import { Link } from "react-router";
import { api, errorMessage, type RedriveAccepted, type RedrivePlan, type RunDetail } from "../../api/client";
import { Dialog } from "../../components/Dialog";
import { ErrorNote, Loading, Stat, StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";

/** Whether the run page offers a re-drive, and if not, why (the button's title). */
export function redriveOffer(run: RunDetail): { offered: boolean; why: string } {
  const r = run.redrives;
  if (r.unavailable !== null) return { offered: false, why: `Cannot re-drive: ${r.unavailable}` };
  if (r.rows_still_set_aside === 0) return { offered: false, why: "Every set-aside row has been re-driven" };
  return { offered: true, why: "Send the set-aside rows to their table again, each once" };
}

export function RedrivePanel({ run }: { run: RunDetail }) {
  const r = run.redrives;
  if (r.rows_set_aside === 0 && r.runs.length === 0 && r.launches.length === 0) return null;
  const last = r.launches[0];
  return (
    <section aria-labelledby="redrives-title" data-testid="redrives-panel">
      <h2 id="redrives-title">Re-drives</h2>
      <dl className="stats">
        <Stat label="Set aside" value={formatCount(r.rows_set_aside)} testId="redrive-set-aside" />
        <Stat
          label="Re-driven (landed)"
          value={formatCount(r.rows_redriven)}
          testId="redrive-redriven"
          note="rows the re-drive runs' committed writes put in their tables, each once"
        />
        <Stat
          label="Still set aside"
          value={formatCount(r.rows_still_set_aside)}
          testId="redrive-still-set-aside"
          note="not landed yet: under this run's id, or refused again under a re-drive's, with the new reason"
        />
      </dl>
      {r.runs.length > 0 && (
        <ul data-testid="redrive-runs">
          {r.runs.map((run) => (
            <li key={run.run_id}>
              <Link to={`/runs/${encodeURIComponent(run.run_id)}`} className="mono">
                {run.run_id}
              </Link>{" "}
              <StatusBadge status={run.status} />: {formatCount(run.rows_landed)} landed
              {run.rows_set_aside_again > 0 ? `, ${formatCount(run.rows_set_aside_again)} refused again` : ""}
            </li>
          ))}
        </ul>
      )}
      {last && (
        <p className="muted" data-testid="redrive-last-launch">
          Last launch ({last.number}) by {last.actor} at {formatTime(last.requested_at)}:{" "}
          {last.live ? "running" : `exited ${last.exit_code ?? "before it started"}`}; its log is{" "}
          <span className="mono">{last.log_path}</span> on {last.host}.
        </p>
      )}
    </section>
  );
}

export function RedrivePlanView({ plan }: { plan: RedrivePlan }) {
  return (
    <div data-testid="redrive-plan">
      <p>
        Sends the <strong data-testid="redrive-plan-rows">{formatCount(plan.rows_to_send)}</strong> row(s) of run{" "}
        <code>{plan.run_id}</code> still set aside in <span className="mono">{plan.dead_letter_table}</span> to their
        table again, as a run of its own (<code>{plan.run_id}:redrive-N</code>). Each row lands once however often
        this runs; a row BigQuery still refuses stays set aside with the new reason.
      </p>
      <p className="muted">
        {formatCount(plan.rows_set_aside)} set aside, {formatCount(plan.rows_redriven)} re-driven so far. Its record
        of which rows it took is kept in the run&apos;s ledger, <span className="mono">{plan.ledger}</span>, which
        every re-drive of this run shares.
      </p>
      <pre className="command" data-testid="redrive-plan-command">
        {plan.command.join(" ")}
      </pre>
      {plan.warnings.length > 0 && (
        <ul className="field-error" data-testid="redrive-plan-warnings">
          {plan.warnings.map((warning) => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
      <p className="muted">
        Log: <span className="mono">{plan.log_path}</span>
      </p>
    </div>
  );
}

type State =
  | { kind: "loading" }
  | { kind: "ready"; plan: RedrivePlan }
  | { kind: "refused"; message: string }
  | { kind: "launched"; accepted: RedriveAccepted };

export function RedriveDialog({
  runId,
  open,
  onClose,
  onLaunched,
  loadPlan = defaultLoadPlan,
  launch = defaultLaunch,
}: {
  runId: string;
  open: boolean;
  onClose: () => void;
  onLaunched: (accepted: RedriveAccepted) => void;
  loadPlan?: (runId: string) => Promise<RedrivePlan | string>;
  launch?: (runId: string, digest: string) => Promise<RedriveAccepted | string>;
}) {
  const [state, setState] = useState<State>({ kind: "loading" });
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);

  useEffect(() => {
    if (!open) return;
    let current = true;
    setState({ kind: "loading" });
    setFailure(null);
    void loadPlan(runId).then((answer) => {
      if (!current) return;
      setState(typeof answer === "string" ? { kind: "refused", message: answer } : { kind: "ready", plan: answer });
    });
    return () => {
      current = false;
    };
  }, [open, runId, loadPlan]);

  const confirm = async () => {
    if (state.kind !== "ready" || busy) return;
    setBusy(true);
    const answer = await launch(runId, state.plan.digest);
    setBusy(false);
    if (typeof answer === "string") {
      setFailure(answer);
      return;
    }
    setState({ kind: "launched", accepted: answer });
    onLaunched(answer);
  };

  return (
    <Dialog open={open} title={`Re-drive the set-aside rows of ${runId}?`} onClose={onClose}>
      {state.kind === "loading" && <Loading what="the re-drive plan" />}
      {state.kind === "refused" && <ErrorNote message={`This run cannot be re-driven: ${state.message}`} />}
      {state.kind === "ready" && <RedrivePlanView plan={state.plan} />}
      {state.kind === "launched" && (
        <p role="status" data-testid="redrive-launched">
          Re-drive launch {state.accepted.launch} started (pid {state.accepted.pid}): its events arrive as run{" "}
          <code>{runId}:redrive-N</code>, counted on this page. Its log: {" "}
          <span className="mono">{state.accepted.log_path}</span>.
        </p>
      )}
      {failure && <ErrorNote message={`The re-drive was refused: ${failure}`} />}
      <div className="actions">
        {state.kind !== "launched" && (
          <button type="button" className="primary" disabled={state.kind !== "ready" || busy} onClick={confirm}>
            {busy ? "Launching…" : "Re-drive rows"}
          </button>
        )}
        <button type="button" onClick={onClose}>
          {state.kind === "launched" ? "Close" : "Cancel"}
        </button>
      </div>
    </Dialog>
  );
}

async function defaultLoadPlan(runId: string): Promise<RedrivePlan | string> {
  const { data, error, response } = await api.POST("/api/runs/{run_id}/redrive", {
    params: { path: { run_id: runId }, query: { dry_run: true } },
  });
  if (data && "digest" in data) return data as RedrivePlan;
  return errorMessage(error, `the backend answered ${response.status}`);
}

async function defaultLaunch(runId: string, digest: string): Promise<RedriveAccepted | string> {
  const { data, error, response } = await api.POST("/api/runs/{run_id}/redrive", {
    params: { path: { run_id: runId }, query: { approve_plan: digest } },
  });
  if (data && "pid" in data) return data as RedriveAccepted;
  return errorMessage(error, `the backend answered ${response.status}`);
}
