"""The one interface every write mode implements, and what the committer lends a mode.

A mode answers four questions, each a method, and nobody else answers them:

- how a task writes its partition (:meth:`WriteMode.write`, on an executor): which stream,
  from which offset, what a retried attempt owes an earlier one;
- how the driver publishes a batch once its intent is in the ledger
  (:meth:`WriteMode.publish`): ``BatchCommitWriteStreams``, a flush of each stream, or
  nothing (its rows were visible as they were appended); what must hold before the
  intent is written (:meth:`WriteMode.prepare`);
- how a replay settles an intent it finds without its mark (:meth:`WriteMode.settle`);
- what an abort leaves, and why (:meth:`WriteMode.aborted`).

What a mode *is* (its stream type, whether it keeps a stream per partition, whether rows
are visible before the commit, how it publishes) is its :class:`~onceover.modes.ModeTraits`
in the contract, which the control plane and the tools read too. The protocol
(:mod:`onceover_jobs.sink.protocol`) asks the mode and never compares its name.

Every mode module is imported by the driver's commit worker, which must stay light (no
pyarrow, no client library, no pydantic): what only a task needs comes from
:mod:`onceover_jobs.sink.modes.staging`, imported in :meth:`WriteMode.write_partition`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from onceover.ledger_files import BatchRecord, StreamCommit
from onceover.modes import ModeTraits
from onceover_jobs.sink.errors import IntentUnresolvableError, StreamsGoneError

if TYPE_CHECKING:
    import pyarrow as pa

    from onceover_jobs.sink.job.results import TaskResult
    from onceover_jobs.sink.job.sink_job import SinkJob
    from onceover_jobs.sink.ledger.records import Ledger
    from onceover_jobs.sink.modes.staging import Stage, TaskContextInfo
    from onceover_jobs.sink.reporting.telemetry import Telemetry
    from onceover_jobs.sink.wire.write_api import WriteApi


class CommitContext(Protocol):
    """What the committer (:class:`onceover_jobs.sink.protocol.committer.BatchCommitter`)
    lends a mode while it commits, settles or aborts one batch of one write."""

    job: SinkJob
    ledger: Ledger
    batch_id: int | None
    telemetry: Telemetry

    @property
    def label(self) -> str:
        """The batch as messages name it."""

    @property
    def client(self) -> WriteApi:
        """The driver's Storage Write client (kept by the commit worker)."""

    def commit_started(self, record: BatchRecord) -> BatchRecord:
        """Record in the ledger that a commit (or flush) of ``record`` is being asked for:
        from then on, streams BigQuery no longer knows cannot be written again."""

    def commit_dead_letters(self, record: BatchRecord, *, resolving: bool = False) -> None:
        """Commit the batch's set-aside rows (their own commit: one commit takes one
        table); ``resolving``: only if BigQuery shows them uncommitted."""

    def settled(self, record: BatchRecord, *, commit_time: str | None) -> BatchRecord:
        """Mark an intent an earlier attempt left committed, and say so."""

    def write_again(
        self, record: BatchRecord, exc: Exception, replay: Sequence[StreamCommit] = ()
    ) -> BatchRecord:
        """The intent's streams can never be committed and never were: the replay writes
        the batch again (its streams replace the intent's)."""

    def unresolvable(self, record: BatchRecord, exc: Exception) -> str:
        """What is known of an intent no one can settle from BigQuery, and what to do."""

    def orphaned(self, stream: StreamCommit, reason: str) -> None:
        """Report ``stream`` as never to be committed."""


class WriteMode(ABC):
    """One way of writing a batch into BigQuery (``mode`` option); a stateless value."""

    traits: ClassVar[ModeTraits]

    @property
    def name(self) -> str:
        return self.traits.mode

    # -- a task (executor) ------------------------------------------------------------

    def write_partition(
        self,
        job: SinkJob,
        client: WriteApi,
        batches: Iterator[pa.RecordBatch],
        task: TaskContextInfo,
        telemetry: Telemetry,
    ) -> TaskResult:
        """Write this task's rows; return what the driver must commit."""
        # Here, not at the top: the task side imports pyarrow, the commit worker must not.
        from onceover_jobs.sink.modes.staging import Stage

        return self.write(Stage(job, client, task, telemetry), batches)

    @abstractmethod
    def write(self, stage: Stage, batches: Iterator[pa.RecordBatch]) -> TaskResult:
        """Stage the partition's rows in a stream of this mode."""

    # -- the driver -------------------------------------------------------------------

    def prepare(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> None:
        """Before the batch's intent is written: refuse (or finish) what publishing needs.
        Nothing, unless the mode says otherwise."""
        return None

    @abstractmethod
    def publish(self, ctx: CommitContext, intent: BatchRecord) -> str | None:
        """Make the rows of a batch with streams visible, once its intent is in the ledger
        (and its set-aside rows committed); returns BigQuery's commit time where it gives
        one."""

    def settle(
        self, ctx: CommitContext, record: BatchRecord, replay: Sequence[StreamCommit]
    ) -> BatchRecord:
        """An intent without its mark: committed in BigQuery? Mark it and return it; else
        return the intent as the ledger now holds it, for the replay (``replay``: its
        streams) to replace."""
        if not record.streams:  # nothing of the batch was to be published
            return settle_as_appended(ctx, record)
        return self.settle_streams(ctx, record, replay)

    @abstractmethod
    def settle_streams(
        self, ctx: CommitContext, record: BatchRecord, replay: Sequence[StreamCommit]
    ) -> BatchRecord:
        """:meth:`settle` for an intent that names streams."""

    @abstractmethod
    def aborted(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> str:
        """Spark gave up on a batch the ledger holds no commit of: report what its
        streams are now, and return why the abort leaves what it leaves."""


def settle_as_appended(ctx: CommitContext, record: BatchRecord) -> BatchRecord:
    """Settle an intent whose rows were visible as they were appended (or that had none to
    publish): it is as good as done, once its set-aside rows are committed."""
    try:
        ctx.commit_dead_letters(record, resolving=True)
    except StreamsGoneError as exc:
        raise IntentUnresolvableError(ctx.unresolvable(record, exc)) from exc
    return ctx.settled(record, commit_time=None)


class VisibleAsAppended(WriteMode):
    """A mode whose rows are visible as each append is acknowledged (``publish`` is
    ``none``): nothing to publish at the end of a batch, an intent settled as done, and an
    abort leaves what was appended where it is."""

    def publish(self, ctx: CommitContext, intent: BatchRecord) -> str | None:
        return None

    def settle_streams(
        self, ctx: CommitContext, record: BatchRecord, replay: Sequence[StreamCommit]
    ) -> BatchRecord:
        return settle_as_appended(ctx, record)

    def aborted(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> str:
        return (
            "aborted; rows already visible stay in their streams and a replay of this batch "
            "goes on from the recorded offsets"
        )
