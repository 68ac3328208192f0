"""What a run's checkpoint holds, read where its spec says it is, before a resume.

The ledger is the sink's durable record of intents and commits, read here through the
contract (:mod:`onceover.ledger_files`) as the sink reads it; Spark's own offset and
commit logs say which batch it will replay first.
Both are read through the ledger's store (:func:`onceover.ledger_store.open_store`),
wherever the spec says they are: a path on a local or shared filesystem this backend
mounts, or a bucket's URL (``gs://``, ``s3://``, ``s3a://``, ``abfss://``, ``az://``)
reached with this backend's own credentials, found as each cloud's clients find them
(Application Default Credentials, the AWS chain, the ``AZURE_*`` variables; a local
stand-in's ``STORAGE_EMULATOR_HOST`` or ``AWS_ENDPOINT_URL``). Anything that keeps them
from being read is a :class:`~onceover_backend.errors.UnresumableError` naming the path
or URL: a resume that cannot see its checkpoint is never launched.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from onceover.checkpoint_layout import RUN_ID_FILE
from onceover.checkpoint_layout import ledger_root as checkpoint_ledger
from onceover.errors import ConfigurationError, LedgerError, LedgerStoreError
from onceover.events import JobSpec
from onceover.ledger_files import (
    BatchRecord,
    SwapRecord,
    Totals,
    read_swap,
    record_directory,
    scope_records,
    scope_totals,
    scopes,
    staging_table_of,
)
from onceover.ledger_store import (
    LedgerStore,
    check_location,
    is_object_store,
    open_store,
    scheme_of,
)
from onceover_backend.errors import UnresumableError

logger = logging.getLogger(__name__)

SPARK_LOGS = ("offsets", "commits")
"""Spark's logs in a checkpoint: one file (object) per batch, named by its number."""


@dataclass(frozen=True)
class StagedOverwrite:
    """An overwrite's batch, committed to its staging table, and how far its swap got."""

    record: BatchRecord
    staging: str
    swap: SwapRecord | None
    """None: no swap was recorded (the table holds its old rows)."""


@dataclass(frozen=True)
class CheckpointState:
    checkpoint: str | None
    """The checkpoint as read: an absolute path or a bucket's URL."""
    ledger: str
    queries: list[str] = field(default_factory=list)
    committed: list[BatchRecord] = field(default_factory=list)
    intents: list[BatchRecord] = field(default_factory=list)
    spark_last_planned_batch: int | None = None
    spark_last_finished_batch: int | None = None
    warnings: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    """Committed batches and rows of every query, with those the ledger pruned
    (``committed`` holds only the records it keeps: onceover.ledger_files.ScopeTotals)."""
    overwrites: list[StagedOverwrite] = field(default_factory=list)
    """The committed batches of ``mode("overwrite")`` writes, each with its swap record."""

    @property
    def last_committed_batch(self) -> int | None:
        numbered = [b.batch_id for b in self.committed if b.batch_id is not None]
        return max(numbered) if numbered else None


def ledger_of(spec: JobSpec) -> str:
    """The run's ledger as its spec names it: ``ledger``, else its checkpoint's (the rule
    the job itself follows). A resume reads it; a re-drive of the run's set-aside rows
    keeps its records there, so every re-drive of one run shares one ledger."""
    if spec.ledger:
        return _location(spec.ledger, "ledger")
    if spec.checkpoint:
        return checkpoint_ledger(_location(spec.checkpoint, "checkpoint"))
    raise UnresumableError(
        "the run's spec names no checkpoint or ledger, so nothing says where to resume from"
    )


def read_checkpoint(spec: JobSpec, run_id: str) -> CheckpointState:
    """The ledger and Spark logs of ``spec``'s checkpoint, checked to belong to ``run_id``."""
    checkpoint = _location(spec.checkpoint, "checkpoint") if spec.checkpoint else None
    ledger = ledger_of(spec)
    planned = finished = None
    if checkpoint is not None:
        if not is_object_store(checkpoint):
            _readable_directory(Path(checkpoint), "checkpoint")
        store = _open(checkpoint, "checkpoint")
        with _reading("checkpoint", checkpoint):
            planned, finished = (_highest_batch(store, log) for log in SPARK_LOGS)
    if not is_object_store(ledger) and Path(ledger).exists():
        _readable_directory(Path(ledger), "ledger")
    store = _open(ledger, "ledger")
    with _reading("ledger", ledger):
        top = store.list("")
        if not top.files and not top.folders:
            # The job failed before its sink recorded anything: nothing to resolve.
            return CheckpointState(
                checkpoint,
                ledger,
                spark_last_planned_batch=planned,
                spark_last_finished_batch=finished,
                warnings=[f"the ledger {ledger} holds nothing yet: no batch was recorded"],
            )
        _check_owner(store, run_id)
        queries: list[str] = []
        committed: list[BatchRecord] = []
        intents: list[BatchRecord] = []
        totals = Totals()
        for scope in scopes(store):
            records = scope_records(store, scope)
            if records:
                queries.append(records[0].query_id)
            committed += [r for r in records if r.committed]
            intents += [r for r in records if not r.committed]
            totals += scope_totals(store, scope)
        overwrites = [_staged(store, r) for r in committed]
    return CheckpointState(
        checkpoint, ledger, queries, committed, intents, planned, finished, [], totals,
        [o for o in overwrites if o is not None],
    )  # fmt: skip


