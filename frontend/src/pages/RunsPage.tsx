// Runs: every run of every job, newest first, filtered by what the URL says, updated
// live as runs start, commit and end.
import { useState, type FormEvent } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";
import { api, type Run } from "../api/client";
import { Pager } from "../components/Pager";
import { TimeRangePicker } from "../components/TimeRangePicker";
import { Empty, QueryState, StatusBadge, TableId } from "../components/ui";
import { durationBetween, formatCount, formatDuration, formatTime } from "../lib/format";
import { useLiveReload } from "../lib/live";
import { modeNote } from "../lib/modes";
import { pageFromParams } from "../lib/paging";
import { rangeFromParams } from "../lib/timeRange";
import { useQuery } from "../lib/useQuery";

const PAGE = 50;
const STATUSES = ["running", "resuming", "succeeded", "failed", "stalled"] as const;
type Status = (typeof STATUSES)[number];

function TextFilters() {
  const [params, setParams] = useSearchParams();
  const [job, setJob] = useState(params.get("job") ?? "");
  const [table, setTable] = useState(params.get("table") ?? "");
  const apply = (event: FormEvent) => {
    event.preventDefault();
    const next = new URLSearchParams(params);
    for (const [name, value] of [["job", job], ["table", table]] as const) {
      if (value.trim()) next.set(name, value.trim());
      else next.delete(name);
    }
    next.delete("offset");
    setParams(next);
  };
  return (
    <form className="filters" onSubmit={apply} aria-label="Filter runs">
      <label>
        Job <input value={job} onChange={(e) => setJob(e.target.value)} placeholder="any job" size={14} />
      </label>
      <label>
        Table{" "}
        <input value={table} onChange={(e) => setTable(e.target.value)} placeholder="project.dataset.table" size={26} />
      </label>
      <button type="submit">Apply</button>
    </form>
  );
}

function StatusFilter() {
  const [params, setParams] = useSearchParams();
  return (
    <label>
      Status{" "}
      <select
        value={params.get("status") ?? ""}
        onChange={(event) => {
          const next = new URLSearchParams(params);
          if (event.target.value) next.set("status", event.target.value);
          else next.delete("status");
          next.delete("offset");
          setParams(next);
        }}
      >
        <option value="">any</option>
        {STATUSES.map((status) => (
          <option key={status} value={status}>
            {status}
          </option>
        ))}
      </select>
    </label>
  );
}

export function Verdict({ run }: { run: Run }) {
  if (!run.reconciliation) return <span className="muted">not checked</span>;
  return (
    <span title={`checked ${formatTime(run.reconciliation.checked_at)}`}>
      <StatusBadge status={run.reconciliation.status} />
    </span>
  );
}

function RunRow({ run }: { run: Run }) {
  const navigate = useNavigate();
  const to = `/runs/${encodeURIComponent(run.run_id)}`;
  return (
    <tr className="clickable" data-testid="run-row" data-run-id={run.run_id} onClick={() => navigate(to)}>
      <td>
        <StatusBadge status={run.status} />
      </td>
      <td className="mono nowrap">
        <Link to={to} onClick={(event) => event.stopPropagation()}>
          {run.run_id}
        </Link>
      </td>
      <td>{run.job ?? <span className="muted">–</span>}</td>
      <td>
        <TableId id={run.table} />
      </td>
      <td title={modeNote(run.mode)}>{run.mode ?? "–"}</td>
      <td className="nowrap">{formatTime(run.started_at)}</td>
      <td className="number nowrap">
        {formatDuration(durationBetween(run.started_at, run.finished_at ?? run.last_event_at))}
      </td>
      <td className="number" data-testid="run-rows-committed">
        {formatCount(run.rows_committed)}
      </td>
      <td className="number">{formatCount(run.already_exists)}</td>
      <td className="number">{formatCount(run.out_of_range)}</td>
      <td data-testid="run-verdict">
        <Verdict run={run} />
      </td>
    </tr>
  );
}

export function RunsPage() {
  const [params] = useSearchParams();
  const range = rangeFromParams(params);
  const status = params.get("status") as Status | null;
  const page = pageFromParams(params, PAGE, 500);
  const query = {
    status: status ? [status] : undefined,
    job: params.get("job") ?? undefined,
    table: params.get("table") ?? undefined,
    since: range.since,
    until: range.until,
    limit: page.limit,
    offset: page.offset,
  };
  // A preset range ("last hour") moves with the clock: key on the preset, not on `since`.
  const key = params.toString();
  const runs = useQuery(() => api.GET("/api/runs", { params: { query } }), key);
  useLiveReload(runs.reload);

  return (
    <>
      <div className="page-header">
        <h1>Runs</h1>
        <div className="filters">
          <StatusFilter />
          <TimeRangePicker />
        </div>
      </div>
      <TextFilters />
      <section aria-label="Runs">
        <QueryState query={runs} what="runs">
          {(runsPage) =>
            runsPage.data.length === 0 ? (
              <Empty>
                {params.size
                  ? "No run matches these filters."
                  : "No runs yet. Start a job with the onceover sink and it appears here as it runs."}
              </Empty>
            ) : (
              <>
                <div className="table-wrap">
                  <table data-testid="runs-table">
                    <thead>
                      <tr>
                        <th scope="col">Status</th>
                        <th scope="col">Run</th>
                        <th scope="col">Job</th>
                        <th scope="col">Table</th>
                        <th scope="col">Mode</th>
                        <th scope="col">Started</th>
                        <th scope="col" className="number">
                          Duration
                        </th>
                        <th scope="col" className="number">
                          Rows committed
                        </th>
                        <th scope="col" className="number code" title="append requests answered ALREADY_EXISTS">
                          ALREADY_<wbr />EXISTS
                        </th>
                        <th scope="col" className="number code" title="append requests answered OUT_OF_RANGE">
                          OUT_OF_<wbr />RANGE
                        </th>
                        <th scope="col" title="the latest reconciliation against BigQuery">
                          Verdict
                        </th>
                      </tr>
                    </thead>
                    <tbody>
                      {runsPage.data.map((run) => (
                        <RunRow key={run.run_id} run={run} />
                      ))}
                    </tbody>
                  </table>
                </div>
                <Pager page={page} shown={runsPage.data.length} count={runsPage.count} label="Runs" />
              </>
            )
          }
        </QueryState>
      </section>
    </>
  );
}
