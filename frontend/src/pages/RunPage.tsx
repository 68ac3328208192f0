// One run: its state and actions, an overwrite's swap, request charts, commit history,
// streams, reconciliation and attempts. Everything re-reads live when the run changes.
import { lazy, Suspense, useCallback, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { api, errorMessage, type RunDetail } from "../api/client";
import { ErrorNote, Loading, QueryState, Stat, StatusBadge } from "../components/ui";
import { useIsOperator } from "../lib/auth";
import { CAUSE_LABELS, type RunCause as RunCauseShown } from "../lib/causes";
import { deadLetterNote } from "../lib/deadLetters";
import { durationBetween, formatCount, formatDuration, formatTime } from "../lib/format";
import { useLiveReload } from "../lib/live";
import { modeNote } from "../lib/modes";
import { useQuery } from "../lib/useQuery";
import { AttemptsPanel } from "./run/AttemptsPanel";
import { PendingIntentsPanel } from "./run/PendingIntents";
import { BatchesTable, type BatchesTableHandle } from "./run/BatchesTable";
import { OverwritePanel } from "./run/OverwritePanel";
import { ReconciliationPanel } from "./run/ReconciliationPanel";
import { RedriveDialog, RedrivePanel, redriveOffer } from "./run/RedrivePanel";
import { RejectionsPanel } from "./run/RejectionsPanel";
import { ResumeDialog } from "./run/ResumeDialog";
import { SpecPanel } from "./run/SpecPanel";
import { StreamsTable } from "./run/StreamsTable";

const RESUMABLE = new Set(["failed", "stalled"]);
// The charting library is most of the bundle: loaded when a run page first needs it.
const RequestCharts = lazy(() => import("./run/RequestCharts").then((m) => ({ default: m.RequestCharts })));
const BatchTimeline = lazy(() => import("./run/BatchTimeline").then((m) => ({ default: m.BatchTimeline })));

function RunSummary({ run }: { run: RunDetail }) {
  return (
    <section aria-label="Summary">
      <dl className="stats">
        <Stat label="Rows committed" value={formatCount(run.rows_committed)} testId="run-rows-committed" />
        <Stat label="Batches committed" value={formatCount(run.batches_committed)} testId="run-batches-committed" />
        <Stat label="Rows intended" value={formatCount(run.rows_expected)} />
        <Stat label="Rows the job reported" value={formatCount(run.rows_reported)} />
        <Stat label="ALREADY_EXISTS" value={formatCount(run.already_exists)} testId="run-already-exists" />
        <Stat label="OUT_OF_RANGE" value={formatCount(run.out_of_range)} testId="run-out-of-range" />
        <Stat
          label="Rows set aside"
          value={formatCount(run.rows_dead_lettered)}
          testId="run-rows-dead-lettered"
          note={deadLetterNote(run)}
        />
        <Stat label="Started" value={formatTime(run.started_at)} />
        <Stat
          label="Duration"
          value={formatDuration(durationBetween(run.started_at, run.finished_at ?? run.last_event_at))}
        />
      </dl>
      <p className="muted">
        Job <strong>{run.job ?? "–"}</strong> into{" "}
        <Link to={`/tables/${encodeURIComponent(run.table)}`} className="mono">
          {run.table}
        </Link>
        ,{" "}
        <span title={modeNote(run.mode)}>{run.mode ?? "unknown"} mode</span>
        {run.key_column ? `, key ${run.key_column}` : ""}; last heard{" "}
        {formatTime(run.last_event_at)}.
      </p>
      {run.throttled > 0 && (
        <p className="warning" data-testid="run-throttled">
          Throttled by BigQuery&apos;s throughput quota: {formatCount(run.throttled)} append
          request{run.throttled === 1 ? "" : "s"} refused
          {run.throttled_at ? `, last at ${formatTime(run.throttled_at)}` : ""}. The appends wait
          for the quota to refill (up to <span className="mono">retry.throttle_s</span>, 15 minutes
          by default) and are sent again, each row once.
        </p>
      )}
      {run.arrow_refused_at && (
        <p className="warning" data-testid="run-arrow-refused">
          BigQuery refused this run&apos;s Arrow rows at {formatTime(run.arrow_refused_at)}: they
          went as proto rows from then on, and nothing of the refused request was written
          {run.arrow_refused ? ` (${run.arrow_refused})` : ""}. Give{" "}
          <span className="mono">row_format=proto</span> to start so.
        </p>
      )}
      {/* A failed run's cause leads the page (above); another run's error is told here. */}
      {!run.cause && run.error && <ErrorNote message={`Error: ${run.error}`} />}
    </section>
  );
}

/** A failed run's cause: its kind and the batch it stopped at, the raw error beneath. */
function RunCause({ cause }: { cause: RunCauseShown }) {
  return (
    <section className="run-cause" aria-label="Why it failed" data-testid="run-cause" data-kind={cause.kind} data-batch={cause.batch ?? ""}>
      <p className="run-cause-headline">
        <span className="badge badge-bad">{CAUSE_LABELS[cause.kind]}</span>{" "}
        <strong data-testid="run-cause-headline">{cause.headline}</strong>
      </p>
      {cause.error && (
        <pre className="run-cause-error" data-testid="run-cause-error" aria-label="The error as the job reported it">
          {cause.error}
        </pre>
      )}
    </section>
  );
}

export function RunPage() {
  const runId = useParams().runId ?? "";
  const operator = useIsOperator();
  const run = useQuery(() => api.GET("/api/runs/{run_id}", { params: { path: { run_id: runId } } }), runId);
  const metrics = useQuery(
    () => api.GET("/api/metrics/write-errors", { params: { query: { run_id: runId } } }),
    runId,
  );
  const checks = useQuery(
    () =>
      api.GET("/api/runs/{run_id}/reconciliations", {
        params: { path: { run_id: runId }, query: { limit: 10 } },
      }),
    runId,
  );
  const reloadAll = useCallback(() => {
    run.reload();
    metrics.reload();
    checks.reload();
  }, [run.reload, metrics.reload, checks.reload]);
  useLiveReload(reloadAll, 500, runId);

  const [resumeOpen, setResumeOpen] = useState(false);
  const [redriveOpen, setRedriveOpen] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [reconciling, setReconciling] = useState(false);
  // The batch timeline opens a batch's receipt in the commit history below it.
  const history = useRef<BatchesTableHandle>(null);
  const openReceipt = useCallback((key: string) => history.current?.openReceipt(key), []);

  // Each table the run wrote is checked on its own (a detail table and its summary).
  const reconcile = async () => {
    setReconciling(true);
    setNotice(null);
    const tables = run.data?.tables ?? [];
    const several = tables.length > 1;
    const said: string[] = [];
    for (const table of several ? tables : [undefined]) {
      const { data, error, response } = await api.POST("/api/runs/{run_id}/reconcile", {
        params: { path: { run_id: runId }, query: table ? { table } : {} },
      });
      const where = table ? ` ${table}` : "";
      said.push(
        data
          ? `Reconciled${where}: ${data.status}${data.error ? ` (${data.error})` : ""}.`
          : `Reconcile${where} failed: ${errorMessage(error, `the backend answered ${response.status}`)}`,
      );
    }
    setReconciling(false);
    setNotice(said.join(" "));
    checks.reload();
    run.reload();
  };

  if (run.data === undefined) {
    return run.error ? <ErrorNote message={`Run ${runId}: ${run.error}`} onRetry={run.reload} /> : <Loading what="the run" />;
  }
  const detail = run.data;
  // The control plane says when it cannot launch the run at all (a user's own script);
  // else only a failed or stalled run resumes.
  const blocked = detail.resume_unavailable;
  const resumable = blocked === null && RESUMABLE.has(detail.status);
  const whyNot = blocked !== null ? `Cannot resume: ${blocked}` : `Only a failed or stalled run resumes (this one is ${detail.status})`;
  const latest = checks.data?.data[0];
  // Offered on a run that set rows aside; disabled, with why, when it cannot be re-driven.
  const redrive = redriveOffer(detail);

  return (
    <>
      <nav aria-label="Breadcrumb" className="muted">
        <Link to="/runs">Runs</Link> › {runId}
      </nav>
      <div className="page-header">
        <h1>
          <span className="mono">{detail.run_id}</span>{" "}
          <span data-testid="run-status">
            <StatusBadge status={detail.status} />
          </span>
        </h1>
        {operator && (
          <div className="actions">
            <button
              type="button"
              className="primary"
              disabled={!resumable}
              title={resumable ? "Restart the job on its checkpoint" : whyNot}
              onClick={() => setResumeOpen(true)}
            >
              Resume
            </button>
            {detail.rows_dead_lettered > 0 && (
              <button
                type="button"
                disabled={!redrive.offered}
                title={redrive.why}
                onClick={() => setRedriveOpen(true)}
              >
                Re-drive set-aside rows
              </button>
            )}
            <button type="button" disabled={reconciling} onClick={reconcile}>
              {reconciling ? "Reconciling…" : "Reconcile now"}
            </button>
          </div>
        )}
      </div>
      {operator && blocked !== null && (
        <p className="muted" data-testid="resume-unavailable">
          Resume is not offered here: {blocked}.
        </p>
      )}
      {run.error && <ErrorNote message={`Could not refresh the run: ${run.error}`} onRetry={run.reload} />}
      {notice && (
        <p role="status" data-testid="run-notice">
          {notice}
        </p>
      )}
      {detail.cause && <RunCause cause={detail.cause} />}
      <RunSummary run={detail} />
      <OverwritePanel run={detail} />
      {blocked === null && RESUMABLE.has(detail.status) && (
        <PendingIntentsPanel runId={runId} version={detail.updated_at} />
      )}
      <ReconciliationPanel latest={latest} history={checks.data?.data ?? []} />
      <RejectionsPanel run={detail} />
      <RedrivePanel run={detail} />
      <QueryState query={metrics} what="request metrics">
        {(body) => (
          <Suspense fallback={<Loading what="the charts" />}>
            <RequestCharts metrics={body} />
          </Suspense>
        )}
      </QueryState>
      <Suspense fallback={<Loading what="the batch timeline" />}>
        <BatchTimeline batches={detail.batches} onOpen={openReceipt} />
      </Suspense>
      <BatchesTable ref={history} batches={detail.batches} />
      <StreamsTable streams={detail.streams} />
      <AttemptsPanel runId={runId} attempts={detail.attempts} version={detail.updated_at} />
      <SpecPanel runId={runId} state={detail.spec_state} operator={operator} onDecided={run.reload} />
      {operator && (
        <RedriveDialog
          runId={runId}
          open={redriveOpen}
          onClose={() => setRedriveOpen(false)}
          onLaunched={() => run.reload()}
        />
      )}
      {operator && (
        <ResumeDialog
          runId={runId}
          open={resumeOpen}
          onClose={() => setResumeOpen(false)}
          onResumed={(accepted) => {
            setResumeOpen(false);
            setNotice(`Resume requested: attempt ${accepted.attempt} is starting.`);
            run.reload();
          }}
        />
      )}
    </>
  );
}
