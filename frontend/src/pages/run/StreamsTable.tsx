// The write streams the run opened: where each stands (its next offset) and what it met.
import type { Stream } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { codeCountColumn } from "../../components/codeCountColumn";
import { StatusBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
import { STREAM_TYPE_NOTES } from "../../lib/modes";

const STREAM_COLUMNS: Column<Stream>[] = [
  {
    id: "stream",
    header: "Stream",
    cell: (stream) => shortName(stream.name),
    className: "mono",
    cellAttributes: (stream) => ({ title: stream.name }),
  },
  {
    id: "type",
    header: "Type",
    cell: (stream) => stream.stream_type,
    cellAttributes: (stream) => ({ title: STREAM_TYPE_NOTES[stream.stream_type] }),
    sortValue: (stream) => stream.stream_type,
  },
  {
    id: "state",
    header: "State",
    cell: (stream) => <StatusBadge status={stream.state} />,
    sortValue: (stream) => stream.state,
  },
  { id: "batch", header: "Batch", cell: (stream) => stream.batch_id ?? "–", sortValue: (stream) => stream.batch_id },
  {
    id: "next-offset",
    header: "Next offset",
    cell: (stream) => formatCount(stream.next_offset),
    align: "end",
    sortValue: (stream) => stream.next_offset,
  },
  { id: "rows", header: "Rows", cell: (stream) => formatCount(stream.rows), align: "end", sortValue: (stream) => stream.rows },
  {
    id: "appends",
    header: "Appends",
    cell: (stream) => formatCount(stream.appends),
    align: "end",
    sortValue: (stream) => stream.appends,
  },
  codeCountColumn("ALREADY_EXISTS", (stream) => stream.already_exists, { sortValue: (stream) => stream.already_exists }),
  codeCountColumn("OUT_OF_RANGE", (stream) => stream.out_of_range, { sortValue: (stream) => stream.out_of_range }),
  { id: "last-error", header: "Last error", cell: (stream) => stream.last_error ?? "", className: "error" },
  {
    id: "orphan",
    header: "Orphan",
    cell: (stream) => (stream.state === "orphaned" ? <StatusBadge status="pending" label="orphan" /> : ""),
  },
];

export function StreamsTable({ streams }: { streams: Stream[] }) {
  const orphans = streams.filter((s) => s.state === "orphaned").length;
  return (
    <section aria-labelledby="streams-title">
      <h2 id="streams-title">Streams</h2>
      <p className="muted">
        {formatCount(streams.length)} streams; {formatCount(orphans)} orphaned (written by an attempt that died before
        commit, never committed, so their rows never show in the table).
      </p>
      <DataTable
        label="Streams"
        testId="streams-table"
        columns={STREAM_COLUMNS}
        rows={streams}
        rowKey={(stream) => stream.name}
        rowAttributes={() => ({ "data-testid": "stream-row" })}
        empty="No stream has been created yet."
      />
    </section>
  );
}

/** BigQuery stream names are long paths; the last part tells them apart. */
export function shortName(name: string): string {
  const parts = name.split("/");
  return parts.length > 2 ? `…/${parts.slice(-2).join("/")}` : name;
}
