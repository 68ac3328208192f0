"""The ledger's files as both planes read them: the layout, the record format, reading
records, scopes and totals. The sink writes them through ``onceover_jobs.sink.ledger.records``
(and prunes them through ``onceover_jobs.sink.ledger.retention``); the control plane
reads them here, without the sink.

The layout, under a ledger root (for streaming, ``<checkpointLocation>/onceover/``, see
:mod:`onceover.checkpoint_layout`; otherwise the sink's ``ledger`` option)::

    <root>/<scope>/<table>/batch-<batch id>.json           the streaming sink's batches
    <root>/<scope>/<table>/writes/<write>/batch-<id>.json  foreachBatch and batch writes
    <dir>/swap-<batch id>.json                             an overwrite's swap (below)
    <dir>/partitions/<batch id>/<n>/v<revision>.json       committed mode: stream + progress
    <dir>/streams/<n>/v<revision>.json                     a partition's long-lived stream
    <dir>/pruned.json                                      what retention pruned (below)
    <dir>/settled-batch-<id>-<at>.json                     an intent set aside (not read)
    <root>/<scope>/<table>/calls/<batch>/<call>/<k>.json   which execution is write k
    <root>/<scope>/driver.json                             the driver writing the scope
    <root>/.shared/<probe>                                 proof the executors see it

``<dir>`` is the directory of one write target (the first two lines); ``scope`` is the
query id (streaming, foreachBatch) or the run id (batch writes); ``scope``, ``table``,
``write`` and ``call`` are each one path component (:func:`safe_name`). ``batch id`` is
``write`` (:data:`BATCH_WRITE`) for a batch write, which Spark does not number;
``revision`` has nine digits. Records of the layout before write identities
(``<root>/<scope>/batch-<id>.json``) are still read as the first write of their table,
and a partition's progress from before versions as ``partitions/<batch id>/<n>.json``.

The record format: every file is one JSON object, its keys sorted, holding
``"version": 1`` (:data:`LEDGER_VERSION`) beside the payload, which :func:`read_payload`
checks and drops. A batch record (``batch-*.json``) is a :class:`BatchRecord`, its
streams lists of :class:`StreamCommit` fields; it only moves forward, ``intent`` →
``committed``. The sink writes each file atomically (a reader finds the old file or
the new one, never half of one) through a store (:mod:`onceover.ledger_store`): a
mounted disk (local for one machine, NFS or Filestore for a cluster) or a bucket
(``gs://``, ``s3://``, ``abfss://``), whose keys are these paths under the root's prefix.

``swap-<batch id>.json`` (a :class:`SwapRecord`), beside the batch record of a
``mode("overwrite")`` write, whose streams commit its rows to a staging table
(:func:`staging_table_of`): written ``swapping`` before the transaction that moves them into
the table is asked for, ``swapped`` once BigQuery says it is done. The sink writes it
(``onceover_jobs.sink.ledger.swaps``); it only moves forward.

``pruned.json`` (a :class:`PrunedSummary`) is what retention kept of the committed
batches it removed from ``<dir>``::

    {batches, rows, through, highest, held, removing, pruned_at}

``batches`` and ``rows``: the committed batches pruned and their rows, so totals
survive. ``through``: every batch id below it was pruned, or is in ``held`` (an
intent), or was never recorded in this directory; a record still there below it and
not held is a prune's leftover, counted by the summary. ``highest``: the highest batch
id pruned. ``removing``: the batches the last prune counted, whose files it was removing.

Totals (:class:`ScopeTotals`, :func:`scope_totals`) are the summaries plus the records
they do not cover; :class:`ScopeTotals` remembers what it read (by key and the version
a listing gives: a disk's inode, mtime and size, an object's generation or ETag) and
reads only records and summaries that are new or changed, for a heartbeat.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from onceover.errors import LedgerError
from onceover.key_checksum import KeyBucket
from onceover.ledger_store import LedgerStore, Listing, StoreLike, join, open_store

LEDGER_VERSION = 1
BATCH_WRITE = "write"
"""The batch id of a batch (non-streaming) write, which Spark does not number."""
SUMMARY_FILE = "pruned.json"

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """``text`` as one path component."""
    return _SAFE.sub("_", text)


# -- records ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamCommit:
    """One stream of a batch: what a task wrote and returned to the driver."""

    stream: str
    rows: int
    bytes: int
    partition: int
    attempt: int
    base: int = 0
    """Where the rows start on the stream (a stream continued from an earlier batch);
    buffered mode flushes it to ``base + rows - 1``."""
    finalized_at: str | None = None
    """When the task finalized the stream (its clock, ISO 8601): BigQuery keeps a finalized
    PENDING stream's rows "for up to 4 hours" before they are committed, so an older one
    is never committed blind (onceover_jobs.sink.modes.pending). None: not recorded (a
    stream of another mode, or a ledger written before it was)."""


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
    write: str = ""
    """Which write of its scope to ``table``
    (:class:`onceover_jobs.sink.ledger.identity.WriteIdentity`)."""
    owner: str | None = None
    """The driver that wrote the intent (onceover_jobs.sink.driver.driver_owner)."""
    source_offsets: str | None = None
    """Streaming: SHA-256 of Spark's offsets log entry the batch was written from
    (:mod:`onceover_jobs.sink.ledger.offsets_log`); the same batch id from another entry is a
    reset."""
    commit_started_at: str | None = None
    """When a driver first called BatchCommitWriteStreams (buffered mode: FlushRows) on
    the intent's streams. None proves no commit was ever asked for, so streams
    BigQuery no longer knows (expired) can be written again; once set, only BigQuery
    (or a person) can tell."""
    dead_letter_table: str | None = None
    dead_letter_streams: tuple[StreamCommit, ...] = ()
    """PENDING streams on ``dead_letter_table`` holding the rows BigQuery refused
    (onceover_jobs.sink.rows.dead_letter), committed with the batch; ``expected_rows`` counts only
    the table's own rows."""

    key_checksum: int | None = None
    """Stamped writes with an INT64 or STRING key: the key checksum of the rows the
    batch commits to ``table`` (:mod:`onceover.key_checksum`)."""
    key_buckets: tuple[KeyBucket, ...] | None = None
    """With ``key_checksum``: the batch's key tally, its non-empty buckets
    (:mod:`onceover.key_checksum`); None for a batch recorded before tallies."""
    offsets: tuple[str, ...] | None = None
    """Streaming: the batch's entry in Spark's offsets log, one offset a source (the
    receipt's source offsets; ``source_offsets`` is the entry's fingerprint)."""
    upserts: int | None = None
    deletes: int | None = None
    """A change data capture write: the batch's UPSERT and DELETE rows sent (each row of
    ``expected_rows`` is one or the other); None for a plain append."""

    @property
    def committed(self) -> bool:
        return self.state == "committed"

    @property
    def dead_lettered_rows(self) -> int:
        return sum(s.rows for s in self.dead_letter_streams)


