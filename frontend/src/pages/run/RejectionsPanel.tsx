// Rows BigQuery refused for this run: how many its committed batches set aside in the
// dead-letter table, and the latest rows the tasks named (offset, key, column, reason),
// so whoever fixes them can find them again. Shown only when there is something to say.
import type { RunDetail } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { formatCount, formatTime } from "../../lib/format";

type Rejection = RunDetail["rejections"][number];

const REJECTION_COLUMNS: Column<Rejection>[] = [
  { id: "offset", header: "Offset", cell: (row) => row.offset, align: "end" },
  { id: "key", header: "Key", cell: (row) => row.key ?? "–", className: "mono" },
  { id: "column", header: "Column", cell: (row) => row.column ?? "–", className: "mono" },
  { id: "reason", header: "Reason", cell: (row) => row.reason },
  { id: "partition", header: "Partition", cell: (row) => row.partition, align: "end" },
  { id: "batch", header: "Batch", cell: (row) => row.batch_id ?? "–" },
  {
    id: "where",
    header: "Where",
    cell: (row) => row.dead_letter_table ?? "not set aside: no dead-letter table, the task failed",
    cellAttributes: (row) => ({ className: row.dead_letter_table ? "mono" : undefined }),
  },
  { id: "reported", header: "Reported", cell: (row) => formatTime(row.time) },
];

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
        <DataTable
          caption={`The latest ${run.rejections.length} row(s) refused, newest first`}
          captionClassName="muted"
          testId="rejections-table"
          columns={REJECTION_COLUMNS}
          rows={run.rejections}
          rowKey={rejectionKey}
          rowAttributes={() => ({ "data-testid": "rejection-row" })}
        />
      )}
    </section>
  );
}

/** One row of one write (the backend keeps each row once). */
export function rejectionKey(row: Rejection): string {
  return [row.table, row.query_id, row.batch_id ?? "-", row.write ?? "", row.partition, row.offset, row.column ?? ""].join("/");
}
