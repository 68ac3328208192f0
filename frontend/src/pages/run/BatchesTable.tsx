// The commit history: one row per write (a micro-batch of a streaming query; each write
// of a foreachBatch call or a batch run), in the order the ledger saw them. A committed
// write opens its receipt: when its rows became the table's, its streams, the source
// offsets it read and the checksum of its keys. Another panel (the batch timeline)
// opens a receipt through the table's handle: the row scrolls into view, its receipt
// opens and its button takes the focus.
import { useEffect, useId, useImperativeHandle, useRef, useState, type Ref } from "react";
import type { Batch } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { StatusBadge } from "../../components/ui";
import { formatBytes, formatCount, formatDuration, formatTime } from "../../lib/format";
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

/** What the run page holds of the table: open a committed write's receipt by its key. */
export interface BatchesTableHandle {
  openReceipt(key: string): void;
}

export function BatchesTable({ batches, ref }: { batches: Batch[]; ref?: Ref<BatchesTableHandle> }) {
  // Open receipts by batch key: they stay open while the run reloads live.
  const [open, setOpen] = useState<ReadonlySet<string>>(() => new Set());
  // A receipt opened from outside: its row is brought into view once it has rendered.
  const [reveal, setReveal] = useState<{ key: string } | null>(null);
  const table = useRef<HTMLTableElement>(null);
  const receiptIds = useId();
  useImperativeHandle(
    ref,
    () => ({
      openReceipt(key: string) {
        setOpen((keys) => (keys.has(key) ? keys : new Set(keys).add(key)));
        setReveal({ key }); // a new object each time: asked twice, it scrolls twice
      },
    }),
    [],
  );
  useEffect(() => {
    if (reveal === null || table.current === null) return;
    const row = Array.from(table.current.querySelectorAll<HTMLTableRowElement>("tr[data-batch-key]")).find(
      (tr) => tr.dataset.batchKey === reveal.key,
    );
    if (!row) return;
    const still = window.matchMedia?.("(prefers-reduced-motion: reduce)").matches ?? true;
    row.scrollIntoView?.({ block: "center", behavior: still ? "auto" : "smooth" });
    row.querySelector<HTMLButtonElement>("button[aria-controls]")?.focus({ preventScroll: true });
  }, [reveal]);
  const toggle = (key: string) =>
    setOpen((keys) => {
      const next = new Set(keys);
      if (!next.delete(key)) next.add(key);
      return next;
    });
  // An id without the spaces a write id may hold, for the receipt button's aria-controls.
  const receiptId = (batch: Batch) => `${receiptIds}-${encodeURIComponent(batchKey(batch))}`;
  const skipped = batches.filter((b) => b.state === "skipped_duplicate").length;
  const severalTables = new Set(batches.map((b) => b.table)).size > 1;
  const namedWrites = batches.some((b) => b.write !== null);
  // A change data capture write's rows are changes: how many of each kind, per batch.
  const changes = batches.some((b) => b.upserts != null || b.deletes != null);
  const columns: Array<Column<Batch> | false> = [
    { id: "batch", header: "Batch", cell: (batch) => batch.batch_id ?? "–", sortValue: (batch) => batch.batch_id },
    severalTables && { id: "table", header: "Table", cell: (batch) => batch.table, sortValue: (batch) => batch.table },
    namedWrites && { id: "write", header: "Write", cell: (batch) => writeLabel(batch.write) },
    {
      id: "state",
      header: "State",
      cell: (batch) => (
        <StatusBadge status={batch.state === "intent" ? "intended" : batch.state} label={STATE_LABELS[batch.state]} />
      ),
      sortValue: (batch) => batch.state,
    },
    {
      id: "rows",
      header: "Rows",
      cell: (batch) => formatCount(batch.rows ?? batch.expected_rows),
      align: "end",
      sortValue: (batch) => batch.rows ?? batch.expected_rows,
    },
    changes && {
      id: "upserts",
      header: "Upserts",
      cell: (batch) => formatCount(batch.upserts ?? null),
      align: "end",
      sortValue: (batch) => batch.upserts ?? null,
    },
    changes && {
      id: "deletes",
      header: "Deletes",
      cell: (batch) => formatCount(batch.deletes ?? null),
      align: "end",
      sortValue: (batch) => batch.deletes ?? null,
    },
    {
      id: "streams",
      header: "Streams",
      cell: (batch) => batch.streams.length,
      align: "end",
      sortValue: (batch) => batch.streams.length,
    },
    {
      id: "commit-took",
      header: "Commit took",
      cell: (batch) => formatDuration(batch.commit_ms),
      align: "end",
      sortValue: (batch) => batch.commit_ms,
    },
    {
      id: "committed-at",
      header: "Committed at",
      cell: (batch) => formatTime(batch.committed_at ?? batch.skipped_at ?? batch.aborted_at),
    },
    { id: "replays", header: "Replays", cell: (batch) => batch.replays, align: "end", sortValue: (batch) => batch.replays },
    {
      id: "mode",
      header: "Mode",
      cell: (batch) => batch.mode,
      cellAttributes: (batch) => ({ title: MODE_NOTES[batch.mode] }),
    },
    {
      id: "note",
      header: "Note",
      cell: batchNote,
      className: "muted",
      cellAttributes: (batch) => ({
        title: batch.dead_letter_table ? `dead-letter table ${batch.dead_letter_table}` : undefined,
      }),
    },
    {
      id: "receipt",
      header: <span className="visually-hidden">Receipt</span>,
      cell: (batch) =>
        batch.state === "committed" && (
          <button
            type="button"
            aria-expanded={open.has(batchKey(batch))}
            aria-controls={receiptId(batch)}
            aria-label={`Receipt of ${batchName(batch)}`}
            onClick={() => toggle(batchKey(batch))}
          >
            Receipt
          </button>
        ),
    },
  ];
  return (
    <section aria-labelledby="batches-title">
      <h2 id="batches-title">Commit history</h2>
      <p className="muted">
        {formatCount(batches.filter((b) => b.state === "committed").length)} committed ·{" "}
        <span data-testid="skipped-duplicates">{formatCount(skipped)}</span> skipped as duplicates (a replayed batch the
        ledger had already committed)
      </p>
      <DataTable
        ref={table}
        label="Commit history"
        testId="batches-table"
        columns={columns}
        rows={batches}
        rowKey={batchKey}
        rowAttributes={(batch) => ({ "data-testid": "batch-row", "data-batch-key": batchKey(batch) })}
        detail={(batch) =>
          open.has(batchKey(batch)) && batch.state === "committed"
            ? { id: receiptId(batch), testId: "batch-receipt", content: <BatchReceipt batch={batch} /> }
            : null
        }
        empty="No batch has been intended yet."
      />
    </section>
  );
}