def batch_name(batch_id: int | None) -> str:
    return BATCH_WRITE if batch_id is None else str(batch_id)


def write_directory(scope: str, table: str, write: str = "") -> str:
    """The folder of one write target (``<dir>`` above), a key under the ledger's root."""
    directory = join(safe_name(scope), safe_name(table))
    return join(directory, "writes", safe_name(write)) if write else directory


def record_directory(record: BatchRecord) -> str:
    """The folder a batch record was written in (its write target's)."""
    return write_directory(record.query_id, record.table, record.write)


def stream_table(stream: str) -> str:
    """The table of a write stream: ``projects/p/datasets/d/tables/t/streams/s`` as ``p.d.t``."""
    parts = stream.split("/")
    return f"{parts[1]}.{parts[3]}.{parts[5]}"


def staging_table_of(table: str, streams: Iterable[str]) -> str | None:
    """Where a batch into ``table`` committed its rows when it is an overwrite's: its
    streams' table, which is not ``table`` (they reach it at the swap, :class:`SwapRecord`);
    None for any other batch."""
    tables = set()
    for stream in streams:
        found = _STREAM.match(stream)
        if found is None:  # not a write stream's name: nothing to tell
            return None
        tables.add(".".join(found.groups()))
    return next(iter(tables)) if len(tables) == 1 and table not in tables else None


