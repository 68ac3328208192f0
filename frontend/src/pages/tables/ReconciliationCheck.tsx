// One whole-table reconciliation: its verdict, the counts compared, and what differs.
import type { ReactNode } from "react";
import { Link } from "react-router";
import type { Reconciliation } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { runPath } from "../../components/links";
import { StatusBadge } from "../../components/ui";
import { formatCount, formatDuration, formatTime } from "../../lib/format";

type RunBreakdown = Reconciliation["runs"][number];
type DuplicateKey = Reconciliation["duplicate_keys"][number];

export function ReconciliationCheck({ check, expanded }: { check: Reconciliation; expanded: boolean }) {
  return (
    <article
      className={`tp-check tp-check-${check.status}`}
      data-testid="reconciliation"
      data-status={check.status}
      aria-label={`Check of ${formatTime(check.checked_at)}: ${check.status}`}
    >
      <header className="tp-check-header">
        <span data-testid="reconciliation-status" data-status={check.status}>
          <StatusBadge status={check.status} />
        </span>
        <time dateTime={check.checked_at} data-testid="reconciliation-checked-at">
          {formatTime(check.checked_at)}
        </time>
        <span className="muted">
          {check.trigger === "api" ? `by ${check.actor}` : "after a run succeeded"} · key{" "}
          {check.key ? <code>{check.key}</code> : "none (rows counted only)"} · took {formatDuration(check.duration_ms)}
        </span>
      </header>
      {check.error && (
        <p className="tp-check-error" role="note" data-testid="reconciliation-error">
          BigQuery could not answer: {check.error}
        </p>
      )}
      <CheckCounts check={check} />
      {check.warnings.length > 0 && (
        <ul className="tp-check-warnings" data-testid="reconciliation-warnings">
          {check.warnings.map((warning) => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
      {check.runs.length > 0 && (
        <details open={expanded}>
          <summary>Per run ({check.runs.length})</summary>
          <DataTable
            label="Per run"
            columns={RUN_BREAKDOWN_COLUMNS}
            rows={check.runs}
            rowKey={(run) => run.run_id ?? "unstamped"}
            rowAttributes={(run) => ({ "data-testid": "reconciliation-run-row", "data-run-id": run.run_id ?? "" })}
          />
        </details>
      )}
      {check.duplicate_keys.length > 0 && (
        <details open={expanded}>
          <summary>
            Duplicated keys ({formatCount(check.duplicate_key_count ?? check.duplicate_keys.length)}
            {check.duplicate_key_count !== null && check.duplicate_key_count > check.duplicate_keys.length
              ? `, the ${check.duplicate_keys.length} with most copies`
              : ""}
            )
          </summary>
          <DataTable
            label="Duplicated keys"
            columns={DUPLICATE_KEY_COLUMNS}
            rows={check.duplicate_keys}
            rowKey={(duplicate) => `${duplicate.key}:${duplicate.run_id ?? ""}:${duplicate.batch_id ?? ""}`}
            rowAttributes={() => ({ "data-testid": "reconciliation-duplicate-key" })}
          />
        </details>
      )}
    </article>
  );
}

/** The counts compared; a count BigQuery did not give (an error, or no key) reads "–". */
function CheckCounts({ check }: { check: Reconciliation }) {
  const counts: Array<[string, number | null, string]> = [
    ["Expected rows", check.expected_rows, "expected-rows"],
    ["Actual rows", check.actual_rows, "actual-rows"],
    ["Distinct keys", check.distinct_keys, "distinct-keys"],
    ["Duplicated keys", check.duplicate_key_count, "duplicate-key-count"],
    ["Duplicate rows", check.duplicate_rows, "duplicate-rows"],
    ["Missing rows", check.missing_rows, "missing-rows"],
    ["Extra rows", check.extra_rows, "extra-rows"],
    ["Rows without key", check.rows_without_key, "rows-without-key"],
  ];
  if (check.rows_set_aside || check.dead_letter_table) {
    counts.push(["Rows set aside", check.rows_set_aside ?? null, "rows-set-aside"]);
    counts.push(["In the dead-letter table", check.rows_in_dead_letter_table ?? null, "rows-in-dead-letter-table"]);
  }
  return (
    <dl className="tp-check-counts">
      {counts.map(([label, value, id]) => (
        <div key={id}>
          <dt>{label}</dt>
          <dd data-testid={`reconciliation-${id}`} className={isProblem(id, value) ? "tp-problem" : undefined}>
            {formatCount(value)}
          </dd>
        </div>
      ))}
    </dl>
  );
}

/** Counts that are wrong whenever non-zero, so they stand out. */
function isProblem(id: string, value: number | null): boolean {
  const wrongIfAny = ["duplicate-key-count", "duplicate-rows", "missing-rows", "extra-rows", "rows-without-key"];
  return wrongIfAny.includes(id) && value !== null && value > 0;
}

/** A run's id linking to its page; the rows no run stamped say so. */
function RunCell({ runId, none }: { runId: string | null | undefined; none: ReactNode }) {
  return runId ? <Link to={runPath(runId)}>{runId}</Link> : <span className="muted">{none}</span>;
}

const RUN_BREAKDOWN_COLUMNS: Column<RunBreakdown>[] = [
  {
    id: "run",
    header: "Run",
    cell: (run) => <RunCell runId={run.run_id} none="rows without a run stamp" />,
    className: "mono",
  },
  { id: "status", header: "Status", cell: (run) => <StatusBadge status={run.status} />, sortValue: (run) => run.status },
  ...countColumns<RunBreakdown>([
    ["expected", "Expected", (run) => run.expected_rows],
    ["actual", "Actual", (run) => run.actual_rows],
    ["distinct-keys", "Distinct keys", (run) => run.distinct_keys],
    ["duplicate-keys", "Duplicated keys", (run) => run.duplicate_keys],
    ["duplicate-rows", "Duplicate rows", (run) => run.duplicate_rows],
  ]),
];

const DUPLICATE_KEY_COLUMNS: Column<DuplicateKey>[] = [
  { id: "key", header: "Key", cell: (duplicate) => duplicate.key, className: "mono" },
  ...countColumns<DuplicateKey>([["copies", "Copies", (duplicate) => duplicate.count]]),
  { id: "run", header: "Run", cell: (duplicate) => <RunCell runId={duplicate.run_id} none="–" />, className: "mono" },
  {
    id: "batch",
    header: "Batch",
    cell: (duplicate) => duplicate.batch_id ?? "–",
    align: "end",
    sortValue: (duplicate) => duplicate.batch_id,
  },
];

/** Right-aligned, sortable counts ("–" for one BigQuery did not give). */
function countColumns<T>(counts: Array<[string, string, (row: T) => number | null | undefined]>): Column<T>[] {
  return counts.map(([id, header, count]) => ({
    id,
    header,
    cell: (row: T) => formatCount(count(row)),
    align: "end",
    sortValue: count,
  }));
}
