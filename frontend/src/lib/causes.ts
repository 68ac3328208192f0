// A failed run's cause, as the run page's headline and the overview's "Why" name it.
import type { components } from "../api/schema";

export type RunCause = components["schemas"]["RunCausePublic"];

/** Each kind of cause in a word or two, for its badge (the headline says the rest). */
export const CAUSE_LABELS: Record<RunCause["kind"], string> = {
  driver_died: "driver died",
  task_failed: "task failed",
  refused: "refused",
  commit_refused: "commit refused",
  bad_option: "bad option",
  error: "error",
};

/** "batch 3", "the batch write", or nothing when the run reported no batch. */
export function causeBatch(cause: RunCause): string | null {
  if (cause.batch === null) return null;
  return cause.batch === "write" ? "the batch write" : `batch ${cause.batch}`;
}