_STREAM = re.compile(r"^projects/([^/]+)/datasets/([^/]+)/tables/([^/]+)/streams/[^/]+$")


def read_payload(store: LedgerStore, key: str) -> dict[str, Any] | None:
    """A ledger file's payload (its ``version`` checked and dropped); None when there is
    none."""
    found = store.read(key)
    return None if found is None else decode_payload(found.data, store.where(key))


def decode_payload(data: bytes, where: str) -> dict[str, Any]:
    """The payload of a ledger file's bytes, read from ``where`` (for messages)."""
    try:
        payload: dict[str, Any] = json.loads(data)
    except ValueError as exc:
        raise LedgerError(f"ledger record {where} is unreadable: {exc}") from exc
    if not isinstance(payload, dict) or payload.pop("version", None) != LEDGER_VERSION:
        raise LedgerError(f"ledger record {where} has an unknown version")
    return payload


def encode_payload(payload: dict[str, Any]) -> bytes:
    """A ledger file's bytes: the payload beside its format's version, keys sorted."""
    return json.dumps({"version": LEDGER_VERSION, **payload}, sort_keys=True).encode()


def read_record(store: LedgerStore, key: str) -> BatchRecord | None:
    payload = read_payload(store, key)
    if payload is None:
        return None
    return record_of(payload, store.where(key))


def record_of(payload: dict[str, Any], where: str) -> BatchRecord:
    """A batch record from its payload (read from ``where``)."""
    try:
        streams = tuple(StreamCommit(**s) for s in payload.pop("streams"))
        dead = tuple(StreamCommit(**s) for s in payload.pop("dead_letter_streams", ()))
        offsets = payload.pop("offsets", None)
        buckets = payload.pop("key_buckets", None)
        return BatchRecord(
            streams=streams,
            dead_letter_streams=dead,
            offsets=None if offsets is None else tuple(offsets),
            key_buckets=None if buckets is None else tuple(_bucket(b) for b in buckets),
            **payload,
        )
    except (TypeError, KeyError) as exc:
        raise LedgerError(f"ledger record {where}: {exc}") from exc


def _bucket(item: list[Any]) -> KeyBucket:
    bucket, rows, checksum, key_sum = item
    return (int(bucket), int(rows), int(checksum), None if key_sum is None else str(key_sum))


def batch_order(record: BatchRecord) -> int:
    """Sorts records by batch id, the batch write (``None``) first."""
    return -1 if record.batch_id is None else record.batch_id


def is_record_name(name: str) -> bool:
    """A batch record's file name (``batch-<id>.json``)."""
    return name.startswith("batch-") and name.endswith(".json")


def scope_records(root: StoreLike, scope: str) -> list[BatchRecord]:
    """Every record of one query or run, whatever its table and write, in batch order."""
    store = open_store(root)
    keys = sorted(
        key for key, _ in store.walk(safe_name(scope)) if is_record_name(key.rsplit("/", 1)[-1])
    )
    records = [r for r in (read_record(store, k) for k in keys) if r is not None]
    return sorted(records, key=lambda r: (batch_order(r), r.table, r.write))


def scopes(root: StoreLike) -> list[str]:
    """The names of the scopes (queries, runs) a ledger root holds records of."""
    store = open_store(root)
    return sorted(
        name
        for name in store.list("").folders
        if any(is_record_name(k.rsplit("/", 1)[-1]) for k, _ in store.walk(name))
    )


# -- an overwrite's swap -----------------------------------------------------------------

SwapState = Literal["swapping", "swapped"]


