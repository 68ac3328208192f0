// The commit history: one row per write (a micro-batch of a streaming query; each write
// of a foreachBatch call or a batch run), in the order the ledger saw them.
import type { Batch } from "../../api/client";
import { Empty, StatusBadge } from "../../components/ui";
import { formatCount, formatDuration, formatTime } from "../../lib/format";
import { MODE_NOTES } from "../../lib/modes";

const STATE_LABELS: Record<string, string> = {
  intent: "intended",
  skipped_duplicate: "skipped (duplicate)",
};

/** What tells two writes apart: one micro-batch may write several tables, and a table
 * more than once. */
export function batchKey(batch: Batch): string {
  return `${batch.table}/${batch.query_id}/${batch.batch_id ?? "-"}/${batch.write ?? ""}`;
}

export function BatchesTable({ batches }: { batches: Batch[] }) {
  const skipped = batches.filter((b) => b.state === "skipped_duplicate").length;
  const severalTables = new Set(batches.map((b) => b.table)).size > 1;
  const namedWrites = batches.some((b) => b.write !== null);
  return (
    <section aria-labelledby="batches-title">
      <h2 id="batches-title">Commit history</h2>
      <p className="muted">
        {formatCount(batches.filter((b) => b.state === "committed").length)} committed ·{" "}
        <span data-testid="skipped-duplicates">{formatCount(skipped)}</span> skipped as duplicates (a replayed batch the
        ledger had already committed)
      </p>
      {batches.length === 0 ? (
        <Empty>No batch has been intended yet.</Empty>
      ) : (
        <div className="table-wrap">
          <table data-testid="batches-table">
            <thead>
              <tr>
                <th scope="col">Batch</th>
                {severalTables && <th scope="col">Table</th>}
                {namedWrites && <th scope="col">Write</th>}
                <th scope="col">State</th>
                <th scope="col" className="number">
                  Rows
                </th>
                <th scope="col" className="number">
                  Streams
                </th>
                <th scope="col" className="number">
                  Commit took
                </th>
                <th scope="col">Committed at</th>
                <th scope="col" className="number">
                  Replays
                </th>
                <th scope="col">Mode</th>
                <th scope="col">Note</th>
              </tr>
            </thead>
            <tbody>
              {batches.map((batch) => (
                <tr key={batchKey(batch)} data-testid="batch-row">
                  <td>{batch.batch_id ?? "–"}</td>
                  {severalTables && <td>{batch.table}</td>}
                  {namedWrites && <td>{writeLabel(batch.write)}</td>}
                  <td>
                    <StatusBadge status={batch.state === "intent" ? "intended" : batch.state} label={STATE_LABELS[batch.state]} />
                  </td>
                  <td className="number">{formatCount(batch.rows ?? batch.expected_rows)}</td>
                  <td className="number">{batch.streams.length}</td>
                  <td className="number">{formatDuration(batch.commit_ms)}</td>
                  <td>{formatTime(batch.committed_at ?? batch.skipped_at ?? batch.aborted_at)}</td>
                  <td className="number">{batch.replays}</td>
                  <td title={MODE_NOTES[batch.mode]}>{batch.mode}</td>
                  <td className="muted" title={batch.dead_letter_table ? `dead-letter table ${batch.dead_letter_table}` : undefined}>
                    {batchNote(batch)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** Why a write needs a look: why it was aborted, rows a replay wrote again, rows set aside. */
export function batchNote(batch: Batch): string {
  const notes: string[] = [];
  if (batch.abort_reason) notes.push(batch.abort_reason);
  else if (batch.rows_rewritten) notes.push(`${formatCount(batch.rows_rewritten)} rows rewritten`);
  if (batch.dead_lettered_rows) notes.push(`${formatCount(batch.dead_lettered_rows)} rows set aside`);
  return notes.join("; ");
}

/** "#1" for the second write of a call to a table, the user's write_id as given. */
function writeLabel(write: string | null): string {
  if (write === null) return "–";
  return write.startsWith("id-") ? write.slice(3) : `#${write}`;
}
