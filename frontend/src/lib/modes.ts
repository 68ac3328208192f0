// What each write mode of the sink (and the stream type it writes on) means for when rows
// show up in the table: shown as the title of a mode or type. Keyed by the API's own
// types, so a mode the backend learns fails to compile here until it is described.
import type { Batch, Stream } from "../api/client";

export type Mode = Batch["mode"];
export type StreamType = Stream["stream_type"];

export const MODE_NOTES: Record<Mode, string> = {
  pending: "exactly once: PENDING streams, rows visible at the batch's commit, all at once",
  buffered: "exactly once: BUFFERED streams, rows visible when the driver flushes them at the batch's commit",
  committed: "exactly once: COMMITTED streams, rows visible as appended",
  default: "at least once: the _default stream, rows visible as appended",
};

export const STREAM_TYPE_NOTES: Record<StreamType, string> = {
  PENDING: "rows visible once the batch commits the stream (BatchCommitWriteStreams)",
  BUFFERED: "rows visible up to where the driver flushed the stream (FlushRows)",
  COMMITTED: "rows visible as soon as each append is acknowledged",
  DEFAULT: "the table's _default stream: rows visible as appended, at least once",
};

/** The note of a mode, or none for a run whose mode no event has named yet. */
export function modeNote(mode: Mode | null): string | undefined {
  return mode === null ? undefined : MODE_NOTES[mode];
}