@dataclass(frozen=True)
class SwapRecord:
    """The swap of one ``mode("overwrite")`` write (``swap-<batch id>.json``): which
    transaction replaces the table's rows with the staged ones, and whether it has."""

    state: SwapState
    target: str
    staging: str
    """The table the staged rows are in (where the committed batch's streams were)."""
    scope: str
    """What the swap replaces, in words."""
    job_id: str
    """The BigQuery job of the transaction: fixed before it is asked for, so asking again
    finds the first one's outcome rather than running a second."""
    attempt: int
    started_at: str
    swapped_at: str | None = None
    staged_rows: int = 0
    """The rows inserted: every row staged."""
    rows_replaced: int | None = None
    """The target's rows in the scope, counted as the first attempt began."""
    partitions: list[str] | None = None
    """The partitions replaced by BigQuery's partition ids (``20261102``, ``__NULL__``,
    ``__UNPARTITIONED__``; the first 100), None for the whole table."""
    partition_count: int | None = None

    @property
    def swapped(self) -> bool:
        return self.state == "swapped"


def swap_key(directory: str, batch_id: int | None) -> str:
    """The swap record of ``batch_id`` in a write target's folder (``Ledger.directory``)."""
    return join(directory, f"swap-{batch_name(batch_id)}.json")


def read_swap(store: LedgerStore, directory: str, batch_id: int | None) -> SwapRecord | None:
    """The swap record of an overwrite's batch; None before its swap was recorded."""
    key = swap_key(directory, batch_id)
    payload = read_payload(store, key)
    return None if payload is None else swap_of(payload, store.where(key))


def swap_of(payload: dict[str, Any], where: str) -> SwapRecord:
    """A swap record from its payload (read from ``where``)."""
    try:
        return SwapRecord(**payload)
    except TypeError as exc:
        raise LedgerError(f"ledger record {where}: {exc}") from exc


# -- the pruned summary -------------------------------------------------------------------


@dataclass(frozen=True)
class PrunedSummary:
    """What retention pruned from one ledger directory (``pruned.json``)."""

    batches: int = 0
    """Committed batches pruned."""
    rows: int = 0
    """Their rows (``expected_rows``)."""
    through: int = 0
    """Every batch id below this is pruned, held, or was never recorded here."""
    highest: int | None = None
    """The highest batch id pruned."""
    held: tuple[int, ...] = ()
    """Intents below ``through``, kept until settled (and pruned then)."""
    removing: tuple[int, ...] = ()
    """The batches the last prune counted and was removing (ascending)."""
    pruned_at: float | None = None

    def covers(self, batch_id: int | None) -> bool:
        """Whether a record of ``batch_id`` in this directory is counted here (or was never
        committed): a record still on disk below ``through`` is a leftover of a prune."""
        return batch_id is not None and batch_id < self.through and batch_id not in self.held


def summary_key(directory: str) -> str:
    return join(directory, SUMMARY_FILE)


def read_summary(store: LedgerStore, directory: str) -> PrunedSummary | None:
    """The summary of one ledger directory (``Ledger.directory``); None if never pruned."""
    return _read_summary(store, summary_key(directory))


