// Rows BigQuery refused (a value too long for STRING(n), out of a NUMERIC's range, a NULL
// in a REQUIRED column) and the sink set aside in a dead-letter table: what a count of
// them means, as the run and table pages show it on hover.
import { formatCount } from "./format";

export type SetAside = {
  rows_dead_lettered: number;
  rejected_requests: number;
  dead_letter_table?: string | null;
};

/** The hover note of a "rows set aside" figure. */
export function deadLetterNote(totals: SetAside): string {
  const where = totals.dead_letter_table ? ` in ${totals.dead_letter_table}` : " in a dead-letter table";
  const rows = `${formatCount(totals.rows_dead_lettered)} row(s) BigQuery refused, set aside${where} exactly once by the committed batches (not in rows committed; the rest of each batch was loaded)`;
  if (totals.rejected_requests === 0) return `${rows}.`;
  return `${rows}. ${formatCount(totals.rejected_requests)} refused request(s) reported by the tasks (a retried task reports its rows again).`;
}
