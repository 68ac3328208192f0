// The write streams the run opened: where each stands (its next offset) and what it met.
import type { Stream } from "../../api/client";
import { Empty, StatusBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
import { STREAM_TYPE_NOTES } from "../../lib/modes";

export function StreamsTable({ streams }: { streams: Stream[] }) {
  const orphans = streams.filter((s) => s.state === "orphaned").length;
  return (
    <section aria-labelledby="streams-title">
      <h2 id="streams-title">Streams</h2>
      <p className="muted">
        {formatCount(streams.length)} streams; {formatCount(orphans)} orphaned (written by an attempt that died before
        commit, never committed, so their rows never show in the table).
      </p>
      {streams.length === 0 ? (
        <Empty>No stream has been created yet.</Empty>
      ) : (
        <div className="table-wrap">
          <table data-testid="streams-table">
            <thead>
              <tr>
                <th scope="col">Stream</th>
                <th scope="col">Type</th>
                <th scope="col">State</th>
                <th scope="col">Batch</th>
                <th scope="col" className="number">
                  Next offset
                </th>
                <th scope="col" className="number">
                  Rows
                </th>
                <th scope="col" className="number">
                  Appends
                </th>
                <th scope="col" className="number code">ALREADY_<wbr />EXISTS
                </th>
                <th scope="col" className="number code">OUT_OF_<wbr />RANGE
                </th>
                <th scope="col">Last error</th>
                <th scope="col">Orphan</th>
              </tr>
            </thead>
            <tbody>
              {streams.map((stream) => (
                <tr key={stream.name} data-testid="stream-row">
                  <td className="mono" title={stream.name}>
                    {shortName(stream.name)}
                  </td>
                  <td title={STREAM_TYPE_NOTES[stream.stream_type]}>{stream.stream_type}</td>
                  <td>
                    <StatusBadge status={stream.state} />
                  </td>
                  <td>{stream.batch_id ?? "–"}</td>
                  <td className="number">{formatCount(stream.next_offset)}</td>
                  <td className="number">{formatCount(stream.rows)}</td>
                  <td className="number">{formatCount(stream.appends)}</td>
                  <td className="number">{formatCount(stream.already_exists)}</td>
                  <td className="number">{formatCount(stream.out_of_range)}</td>
                  <td className="error">{stream.last_error ?? ""}</td>
                  <td>{stream.state === "orphaned" ? <StatusBadge status="pending" label="orphan" /> : ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** BigQuery stream names are long paths; the last part tells them apart. */
export function shortName(name: string): string {
  const parts = name.split("/");
  return parts.length > 2 ? `…/${parts.slice(-2).join("/")}` : name;
}