def _read_summary(store: LedgerStore, key: str) -> PrunedSummary | None:
    payload = read_payload(store, key)  # written like the records: the same checks
    if payload is None:
        return None
    try:
        highest = payload.get("highest")
        at = payload.get("pruned_at")
        return PrunedSummary(
            batches=int(payload["batches"]),
            rows=int(payload["rows"]),
            through=int(payload["through"]),
            highest=None if highest is None else int(highest),
            held=tuple(int(b) for b in payload.get("held", ())),
            removing=tuple(int(b) for b in payload.get("removing", ())),
            pruned_at=None if at is None else float(at),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise LedgerError(f"ledger summary {store.where(key)}: {exc}") from exc


# -- totals -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    """Committed batches and their rows."""

    batches: int = 0
    rows: int = 0

    def __add__(self, other: Totals) -> Totals:
        return Totals(self.batches + other.batches, self.rows + other.rows)


@dataclass(frozen=True)
class _Counted:
    batch_id: int | None
    committed: bool
    rows: int


class ScopeTotals:
    """The committed batches and rows of one scope (query or run), every table and write:
    the pruned summaries plus the records they do not cover.

    Each :meth:`read` lists the scope's ledger directories (never their ``partitions/``,
    ``calls/`` or ``streams/``) and opens only the records and summaries that are new or
    changed since the last (by the version the listing gives); one instance is meant to
    live as long as its heartbeat."""

    def __init__(self, root: StoreLike, scope: str) -> None:
        self.scope = scope
        self.store = open_store(root)
        self.directory = safe_name(scope)
        self.opened = 0
        """Files read so far (what the reads have cost)."""
        self._records: dict[str, tuple[str, _Counted]] = {}
        self._summaries: dict[str, tuple[str, PrunedSummary]] = {}
        self._lock = threading.Lock()  # a heartbeat thread and the main thread both read

    def read(self) -> Totals:
        with self._lock:
            # Records first, then summaries: a prune writes its summary before it removes a
            # record, so a record this listing missed is in the summary read after it.
            records, directories = _walk(self.store, self.directory)
            self._refresh_records(records)
            self._refresh_summaries(directories)
            return self._total()

    def _refresh_records(self, listed: dict[str, str]) -> None:
        for gone in self._records.keys() - listed.keys():
            del self._records[gone]
        for key, version in listed.items():
            cached = self._records.get(key)
            if cached is not None and cached[0] == version:
                continue
            self.opened += 1
            record = read_record(self.store, key)
            if record is None:  # removed since the listing (pruned)
                self._records.pop(key, None)
                continue
            counted = _Counted(record.batch_id, record.committed, record.expected_rows)
            self._records[key] = (version, counted)

    def _refresh_summaries(self, directories: dict[str, str | None]) -> None:
        seen: set[str] = set()
        for directory, version in directories.items():
            if version is None:
                continue
            seen.add(directory)
            cached = self._summaries.get(directory)
            if cached is not None and cached[0] == version:
                continue
            self.opened += 1
            summary = read_summary(self.store, directory)
            if summary is not None:
                self._summaries[directory] = (version, summary)
        for gone in self._summaries.keys() - seen:
            del self._summaries[gone]

    def _total(self) -> Totals:
        total = Totals()
        for _, summary in self._summaries.values():
            total += Totals(summary.batches, summary.rows)
        for key, (_, counted) in self._records.items():
            if not counted.committed:
                continue
            pruned = self._summaries.get(key.rsplit("/", 1)[0])
            if pruned is not None and pruned[1].covers(counted.batch_id):
                continue  # counted in the summary; a prune's leftover
            total += Totals(1, counted.rows)
        return total


def scope_totals(root: StoreLike, scope: str) -> Totals:
    """The committed batches and rows of one scope, read once (see :class:`ScopeTotals`)."""
    return ScopeTotals(root, scope).read()


def scope_summaries(root: StoreLike, scope: str) -> dict[str, PrunedSummary]:
    """The pruned summaries of one scope, by ledger directory. Read them *after* the
    records they complete, for the reason :meth:`ScopeTotals.read` gives."""
    store = open_store(root)
    _, directories = _walk(store, safe_name(scope))
    found = {d: read_summary(store, d) for d, v in directories.items() if v is not None}
    return {d: s for d, s in found.items() if s is not None}


def _walk(store: LedgerStore, scope: str) -> tuple[dict[str, str], dict[str, str | None]]:
    """The record files of a scope (key → version) and its ledger directories (key → the
    version of their summary, None without one): ``<scope>/batch-*.json`` (the layout
    before write identities), ``<scope>/<table>/`` and ``<scope>/<table>/writes/<write>/``.
    One listing a directory: a scope of one table and write costs two."""
    records: dict[str, str] = {}
    directories: dict[str, str | None] = {}

    def ledger_directory(directory: str, listing: Listing) -> None:
        directories[directory] = listing.files.get(SUMMARY_FILE)
        _add_records(records, directory, listing)

    top = store.list(scope)
    _add_records(records, scope, top)
    for table in top.folders:
        table_key = join(scope, table)
        listing = store.list(table_key)
        ledger_directory(table_key, listing)
        if "writes" in listing.folders:
            for write in store.list(join(table_key, "writes")).folders:
                write_key = join(table_key, "writes", write)
                ledger_directory(write_key, store.list(write_key))
    return records, directories


def _add_records(records: dict[str, str], directory: str, listing: Listing) -> None:
    for name, version in listing.files.items():
        if is_record_name(name):
            records[join(directory, name)] = version