def _staged(store: LedgerStore, record: BatchRecord) -> StagedOverwrite | None:
    """``record`` as an overwrite's, with its swap record; None for an append's, whose
    swap is never looked for (a read per overwrite, none per append that wrote rows)."""
    streams = [s.stream for s in record.streams]
    staging = staging_table_of(record.table, streams)
    if staging is None and streams:
        return None
    # An overwrite of no rows has no stream to tell it by: its swap record does.
    swap = read_swap(store, record_directory(record), record.batch_id)
    if swap is not None:
        staging = swap.staging
    return None if staging is None else StagedOverwrite(record, staging, swap)


def _location(given: str, what: str) -> str:
    """``given`` as a store opens it: an absolute path, or a URL of a scheme a store
    serves."""
    if scheme_of(given) is None and not os.path.isabs(given):
        raise UnresumableError(f"the {what} path {given} in the spec is not absolute")
    try:
        return check_location(given, what)
    except ConfigurationError as exc:
        raise UnresumableError(f"the {what} {given} cannot be read by this backend: {exc}") from exc


def _open(location: str, what: str) -> LedgerStore:
    try:
        return open_store(location)
    except (ConfigurationError, LedgerError) as exc:
        raise UnresumableError(f"cannot open the {what} {location}: {exc}") from exc


@contextmanager
def _reading(what: str, where: str) -> Iterator[None]:
    """Whatever keeps the ``what`` at ``where`` from being read is unresumable, named."""
    try:
        yield
    except UnresumableError:
        raise
    except LedgerStoreError as exc:
        at, cause = exc.where, exc.cause
        while isinstance(cause, LedgerStoreError):  # a client that could not be built
            at, cause = cause.where, cause.cause
        inside = "" if at == where else f" ({at})"
        raise UnresumableError(
            f"cannot read the {what} {where}{inside}: {_first_line(cause)}"
        ) from exc
    except LedgerError as exc:  # a record the contract cannot read; it names the record
        raise UnresumableError(str(exc)) from exc
    except Exception as exc:
        # A store's client may raise its own (Cloud Storage's NotFound, listing a bucket
        # that is not there); whatever it is, a resume that cannot read is not launched.
        logger.warning("cannot read the %s %s: %r", what, where, exc)
        raise UnresumableError(f"cannot read the {what} {where}: {_first_line(exc)}") from exc


def _first_line(cause: object) -> str:
    """A client's error in one line (object-store clients add pages of detail), with the
    store's own words where it answered with an XML error (S3, Azure: ``NoSuchBucket: The
    specified bucket does not exist``), which the first line leaves out."""
    text = str(cause).strip() or type(cause).__name__
    first = text.splitlines()[0].strip()
    if answered := _XML_ERROR.search(text):
        first = _XML_PROLOGUE.sub("", first) + f": {answered[1]}: {answered[2]}"
    return first if len(first) <= 400 else first[:400] + "..."


_XML_ERROR = re.compile(r"<Code>([^<]*)</Code>\s*<Message>([^<]*)</Message>")
_XML_PROLOGUE = re.compile(r":?\s*<\?xml[^>]*\?>\s*$")


def _readable_directory(path: Path, what: str) -> None:
    if not path.exists():
        raise UnresumableError(
            f"the {what} {path} does not exist on this backend's host; a resume needs the "
            "checkpoint where the run's job wrote it (a shared filesystem for a cluster, or "
            "the bucket's URL)"
        )
    if not path.is_dir():
        raise UnresumableError(f"the {what} {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UnresumableError(f"the {what} {path} is not readable by this backend")


def _highest_batch(store: LedgerStore, log: str) -> int | None:
    """The highest batch id in one of Spark's logs (``offsets``, ``commits``)."""
    numbers = [int(name) for name in store.list(log).files if name.isdigit()]
    return max(numbers) if numbers else None


def _check_owner(store: LedgerStore, run_id: str) -> None:
    """A checkpoint another run wrote is refused: resuming it would load its data again
    under this run's name."""
    found = store.read(RUN_ID_FILE)
    owner = found.data.decode(errors="replace").strip() if found is not None else None
    if owner and owner != run_id:
        raise UnresumableError(
            f"the checkpoint belongs to run {owner!r} ({store.where(RUN_ID_FILE)}), "
            f"not to run {run_id!r}"
        )