type ReceiptStream = Batch["streams"][number];

const RECEIPT_STREAM_COLUMNS: Column<ReceiptStream>[] = [
  { id: "stream", header: "Stream", cell: (stream) => stream.stream, className: "mono" },
  { id: "rows", header: "Rows", cell: (stream) => formatCount(stream.rows), align: "end" },
  {
    id: "bytes",
    header: "Bytes",
    cell: (stream) => formatBytes(stream.bytes),
    align: "end",
    cellAttributes: (stream) => ({ title: `${stream.bytes} bytes` }),
  },
];

/** What a committed write's receipt says, as its first commit reported it. */
export function BatchReceipt({ batch }: { batch: Batch }) {
  return (
    <dl className="receipt">
      <dt>Commit time</dt>
      <dd title={batch.commit_time ?? undefined}>
        {batch.commit_time ? (
          formatTime(batch.commit_time)
        ) : (
          <span className="muted">— (not reported)</span>
        )}
      </dd>
      <dt>Streams</dt>
      <dd>
        {batch.streams.length === 0 ? (
          "—"
        ) : (
          <DataTable
            label={`Streams of ${batchName(batch)}`}
            className="receipt-streams"
            columns={RECEIPT_STREAM_COLUMNS}
            rows={batch.streams}
            rowKey={(stream) => stream.stream}
          />
        )}
      </dd>
      <dt>Source offsets</dt>
      <dd>
        {batch.source_offsets ? (
          <div className="mono receipt-offsets">
            {batch.source_offsets.map((offset, i) => (
              <div key={i}>{offset}</div>
            ))}
          </div>
        ) : batch.batch_id === null ? (
          <span className="muted">none (batch write)</span>
        ) : (
          <span className="muted">none (a foreachBatch write, or not reported)</span>
        )}
      </dd>
      <dt>Key checksum</dt>
      <dd className="mono">{keyChecksum(batch.key_checksum)}</dd>
    </dl>
  );
}

/** The checksum as its digits (compared with BigQuery's), or "—". Above 2^53 the
 * browser's JSON parser has rounded it: said so, rather than shown as exact. */
export function keyChecksum(value: number | null): string {
  if (value === null) return "—";
  return Number.isSafeInteger(value) ? String(value) : `≈ ${BigInt(value)} (rounded; read it from the API)`;
}

/** "batch 7 to p.d.orders, write #1": which row a receipt button opens. */
export function batchName(batch: Batch): string {
  const which = `${batch.batch_id === null ? "batch write" : `batch ${batch.batch_id}`} to ${batch.table}`;
  return batch.write === null ? which : `${which}, write ${writeLabel(batch.write)}`;
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
export function writeLabel(write: string | null): string {
  if (write === null) return "–";
  return write.startsWith("id-") ? write.slice(3) : `#${write}`;
}
