// The batches a run's checkpoint holds as intended but not confirmed, with what BigQuery
// holds of each. The Resume dialog shows them in its plan; the run page shows them for
// any reader of a failed or stalled run, so "committed in BigQuery, not in the
// checkpoint" is seen, with BigQuery's commit time as its proof, before anyone resumes.
import { api, type PendingIntent } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { QueryState } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";
import { useQuery } from "../../lib/useQuery";

// What BigQuery holds of an intended batch: "committed" is the case a checkpoint misses
// (the commit took effect, the driver died before recording it).
const IN_BIGQUERY: Record<PendingIntent["in_bigquery"], string> = {
  committed: "Committed in BigQuery, not in the checkpoint",
  not_committed: "Not committed",
  streams_gone: "Streams gone",
  partly: "Partly committed",
  unknown: "Cannot tell",
};

const INTENT_COLUMNS: Column<PendingIntent>[] = [
  {
    id: "batch",
    header: "Batch",
    cell: (intent) => (
      <>
        {intent.batch_id ?? "–"}
        {intent.write !== null && <span className="muted"> · {intent.table} write {intent.write}</span>}
      </>
    ),
  },
  { id: "expected-rows", header: "Expected rows", cell: (intent) => formatCount(intent.expected_rows), align: "end" },
  { id: "streams", header: "Streams", cell: (intent) => intent.streams.length, align: "end" },
  { id: "intended-at", header: "Intended at", cell: (intent) => formatTime(intent.intent_at) },
  {
    id: "in-bigquery",
    header: "In BigQuery",
    cell: (intent) => (
      <>
        {IN_BIGQUERY[intent.in_bigquery]}
        {intent.commit_time !== null && <span className="muted"> · committed {formatTime(intent.commit_time)}</span>}
      </>
    ),
    cellAttributes: () => ({ "data-testid": "intent-in-bigquery" }),
  },
  {
    id: "resume-will",
    header: "A resume will",
    cell: (intent) => intent.resume_will,
    cellAttributes: () => ({ "data-testid": "intent-resume-will" }),
  },
];

export function PendingIntentsTable({ intents, testId }: { intents: PendingIntent[]; testId: string }) {
  return (
    <DataTable
      label="Intended, not confirmed"
      testId={testId}
      columns={INTENT_COLUMNS}
      rows={intents}
      rowKey={(intent) => `${intent.table}/${intent.query_id}/${intent.batch_id ?? "-"}/${intent.write ?? ""}`}
    />
  );
}

// Asked again when the run changes (``version``): a resume settles what it lists.
export function PendingIntentsPanel({ runId, version }: { runId: string; version: string }) {
  const intents = useQuery(
    () => api.GET("/api/runs/{run_id}/intents", { params: { path: { run_id: runId } } }),
    `${runId}/${version}`,
  );
  return (
    <section aria-labelledby="intents-heading" data-testid="intents-panel">
      <h2 id="intents-heading">Intended, not confirmed</h2>
      <QueryState query={intents} what="the checkpoint's intended batches">
        {(body) =>
          body.unavailable !== null ? (
            <p className="muted" data-testid="intents-unavailable">
              The checkpoint cannot be read here: {body.unavailable}.
            </p>
          ) : body.pending_intents.length === 0 ? (
            <p className="muted" data-testid="intents-none">
              None: every batch the checkpoint intended is confirmed.
            </p>
          ) : (
            <PendingIntentsTable intents={body.pending_intents} testId="run-intents" />
          )
        }
      </QueryState>
    </section>
  );
}
