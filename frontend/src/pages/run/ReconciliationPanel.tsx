// Expected rows (what the ledger committed) against what BigQuery holds, for this run:
// one verdict per table the run wrote (a detail table and its summary are checked apart).
// A stamped run checked by receipt names, per differing batch, the keys duplicated,
// missing (INT64 keys by value, STRING keys by hash) or unexpected, and the key-hash
// buckets no single key explains.
import type { Reconciliation } from "../../api/client";
import type { components } from "../../api/schema";
import { DataTable, type Column } from "../../components/DataTable";
import { Empty, ErrorNote, Stat, StatusBadge } from "../../components/ui";
import { formatCount, formatDuration, formatTime } from "../../lib/format";

type BatchCheck = components["schemas"]["BatchReconciliationPublic"];
type ReceiptKey = components["schemas"]["ReceiptKeyPublic"];

/** A key as the panel shows it: its value, or its hash when only that is known. */
function keyText(key: ReceiptKey): string {
  return key.key ?? `md5 ${key.key_hash}…`;
}

function KeyList({ keys, copies, testId }: { keys: ReceiptKey[] | undefined; copies?: boolean; testId: string }) {
  if (!keys || keys.length === 0) return <span className="muted">–</span>;
  return (
    <ul data-testid={testId}>
      {keys.map((key) => (
        <li key={key.key_hash} className="mono" title={`MD5 prefix ${key.key_hash}`}>
          {keyText(key)}
          {copies ? ` ×${key.copies}` : ""}
        </li>
      ))}
    </ul>
  );
}

function Unresolved({ batch }: { batch: BatchCheck }) {
  const buckets = batch.unresolved_buckets ?? [];
  if (buckets.length === 0) return <span className="muted">–</span>;
  return (
    <ul data-testid="unresolved-buckets">
      {buckets.map((bucket) => (
        <li key={String(bucket.bucket)}>
          {bucket.bucket === null ? "NULL keys" : `bucket ${bucket.bucket}`}: expected {formatCount(bucket.expected_rows)},
          found {formatCount(bucket.actual_rows)}
        </li>
      ))}
    </ul>
  );
}

type DuplicateKey = Reconciliation["duplicate_keys"][number];

const DUPLICATE_KEY_COLUMNS: Column<DuplicateKey>[] = [
  { id: "key", header: "Key", cell: (dup) => dup.key, className: "mono" },
  { id: "copies", header: "Copies", cell: (dup) => dup.count, align: "end", sortValue: (dup) => dup.count },
  { id: "batch", header: "Batch", cell: (dup) => dup.batch_id ?? "–", sortValue: (dup) => dup.batch_id },
];

/** A check by receipt names the keys behind each difference; a check by counts cannot. */
function batchDifferenceColumns(byReceipt: boolean): Array<Column<BatchCheck> | false> {
  return [
    { id: "batch", header: "Batch", cell: (batch) => batch.batch_id ?? "–", sortValue: (batch) => batch.batch_id },
    {
      id: "expected",
      header: "Expected",
      cell: (batch) => formatCount(batch.expected_rows),
      align: "end",
      sortValue: (batch) => batch.expected_rows,
    },
    {
      id: "found",
      header: "Found",
      cell: (batch) => formatCount(batch.actual_rows),
      align: "end",
      sortValue: (batch) => batch.actual_rows,
    },
    {
      id: "duplicate-rows",
      header: "Duplicate rows",
      cell: (batch) => formatCount(batch.duplicate_rows),
      align: "end",
      sortValue: (batch) => batch.duplicate_rows,
    },
    byReceipt && {
      id: "keys-duplicated",
      header: "Duplicated keys",
      cell: (batch) => <KeyList keys={batch.keys_duplicated} copies testId="keys-duplicated" />,
    },
    byReceipt && {
      id: "keys-missing",
      header: "Missing keys",
      cell: (batch) => <KeyList keys={batch.keys_missing} testId="keys-missing" />,
    },
    byReceipt && {
      id: "keys-unexpected",
      header: "Unexpected keys",
      cell: (batch) => <KeyList keys={batch.keys_unexpected} testId="keys-unexpected" />,
    },
    byReceipt && { id: "unresolved", header: "Unresolved", cell: (batch) => <Unresolved batch={batch} /> },
    { id: "verdict", header: "Verdict", cell: (batch) => <StatusBadge status={batch.status ?? "error"} /> },
  ];
}

export function ReconciliationPanel({
  latest,
  history,
  action,
}: {
  latest: Reconciliation | undefined;
  history: Reconciliation[];
  action?: React.ReactNode;
}) {
  const severalTables = new Set(history.map((check) => check.table)).size > 1;
  return (
    <section aria-labelledby="reconciliation-title" data-testid="reconciliation-panel">
      <div className="page-header">
        <h2 id="reconciliation-title">Reconciliation</h2>
        {action}
      </div>
      {latest === undefined ? (
        <Empty>Not checked yet. A run is checked when it succeeds.</Empty>
      ) : (
        <Verdicts latest={latest} history={history} />
      )}
      {history.length > 1 && (
        <details>
          <summary>Earlier checks ({history.length - 1})</summary>
          <ul>
            {history.slice(1).map((check) => (
              <li key={check.id}>
                <StatusBadge status={check.status} /> {severalTables ? `${check.table}, ` : ""}
                {formatTime(check.checked_at)} by {check.actor} ({check.trigger}):
                expected {formatCount(check.expected_rows)}, found {formatCount(check.actual_rows)}
              </li>
            ))}
          </ul>
        </details>
      )}
    </section>
  );
}

