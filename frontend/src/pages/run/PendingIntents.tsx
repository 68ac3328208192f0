// The batches a run's checkpoint holds as intended but not confirmed, with what BigQuery
// holds of each. The Resume dialog shows them in its plan; the run page shows them for
// any reader of a failed or stalled run, so "committed in BigQuery, not in the
// checkpoint" is seen, with BigQuery's commit time as its proof, before anyone resumes.
import { api, type PendingIntent } from "../../api/client";
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

export function PendingIntentsTable({ intents, testId }: { intents: PendingIntent[]; testId: string }) {
  return (
    <table data-testid={testId}>
      <thead>
        <tr>
          <th scope="col">Batch</th>
          <th scope="col" className="number">
            Expected rows
          </th>
          <th scope="col" className="number">
            Streams
          </th>
          <th scope="col">Intended at</th>
          <th scope="col">In BigQuery</th>
          <th scope="col">A resume will</th>
        </tr>
      </thead>
      <tbody>
        {intents.map((intent) => (
          <tr key={`${intent.table}/${intent.query_id}/${intent.batch_id ?? "-"}/${intent.write ?? ""}`}>
            <td>
              {intent.batch_id ?? "–"}
              {intent.write !== null && <span className="muted"> · {intent.table} write {intent.write}</span>}
            </td>
            <td className="number">{formatCount(intent.expected_rows)}</td>
            <td className="number">{intent.streams.length}</td>
            <td>{formatTime(intent.intent_at)}</td>
            <td data-testid="intent-in-bigquery">
              {IN_BIGQUERY[intent.in_bigquery]}
              {intent.commit_time !== null && (
                <span className="muted"> · committed {formatTime(intent.commit_time)}</span>
              )}
            </td>
            <td data-testid="intent-resume-will">{intent.resume_will}</td>
          </tr>
        ))}
      </tbody>
    </table>
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
