// Rows BigQuery refused for this run: how many its committed batches set aside in the
// dead-letter table, and the latest rows the tasks named (offset, key, column, reason),
// so whoever fixes them can find them again. Shown only when there is something to say.
import type { RunDetail } from "../../api/client";
import { formatCount, formatTime } from "../../lib/format";

type Rejection = RunDetail["rejections"][number];

export function RejectionsPanel({ run }: { run: RunDetail }) {
  if (run.rows_dead_lettered === 0 && run.rejected_requests === 0 && run.rejections.length === 0) return null;
  return (
    <section aria-labelledby="rejections-title" data-testid="rejections-panel">
      <h2 id="rejections-title">Rows set aside</h2>
      <p className="muted" data-testid="rejections-summary">
        {formatCount(run.rows_dead_lettered)} row(s) BigQuery refused were set aside
        {run.dead_letter_table ? (
          <>
            {" "}
            in <span className="mono">{run.dead_letter_table}</span>
          </>
        ) : null}{" "}
        by committed batches, each once; {formatCount(run.rejected_requests)} refused request(s) reported by the tasks.
      </p>
      {run.rejections.length > 0 && (
        <div className="table-wrap">
          <table data-testid="rejections-table">
            <caption className="muted">
              The latest {run.rejections.length} row(s) refused, newest first
            </caption>
            <thead>
              <tr>
                <th scope="col" className="number">
                  Offset
                </th>
                <th scope="col">Key</th>
                <th scope="col">Column</th>
                <th scope="col">Reason</th>
                <th scope="col" className="number">
                  Partition
                </th>
                <th scope="col">Batch</th>
                <th scope="col">Where</th>
                <th scope="col">Reported</th>
              </tr>
            </thead>
            <tbody>
              {run.rejections.map((row) => (
                <tr key={rejectionKey(row)} data-testid="rejection-row">
                  <td className="number">{row.offset}</td>
                  <td className="mono">{row.key ?? "–"}</td>
                  <td className="mono">{row.column ?? "–"}</td>
                  <td>{row.reason}</td>
                  <td className="number">{row.partition}</td>
                  <td>{row.batch_id ?? "–"}</td>
                  <td className={row.dead_letter_table ? "mono" : undefined}>
                    {row.dead_letter_table ?? "not set aside: no dead-letter table, the task failed"}
                  </td>
                  <td>{formatTime(row.time)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** One row of one write (the backend keeps each row once). */
export function rejectionKey(row: Rejection): string {
  return [row.table, row.query_id, row.batch_id ?? "-", row.write ?? "", row.partition, row.offset, row.column ?? ""].join("/");
}