/** Whether a check has rows set aside or a dead-letter table to show. */
export function hasDeadLetters(check: Reconciliation): boolean {
  return Boolean(check.rows_set_aside) || Boolean(check.dead_letter_table);
}

/** The newest check of each table, newest table first; a heading per table only when
 * the run's checks name more than one. */
export function latestPerTable(history: Reconciliation[]): Reconciliation[] {
  const seen = new Map<string, Reconciliation>();
  for (const check of history) if (!seen.has(check.table)) seen.set(check.table, check);
  return [...seen.values()];
}

function Verdicts({ latest, history }: { latest: Reconciliation; history: Reconciliation[] }) {
  const perTable = latestPerTable(history.length > 0 ? history : [latest]);
  if (perTable.length === 1) return <Verdict check={perTable[0]} />;
  return (
    <>
      {perTable.map((check) => (
        <section key={check.table} data-testid="reconciliation-table">
          <h3 className="mono">{check.table}</h3>
          <Verdict check={check} />
        </section>
      ))}
    </>
  );
}

function Verdict({ check }: { check: Reconciliation }) {
  const batches = check.batches.filter((b) => b.status !== "ok");
  const byReceipt = check.method === "receipts";
  return (
    <>
      <p>
        <span data-testid="reconciliation-status">
          <StatusBadge status={check.status} />
        </span>{" "}
        <span className="muted">
          checked {formatTime(check.checked_at)} by {check.actor} ({check.trigger}), took {formatDuration(check.duration_ms)}
          {check.key ? `, key ${check.key}` : ""}
          {check.method ? `, by ${check.method}` : ""}
          {check.queries != null && (
            <span data-testid="reconciliation-queries">
              , {check.queries} {check.queries === 1 ? "query" : "queries"}
            </span>
          )}
        </span>
      </p>
      {check.overwrite && (
        <p className="muted" data-testid="reconciliation-overwrite-scope">
          The run overwrote the table: counted{" "}
          {check.replaced_partitions
            ? `the partitions it replaced (${check.replaced_partitions.join(", ")})`
            : "the whole table, which it replaced"}
          , against the rows it staged.
        </p>
      )}
      {check.method === "changes" && (
        <p className="muted" data-testid="reconciliation-by-key">
          A change data capture table: its rows are changes BigQuery applied by the primary key, so it is checked key by
          key (each key held once), not against a row count
          {check.compared_with ? `, and against the source's state in ${check.compared_with}` : ""}.
        </p>
      )}
      {check.error && <ErrorNote message={check.error} />}
      <dl className="stats">
        <Stat label="Expected rows" value={formatCount(check.expected_rows)} testId="reconciliation-expected" />
        <Stat label="Rows in BigQuery" value={formatCount(check.actual_rows)} testId="reconciliation-actual" />
        <Stat label="Distinct keys" value={formatCount(check.distinct_keys)} testId="reconciliation-distinct" />
        <Stat label="Duplicate rows" value={formatCount(check.duplicate_rows)} testId="reconciliation-duplicates" />
        <Stat label="Missing rows" value={formatCount(check.missing_rows)} testId="reconciliation-missing" />
        <Stat label="Extra rows" value={formatCount(check.extra_rows)} testId="reconciliation-extra" />
        {check.keys_differing != null && (
          <Stat
            label="Keys differing"
            value={formatCount(check.keys_differing)}
            testId="reconciliation-keys-differing"
            note="keys whose row differs from the source's (an older version kept)"
          />
        )}
        {hasDeadLetters(check) && (
          <>
            <Stat
              label="Rows set aside"
              value={formatCount(check.rows_set_aside)}
              testId="reconciliation-set-aside"
              note="rows BigQuery refused that the committed batches set aside: expected, never missing (not in expected rows)"
            />
            <Stat
              label="In the dead-letter table"
              value={formatCount(check.rows_in_dead_letter_table)}
              testId="reconciliation-dead-letter-rows"
              note={check.dead_letter_table ? `the run's rows in ${check.dead_letter_table} (run_id = the run)` : undefined}
            />
          </>
        )}
      </dl>
      {check.warnings.length > 0 && (
        <ul className="muted">
          {check.warnings.map((warning) => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
      {check.duplicate_keys.length > 0 && (
        <>
          <h3>Duplicated keys (samples of {formatCount(check.duplicate_key_count)})</h3>
          <DataTable
            label="Duplicated keys"
            testId="duplicate-keys"
            columns={DUPLICATE_KEY_COLUMNS}
            rows={check.duplicate_keys}
            rowKey={(dup) => `${dup.key}/${dup.batch_id}`}
          />
        </>
      )}
      {batches.length > 0 && (
        <>
          <h3>Batches that differ</h3>
          <DataTable
            label="Batches that differ"
            testId="batch-differences"
            columns={batchDifferenceColumns(byReceipt)}
            rows={batches}
            rowKey={(batch) => String(batch.batch_id)}
            rowAttributes={(batch) => ({ "data-testid": "batch-difference", "data-batch-id": batch.batch_id ?? "write" })}
          />
        </>
      )}
    </>
  );
}
