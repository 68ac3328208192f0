// Runs: every run of every job, newest first, filtered by what the URL says, updated
// live as runs start, commit and end. A row opens its run (click, or Tab to it and Enter).
import { useState, type FormEvent } from "react";
import { Link, useSearchParams } from "react-router";
import { api, type Run } from "../api/client";
import { codeCountColumn } from "../components/codeCountColumn";
import { DataTable, type Column } from "../components/DataTable";
import { runPath } from "../components/links";
import { Pager } from "../components/Pager";
import { TimeRangePicker } from "../components/TimeRangePicker";
import { QueryState, StatusBadge, TableId } from "../components/ui";
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

const RUN_COLUMNS: Column<Run>[] = [
  { id: "status", header: "Status", cell: (run) => <StatusBadge status={run.status} /> },
  {
    id: "run",
    header: "Run",
    cell: (run) => <Link to={runPath(run.run_id)}>{run.run_id}</Link>,
    className: "mono nowrap",
  },
  { id: "job", header: "Job", cell: (run) => run.job ?? <span className="muted">–</span> },
  { id: "table", header: "Table", cell: (run) => <TableId id={run.table} /> },
  {
    id: "mode",
    header: "Mode",
    cell: (run) => run.mode ?? "–",
    cellAttributes: (run) => ({ title: modeNote(run.mode) }),
  },
  // The time may go under the date: at 1280 px the table then fits its panel.
  { id: "started", header: "Started", cell: (run) => formatTime(run.started_at) },
  {
    id: "duration",
    header: "Duration",
    cell: (run) => formatDuration(durationBetween(run.started_at, run.finished_at ?? run.last_event_at)),
    align: "end",
    className: "nowrap",
  },
  {
    id: "rows-committed",
    header: "Rows committed",
    cell: (run) => formatCount(run.rows_committed),
    align: "end",
    cellAttributes: () => ({ "data-testid": "run-rows-committed" }),
  },
  codeCountColumn("ALREADY_EXISTS", (run) => run.already_exists, {
    headerTitle: "append requests answered ALREADY_EXISTS",
  }),
  codeCountColumn("OUT_OF_RANGE", (run) => run.out_of_range, {
    headerTitle: "append requests answered OUT_OF_RANGE",
  }),
  {
    id: "verdict",
    header: "Verdict",
    headerTitle: "the latest reconciliation against BigQuery",
    cell: (run) => <Verdict run={run} />,
    cellAttributes: () => ({ "data-testid": "run-verdict" }),
  },
];

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
          {(runsPage) => (
            <>
              <DataTable
                label="Runs"
                testId="runs-table"
                columns={RUN_COLUMNS}
                rows={runsPage.data}
                rowKey={(run) => run.run_id}
                rowLink={(run) => runPath(run.run_id)}
                rowAttributes={(run) => ({ "data-testid": "run-row", "data-run-id": run.run_id })}
                empty={
                  params.size
                    ? "No run matches these filters."
                    : "No runs yet. Start a job with the onceover sink and it appears here as it runs."
                }
              />
              {runsPage.data.length > 0 && (
                <Pager page={page} shown={runsPage.data.length} count={runsPage.count} label="Runs" />
              )}
            </>
          )}
        </QueryState>
      </section>
    </>
  );
}
