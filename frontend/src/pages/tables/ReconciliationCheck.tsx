// One whole-table reconciliation: its verdict, the counts compared, and what differs.
import { Link } from "react-router";
import type { Reconciliation } from "../../api/client";
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
          <RunBreakdownTable runs={check.runs} />
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
          <DuplicateKeyTable keys={check.duplicate_keys} />
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

function RunBreakdownTable({ runs }: { runs: RunBreakdown[] }) {
  return (
    <div className="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Status</th>
            <th scope="col" className="number">Expected</th>
            <th scope="col" className="number">Actual</th>
            <th scope="col" className="number">Distinct keys</th>
            <th scope="col" className="number">Duplicated keys</th>
            <th scope="col" className="number">Duplicate rows</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((run) => (
            <tr key={run.run_id ?? "unstamped"} data-testid="reconciliation-run-row" data-run-id={run.run_id ?? ""}>
              <td className="mono">
                {run.run_id ? (
                  <Link to={`/runs/${encodeURIComponent(run.run_id)}`}>{run.run_id}</Link>
                ) : (
                  <span className="muted">rows without a run stamp</span>
                )}
              </td>
              <td>
                <StatusBadge status={run.status} />
              </td>
              <td className="number">{formatCount(run.expected_rows)}</td>
              <td className="number">{formatCount(run.actual_rows)}</td>
              <td className="number">{formatCount(run.distinct_keys)}</td>
              <td className="number">{formatCount(run.duplicate_keys)}</td>
              <td className="number">{formatCount(run.duplicate_rows)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function DuplicateKeyTable({ keys }: { keys: DuplicateKey[] }) {
  return (
    <div className="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col" className="number">Copies</th>
            <th scope="col">Run</th>
            <th scope="col" className="number">Batch</th>
          </tr>
        </thead>
        <tbody>
          {keys.map((duplicate) => (
            <tr key={`${duplicate.key}:${duplicate.run_id ?? ""}:${duplicate.batch_id ?? ""}`} data-testid="reconciliation-duplicate-key">
              <td className="mono">{duplicate.key}</td>
              <td className="number">{formatCount(duplicate.count)}</td>
              <td className="mono">
                {duplicate.run_id ? (
                  <Link to={`/runs/${encodeURIComponent(duplicate.run_id)}`}>{duplicate.run_id}</Link>
                ) : (
                  <span className="muted">–</span>
                )}
              </td>
              <td className="number">{duplicate.batch_id ?? "–"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
