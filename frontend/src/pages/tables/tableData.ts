// What the Tables views derive from the API's answers; pure, so tests need no backend.
import type { Reconciliation } from "../../api/client";

/** Problems first, so a failed or stalled run is the first thing read in a busy row. */
const STATUS_ORDER = ["failed", "stalled", "resuming", "running", "succeeded"];

/** The per-status run counts, non-zero only, in reading order: [["failed", 1], ["succeeded", 4]]. */
export function runStatusCounts(byStatus: Record<string, number>): Array<[string, number]> {
  const rank = (status: string) => {
    const at = STATUS_ORDER.indexOf(status);
    return at === -1 ? STATUS_ORDER.length : at;
  };
  return Object.entries(byStatus)
    .filter(([, runs]) => runs > 0)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

/**
 * The checks to show, newest first: ones just run here (whose answer came back before
 * the history was re-read) together with the history, each check once.
 */
export function mergeChecks(justRun: Reconciliation[], history: Reconciliation[]): Reconciliation[] {
  const byId = new Map<number, Reconciliation>();
  for (const check of [...history, ...justRun]) byId.set(check.id, check);
  return [...byId.values()].sort((a, b) => b.id - a.id);
}

/** The key column a table check would compare: a valid column name, or none (count rows only). */
export const KEY_COLUMN_RE = /^[A-Za-z_][A-Za-z0-9_]{0,299}$/;

export function keyColumnProblem(key: string): string | null {
  const trimmed = key.trim();
  if (trimmed === "" || KEY_COLUMN_RE.test(trimmed)) return null;
  return "A key column is a letter or _ followed by letters, digits or _.";
}
