// A mode("overwrite") write of this run: what its swap replaced (rows, scope, the
// partitions by BigQuery's ids), the job that did it, and how far it got — where it
// stopped, for a run that did not finish. Shown only for a run that overwrote.
import type { Batch, RunDetail } from "../../api/client";
import { Stat, StatusBadge } from "../../components/ui";
import { formatCount, formatTime } from "../../lib/format";

type Overwrite = NonNullable<Batch["overwrite"]>;
type Step = Overwrite["step"];

// Each step, and what the table holds there.
const STEPS: Record<Step, { label: string; note: string }> = {
  staging: {
    label: "Staging",
    note: "its rows are on their way to the staging table; the table holds its old rows",
  },
  staged: {
    label: "Staged",
    note: "its rows are committed to the staging table and no swap was heard of; the table holds its old rows",
  },
  swap_asked: {
    label: "Swap asked for",
    note: "the swap's job was recorded and asked for, and not heard done; it runs once or not at all, so the table holds the old rows or the new, never both",
  },
  swapped: { label: "Swapped", note: "the table's rows in the scope were replaced" },
};
const LIVE = new Set(["running", "resuming"]);

function partitionsText(overwrite: Overwrite): string {
  if (overwrite.partitions === null) return overwrite.scope === null ? "–" : "the whole table";
  const shown = overwrite.partitions.join(", ");
  const more = (overwrite.partition_count ?? 0) - overwrite.partitions.length;
  return more > 0 ? `${shown} and ${formatCount(more)} more` : shown || "none";
}

function OverwriteOf({ batch, live }: { batch: Batch; live: boolean }) {
  const overwrite = batch.overwrite as Overwrite;
  const step = STEPS[overwrite.step];
  const stopped = !live && overwrite.step !== "swapped";
  return (
    <div data-testid="overwrite" data-step={overwrite.step}>
      <p>
        <span className="mono">{batch.table}</span>
        {batch.write !== null && <span className="muted"> write {batch.write}</span>}
        {batch.batch_id !== null && <span className="muted"> batch {batch.batch_id}</span>}:{" "}
        {stopped ? "stopped at " : ""}
        <span data-testid="overwrite-step">
          <StatusBadge status={overwrite.step} label={step.label} />
        </span>{" "}
        <span className="muted">— {step.note}.</span>
      </p>
      <dl className="stats">
        <Stat
          label="Rows replaced"
          value={formatCount(overwrite.rows_replaced)}
          testId="overwrite-rows-replaced"
          note="the table's rows in the scope, counted as the swap's first attempt began"
        />
        <Stat
          label="Rows inserted"
          value={formatCount(overwrite.rows_inserted)}
          testId="overwrite-rows-inserted"
          note="every row staged"
        />
        <Stat label="Scope" value={overwrite.scope ?? "–"} testId="overwrite-scope" />
        <Stat
          label={`Partitions touched${overwrite.partition_count !== null ? ` (${formatCount(overwrite.partition_count)})` : ""}`}
          value={<span className="mono">{partitionsText(overwrite)}</span>}
          testId="overwrite-partitions"
        />
        <Stat
          label="Swap job"
          value={<span className="mono">{overwrite.job_id ?? "–"}</span>}
          testId="overwrite-job"
          note={overwrite.attempt ? `attempt ${overwrite.attempt}: the earlier jobs failed and rolled back` : undefined}
        />
        <Stat label="Swapped at" value={formatTime(overwrite.swapped_at)} testId="overwrite-swapped-at" />
      </dl>
      {overwrite.staging_table && (
        <p className="muted">
          Staged in <span className="mono">{overwrite.staging_table}</span> (dropped once swapped).
        </p>
      )}
    </div>
  );
}

export function OverwritePanel({ run }: { run: RunDetail }) {
  const overwrites = run.batches.filter((batch) => batch.overwrite);
  if (overwrites.length === 0) return null;
  const live = LIVE.has(run.status);
  return (
    <section aria-labelledby="overwrite-title" data-testid="overwrite-panel">
      <h2 id="overwrite-title">Overwrite</h2>
      {overwrites.map((batch) => (
        <OverwriteOf key={`${batch.table}/${batch.query_id}/${batch.batch_id ?? "-"}/${batch.write ?? ""}`} batch={batch} live={live} />
      ))}
    </section>
  );
}
