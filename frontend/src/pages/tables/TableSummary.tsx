// A table's totals over every run into it, on its own page.
import type { TableTotals } from "../../api/client";
import { FigureCount, Freshness, VerdictLink } from "../../components/TableFigures";
import { Stat } from "../../components/ui";
import { deadLetterNote } from "../../lib/deadLetters";
import { formatCount, formatTime } from "../../lib/format";
import { RunsByStatus } from "./TableCells";

export function TableSummary({ totals }: { totals: TableTotals }) {
  const { figures } = totals;
  const now = new Date().toISOString();
  return (
    <dl className="stats" data-testid="table-totals">
      <Stat label="Freshness" value={<Freshness figures={figures} now={now} />} />
      <Stat label="Rows today" value={<FigureCount figure="rows-today" count={figures.rows_committed_today} />} />
      <Stat
        label={"ALREADY_EXISTS 24\u00a0h"}
        value={<FigureCount figure="already-exists" count={figures.already_exists} />}
      />
      <Stat label={"OUT_OF_RANGE 24\u00a0h"} value={<FigureCount figure="out-of-range" count={figures.out_of_range} />} />
      <Stat label="Latest check" value={<VerdictLink verdict={figures.reconciliation} now={now} />} />
      <Stat
        label="Runs"
        testId="table-runs"
        value={
          <>
            {formatCount(totals.runs)} <RunsByStatus byStatus={totals.runs_by_status} />
          </>
        }
      />
      <Stat label="Rows, every run" testId="table-rows-committed" value={formatCount(totals.rows_committed)} />
      <Stat label="Batches committed" testId="table-batches" value={formatCount(totals.batches_committed)} />
      <Stat label="ALREADY_EXISTS, every run" testId="table-already-exists" value={formatCount(totals.already_exists)} />
      <Stat label="OUT_OF_RANGE, every run" testId="table-out-of-range" value={formatCount(totals.out_of_range)} />
      <Stat
        label="Rows set aside"
        testId="table-rows-dead-lettered"
        value={formatCount(totals.rows_dead_lettered)}
        note={deadLetterNote(totals)}
      />
      <Stat label="First loaded" testId="table-first-loaded" value={formatTime(totals.first_started_at)} />
      <Stat label="Last loaded" testId="table-last-loaded" value={formatTime(totals.last_started_at)} />
      <Stat label="Key column" testId="table-key-column" value={totals.key_column ?? "none"} />
    </dl>
  );
}
