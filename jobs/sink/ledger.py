"""The commit ledger: what the sink has promised and done, durable across crashes.

One JSON record per (query id, batch id) under the ledger root (for streaming,
``<checkpointLocation>/onceover/``; for batch writes the ``ledger`` option, keyed by
``run_id``)::

    <root>/<query id>/batch-<batch id>.json             intent, then committed
    <root>/<query id>/partitions/<batch id>/<n>.json    committed mode: stream + progress

Every write is atomic (temp file, fsync, rename, fsync of the directory), so a crash
leaves either the old record or the new one, never half of one. A record only moves
forward: ``intent`` → ``committed``. The ledger is a plain filesystem path: local for
one machine, shared storage (NFS, a mounted bucket) for a cluster.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from jobs.sink.errors import LedgerError

LEDGER_VERSION = 1
BATCH_WRITE = "write"
"""The batch id of a batch (non-streaming) write, which Spark does not number."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class StreamCommit:
    """One stream of a batch: what a task wrote and returned to the driver."""

    stream: str
    rows: int
    bytes: int
    partition: int
    attempt: int


@dataclass(frozen=True)
class BatchRecord:
    query_id: str
    batch_id: int | None
    table: str
    mode: str
    state: Literal["intent", "committed"]
    streams: tuple[StreamCommit, ...]
    expected_rows: int
    intent_at: str
    committed_at: str | None = None
    commit_time: str | None = None
    resolved: bool = False
    """Found committed in BigQuery after a crash, rather than committed by this attempt."""
    source_offsets: str | None = None
    """Streaming: SHA-256 of Spark's offsets log entry the batch was written from
    (:mod:`jobs.sink.offsets_log`); the same batch id from another entry is a reset."""

    @property
    def committed(self) -> bool:
        return self.state == "committed"


@dataclass(frozen=True)
class PartitionProgress:
    """Committed mode: the stream of one partition of one batch and how far it got."""

    stream: str
    acked_rows: int = 0
    """Rows acknowledged by BigQuery: the next offset to append at."""
    sent_rows: int = 0
    """Offsets below this may have been sent (and applied) by an earlier attempt."""
    complete: bool = False
    attempt: int = 0
    inflight: list[list[int]] = field(default_factory=list)
    """(offset, rows) of each request sent but not known to be acknowledged: a retry
    cuts these again at the same boundaries, so ALREADY_EXISTS for them is an
    identical retry."""


def _batch_name(batch_id: int | None) -> str:
    return BATCH_WRITE if batch_id is None else str(batch_id)


def _write_atomically(path: Path, payload: dict[str, Any], *, exclusive: bool = False) -> bool:
    """Write ``payload`` as ``path`` in one step; with ``exclusive``, only if it is absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"version": LEDGER_VERSION, **payload}, sort_keys=True).encode()
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            try:
                os.link(temp, path)  # fails if another attempt created it first
            except FileExistsError:
                return False
        else:
            os.replace(temp, path)
        _fsync_directory(path.parent)
        return True
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        payload: dict[str, Any] = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LedgerError(f"ledger record {path} is unreadable: {exc}") from exc
    if payload.pop("version", None) != LEDGER_VERSION:
        raise LedgerError(f"ledger record {path} has an unknown version")
    return payload


class Ledger:
    """The ledger of one query (a streaming query id, or the run id of a batch write)."""

    def __init__(self, root: str | os.PathLike[str], query_id: str) -> None:
        self.root = Path(root)
        self.query_id = query_id
        self.directory = self.root / _SAFE.sub("_", query_id)

    # -- batches (driver) --------------------------------------------------------

    def _batch_path(self, batch_id: int | None) -> Path:
        return self.directory / f"batch-{_batch_name(batch_id)}.json"

    def batch(self, batch_id: int | None) -> BatchRecord | None:
        payload = _read(self._batch_path(batch_id))
        if payload is None:
            return None
        try:
            streams = tuple(StreamCommit(**s) for s in payload.pop("streams"))
            return BatchRecord(streams=streams, **payload)
        except (TypeError, KeyError) as exc:
            raise LedgerError(f"ledger record {self._batch_path(batch_id)}: {exc}") from exc

    def _save(self, record: BatchRecord) -> None:
        try:
            _write_atomically(self._batch_path(record.batch_id), asdict(record))
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger at {self.directory}: {exc}") from exc

    def write_intent(self, record: BatchRecord) -> None:
        """Record what is about to be committed (before ``BatchCommitWriteStreams``)."""
        existing = self.batch(record.batch_id)
        if existing is not None and existing.committed:
            raise LedgerError(
                f"batch {_batch_name(record.batch_id)} of {self.query_id} is already "
                "committed; refusing to write a new intent over it"
            )
        self._save(replace(record, state="intent"))

    def mark_committed(
        self, record: BatchRecord, *, at: str, commit_time: str | None, resolved: bool = False
    ) -> BatchRecord:
        committed = replace(
            record, state="committed", committed_at=at, commit_time=commit_time, resolved=resolved
        )
        self._save(committed)
        return committed

    def batches(self) -> list[BatchRecord]:
        """Every batch recorded for this query, in batch order."""
        found = []
        for path in sorted(self.directory.glob("batch-*.json")):
            name = path.stem.removeprefix("batch-")
            record = self.batch(None if name == BATCH_WRITE else int(name))
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: -1 if r.batch_id is None else r.batch_id)

    # -- partitions (executors, committed mode) -----------------------------------

    def _partition_path(self, batch_id: int | None, partition: int) -> Path:
        return self.directory / "partitions" / _batch_name(batch_id) / f"{partition}.json"

    def partition(self, batch_id: int | None, partition: int) -> PartitionProgress | None:
        payload = _read(self._partition_path(batch_id, partition))
        return None if payload is None else PartitionProgress(**payload)

    def claim_partition(
        self, batch_id: int | None, partition: int, progress: PartitionProgress
    ) -> PartitionProgress:
        """Record ``progress`` unless another attempt did first; return whichever holds."""
        path = self._partition_path(batch_id, partition)
        if _write_atomically(path, asdict(progress), exclusive=True):
            return progress
        existing = self.partition(batch_id, partition)
        assert existing is not None  # it existed a moment ago and records are never deleted
        return existing

    def save_partition(
        self, batch_id: int | None, partition: int, progress: PartitionProgress
    ) -> None:
        try:
            _write_atomically(self._partition_path(batch_id, partition), asdict(progress))
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger at {self.directory}: {exc}") from exc
