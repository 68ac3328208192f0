"""Asks BigQuery about the batches a run's ledger holds as intended but not committed,
so the dry-run plan can say which BigQuery already holds ("committed in BigQuery, not in
the checkpoint", with BigQuery's commit time as proof) and what a resume will do with
each. The resumed job settles them the same way (onceover_jobs.sink.committer); this
only reads.

What BigQuery can tell depends on how the batch's mode settles an intent
(:attr:`onceover.modes.ModeTraits.settle`):

- ``commit_time`` (``pending``): each stream's ``commit_time`` (``GetWriteStream``). All
  set: committed, the resume records it and skips it. None set: not committed, the
  resume commits the streams (or writes the batch again if BigQuery no longer knows them
  and no commit was ever asked for). Some set: impossible for one
  ``BatchCommitWriteStreams``; a person must look.
- ``flush_again`` (``buffered``): BigQuery does not say how far a stream was flushed;
  the resume flushes each stream to the batch's end again (a flush to an offset already
  flushed changes nothing).
- ``as_appended`` (``committed`` and ``default``): rows were visible as they were
  appended; the resume records the batch.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

from onceover.bigquery import BigQueryConfig, write_client
from onceover.ledger_files import BatchRecord
from onceover.modes import traits_of

logger = logging.getLogger(__name__)

InBigQuery = Literal["committed", "not_committed", "streams_gone", "partly", "unknown"]
CALL_TIMEOUT_S = 5.0
"""Per ``GetWriteStream``: a plan answers in seconds even when BigQuery does not."""


@dataclass(frozen=True)
class IntentFinding:
    in_bigquery: InBigQuery
    commit_time: str | None
    """BigQuery's commit time: the proof that it holds the batch."""
    resume_will: str


class IntentChecker:
    """Reads the streams of intended batches from BigQuery (clients built on first use,
    so a backend without credentials still plans, saying BigQuery could not be asked)."""

    def __init__(self, config: BigQueryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._client: Any = None

    def _write_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = write_client(self.config)
            return self._client

    def check(self, record: BatchRecord) -> IntentFinding:
        try:
            settle = traits_of(record.mode).settle
        except ValueError as exc:  # written by a newer sink: say so, never guess
            return IntentFinding(
                "unknown", None, f"ask a sink that knows the batch's mode ({exc}), then act on it"
            )
        if settle == "flush_again":
            return FLUSHED_AGAIN
        if settle == "as_appended" or not record.streams:
            return VISIBLE_AS_APPENDED
        try:
            times = [self._commit_time(s.stream) for s in record.streams]
        except _GoneError as exc:
            return _gone(record, str(exc))
        except Exception as exc:  # unreachable, no credentials: the plan says so
            logger.warning("could not ask BigQuery about %s: %s", record.streams[0].stream, exc)
            return IntentFinding(
                "unknown",
                None,
                "ask BigQuery itself and act on its answer (this control plane could not "
                f"ask: {str(exc).splitlines()[0][:300]})",
            )
        return _by_commit_times(times)

    def _commit_time(self, stream: str) -> str | None:
        from google.api_core.exceptions import NotFound

        try:
            found = self._write_client().get_write_stream(
                name=stream, retry=None, timeout=CALL_TIMEOUT_S
            )
        except NotFound:
            raise _GoneError(stream) from None
        return found.commit_time.isoformat() if found.commit_time else None


FLUSHED_AGAIN = IntentFinding(
    "unknown",
    None,
    "flush its streams to the batch's end (BigQuery does not say how far a BUFFERED "
    "stream was flushed; flushing to an offset already flushed changes nothing), then "
    "record it",
)
VISIBLE_AS_APPENDED = IntentFinding(
    "committed",
    None,
    "record it committed: its rows were visible in the table as they were appended",
)


def _gone(record: BatchRecord, stream: str) -> IntentFinding:
    if record.commit_started_at is None:
        return IntentFinding(
            "streams_gone",
            None,
            f"write the batch again: BigQuery no longer knows stream {stream} and no "
            "commit of it was ever asked for, so none of its rows are in the table",
        )
    return IntentFinding(
        "streams_gone",
        None,
        f"stop and ask a person: a commit was asked for at {record.commit_started_at} "
        f"and BigQuery no longer knows stream {stream}; reconcile the table first",
    )


def _by_commit_times(times: list[str | None]) -> IntentFinding:
    committed = [t for t in times if t]
    if len(committed) == len(times):
        latest = max(committed)
        return IntentFinding(
            "committed",
            latest,
            f"record it committed and skip it: BigQuery committed it at {latest}; nothing "
            "is written again",
        )
    if committed:
        return IntentFinding(
            "partly",
            max(committed),
            f"stop and ask a person: BigQuery shows {len(committed)} of {len(times)} "
            "streams committed, which one BatchCommitWriteStreams never leaves; reconcile "
            "the table first",
        )
    return IntentFinding(
        "not_committed",
        None,
        "commit its streams (BigQuery holds them, uncommitted): its rows become the "
        "table's once, then the job goes on",
    )


class _GoneError(Exception):
    """BigQuery does not know the stream (expired, or never created)."""
