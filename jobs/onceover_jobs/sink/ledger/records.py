"""The commit ledger: what the sink has promised and done, durable across crashes.

One JSON record per write and batch (:mod:`onceover_jobs.sink.ledger.identity` says what a write is)
under the ledger root; the files, where they go and what they hold, are described once,
in :mod:`onceover.ledger_files`, which also reads them (for the sink and the control
plane alike). This module writes them.

Every write is atomic (temp file, fsync, rename, fsync of the directory), so a crash
leaves either the old record or the new one, never half of one. Records are on disk
before the step they guard (an intent before BatchCommitWriteStreams: invariant 3); a
commit's own committed mark is whole but its rename not synced, since an intent left by
a lost mark is settled again; the probe and a driver's claim are not synced at all,
since they matter only while the driver that wrote them lives
(:class:`onceover_jobs.sink.ledger.writes.Sync`). A record only moves
forward: ``intent`` → ``committed``. Where the files live is the store's
(:mod:`onceover.ledger_store`): a disk (local for one machine; NFS or Filestore for a
cluster) or a bucket (``gs://``, ``s3://``, ``abfss://``); nothing here knows which.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from onceover.ledger_files import (
    BatchRecord,
    batch_name,
    batch_order,
    is_record_name,
    read_payload,
    read_record,
    safe_name,
    write_directory,
)
from onceover.ledger_store import StoreLike, join, open_store
from onceover_jobs.sink.errors import (
    LedgerError,
    PartitionTakenError,
)
from onceover_jobs.sink.ledger.identity import OrdinalRegistry, WriteIdentity
from onceover_jobs.sink.ledger.writes import (
    Sync,
    write_exclusively,
    write_replacing,
)

PRUNE_RACES = 10


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
    revision: int = 0
    """Which save this is: the next is created exclusively (Ledger.save_partition)."""
    sent: list[list[int | str]] = field(default_factory=list)
    """(offset, rows, digest) of every request sent, acknowledged or not: a retry cuts
    its rows at the same boundaries and sends nothing unless each digest matches."""
    base: int = 0
    """The stream offset of the partition's first row. The offsets above count from
    it: a stream continued from an earlier batch (onceover_jobs.sink.ledger.slots) starts
    there, a new one at 0."""
    refused: list[list[int | str | None]] = field(default_factory=list)
    """(offset, column, reason) of each row BigQuery refused (onceover_jobs.sink.rows.dead_letter),
    recorded before the rest of its request was sent: the stream holds the partition's
    rows but these, so a row's stream offset is ``base`` + its offset - the refused rows
    before it, and a retry sets the same rows aside again."""


class Ledger:
    """The ledger of one write target: one scope's batches into one table, of one write."""

    def __init__(self, root: StoreLike, scope: str, table: str, write: str = "") -> None:
        self.store = open_store(root)
        self.query_id = scope
        self.table = table
        self.write = write
        self.table_directory = write_directory(scope, table)
        """The table's folder, a key under the store's root."""
        self.directory = write_directory(scope, table, write)
        """This write target's folder, a key under the store's root."""
        self._legacy = safe_name(scope) if write in ("", "0") else None

    @classmethod
    def of(cls, root: StoreLike, identity: WriteIdentity) -> Ledger:
        return cls(root, identity.scope, identity.table, identity.write)

    @property
    def where(self) -> str:
        """This write target's folder as a user finds it: a path or a URL."""
        return self.store.where(self.directory)

    def registry(self, batch_id: int | None, call: str) -> OrdinalRegistry:
        """The ordinals of one call's writes to this table
        (:mod:`onceover_jobs.sink.ledger.identity`)."""
        return OrdinalRegistry(
            self.store, join(self.table_directory, "calls", batch_name(batch_id), safe_name(call))
        )

    # -- batches (driver) --------------------------------------------------------

    def batch_key(self, batch_id: int | None) -> str:
        return join(self.directory, f"batch-{batch_name(batch_id)}.json")

    def batch(self, batch_id: int | None) -> BatchRecord | None:
        record = read_record(self.store, self.batch_key(batch_id))
        if record is None and self._legacy is not None:
            legacy = read_record(
                self.store, join(self._legacy, f"batch-{batch_name(batch_id)}.json")
            )
            if legacy is not None and legacy.table == self.table:
                return legacy
        return record

    def _save(self, record: BatchRecord, *, sync: Sync = Sync.DURABLE) -> None:
        write_replacing(
            self.store,
            self.batch_key(record.batch_id),
            asdict(replace(record, write=self.write)),
            sync=sync,
        )

    def write_intent(self, record: BatchRecord, *, replacing: BatchRecord | None = None) -> bool:
        """Record what is about to be committed (before ``BatchCommitWriteStreams``).

        Created exclusively: False when another driver's intent is there (unless it is
        ``replacing``, an intent whose streams BigQuery can no longer commit)."""
        existing = self.batch(record.batch_id)
        if existing is not None and existing.committed:
            raise LedgerError(
                f"batch {batch_name(record.batch_id)} of {self.query_id} is already "
                "committed; refusing to write a new intent over it"
            )
        intent = replace(record, state="intent", write=self.write)
        if existing is not None:
            if existing != replacing:
                return False  # another driver's, written since the caller looked
            self._save(intent)
            return True
        return write_exclusively(self.store, self.batch_key(record.batch_id), asdict(intent))

    def mark_commit_started(self, record: BatchRecord, *, at: str) -> BatchRecord:
        """Before BatchCommitWriteStreams: from here on the commit may have happened."""
        if record.commit_started_at is not None:
            return record
        started = replace(record, commit_started_at=at)
        self._save(started)
        return started

    def mark_committed(
        self,
        record: BatchRecord,
        *,
        at: str,
        commit_time: str | None,
        resolved: bool = False,
        sync: Sync = Sync.DURABLE,
    ) -> BatchRecord:
        """Mark ``record`` committed. ``sync=Sync.WHOLE`` where a mark lost in a crash of
        the machine costs nothing: its intent is then settled from BigQuery again."""
        committed = replace(
            record, state="committed", committed_at=at, commit_time=commit_time, resolved=resolved
        )
        self._save(committed, sync=sync)
        return committed

    def set_aside(self, record: BatchRecord, *, at: str) -> str:
        """Move an intent out of the way, so the batch is written again by the next run;
        kept beside the records as ``settled-batch-<id>-<at>.json`` (not read as one).
        The copy first, then the record: a crash between leaves the intent, which the
        next run settles (and sets aside) again."""
        if record.committed:
            raise LedgerError(f"batch {batch_name(record.batch_id)} is committed")
        source = self.batch_key(record.batch_id)
        kept = join(
            self.directory, f"settled-batch-{batch_name(record.batch_id)}-{safe_name(at)}.json"
        )
        found = self.store.read(source)
        if found is None:
            raise LedgerError(f"cannot set aside {self.store.where(source)}: it is gone")
        self.store.put(kept, found.data)
        self.store.delete(source)
        self.store.settle(self.directory)
        return self.store.where(kept)

    def batches(self) -> list[BatchRecord]:
        """Every batch recorded for this write target, in batch order."""
        found: dict[int | None, BatchRecord] = {}
        if self._legacy is not None:
            for name in self.store.list(self._legacy).files:
                if is_record_name(name):
                    legacy = read_record(self.store, join(self._legacy, name))
                    if legacy is not None and legacy.table == self.table:
                        found[legacy.batch_id] = legacy
        for name in self.store.list(self.directory).files:
            if is_record_name(name):
                record = read_record(self.store, join(self.directory, name))
                if record is not None:
                    found[record.batch_id] = record
        return sorted(found.values(), key=batch_order)

    # -- partitions (executors, committed mode) -----------------------------------

    def _partition_directory(self, batch_id: int | None, partition: int) -> str:
        return join(self.directory, "partitions", batch_name(batch_id), str(partition))

    def _version_key(self, batch_id: int | None, partition: int, version: int) -> str:
        return join(self._partition_directory(batch_id, partition), f"v{version:09d}.json")

    def partition(self, batch_id: int | None, partition: int) -> PartitionProgress | None:
        """The partition's progress: the newest version of its record."""
        directory = self._partition_directory(batch_id, partition)
        for _ in range(PRUNE_RACES):
            versions = newest_versions(self.store.list(directory).files)
            if not versions:  # the layout before versions: <partition>.json
                payload = read_payload(self.store, f"{directory}.json")
                return None if payload is None else PartitionProgress(**payload)
            payload = read_payload(self.store, join(directory, versions[-1]))
            if payload is not None:
                return PartitionProgress(**payload)
            # pruned between the listing and the read: a newer one exists; list again
        raise LedgerError(
            f"{self.store.where(directory)}: its versions kept changing under the reader"
        )

    def claim_partition(
        self, batch_id: int | None, partition: int, progress: PartitionProgress
    ) -> PartitionProgress:
        """Record ``progress`` unless another attempt did first; return whichever holds."""
        existing = self.partition(batch_id, partition)
        if existing is not None:
            return existing
        first = replace(progress, revision=0)
        if write_exclusively(self.store, self._version_key(batch_id, partition, 0), asdict(first)):
            return first
        existing = self.partition(batch_id, partition)
        assert existing is not None  # it existed a moment ago and records are never deleted
        return existing

    def save_partition(
        self, batch_id: int | None, partition: int, progress: PartitionProgress
    ) -> PartitionProgress:
        """Advance the record from ``progress.revision`` (a compare-and-swap: the next
        version is created exclusively) and return what was saved. Another attempt of the
        partition that advanced it first (speculation, a zombie task) makes this raise."""
        saved = replace(progress, revision=progress.revision + 1)
        key = self._version_key(batch_id, partition, saved.revision)
        if not write_exclusively(self.store, key, asdict(saved)):
            raise PartitionTakenError(
                f"partition {partition} of {batch_name(batch_id)} ({self.where}): another "
                f"attempt advanced its progress past revision {progress.revision} first (a "
                "speculative or zombie attempt of the same partition); this attempt stops so "
                "the two never write over each other's offsets"
            )
        if saved.revision >= 2:  # keep the last two: a reader may be on the older
            self.store.delete(self._version_key(batch_id, partition, saved.revision - 2))
        return saved


def newest_versions(files: dict[str, str]) -> list[str]:
    """The names of a versioned record's files (``v<revision>.json``), oldest first."""
    return sorted(n for n in files if n.startswith("v") and n.endswith(".json"))
