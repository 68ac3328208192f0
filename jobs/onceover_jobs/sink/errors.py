"""Errors raised by the Onceover sink (the data plane).

The tree::

    OnceoverError (onceover.errors)
    ├── SinkError                   anything the sink raises on purpose
    │   ├── SinkOptionError         a write option is missing or wrong; a ValueError
    │   │   └── CheckFailedError    check=true: a check before the write failed (names each)
    │   ├── LineageConfigError      the OpenLineage configuration is wrong (names the field
    │   │                           and the file); a ValueError
    │   ├── TableNotFoundError      the target table does not exist; also a ValueError
    │   ├── SchemaMismatchError     DataFrame and table disagree (names columns); a ValueError
    │   ├── AppendRejectedError     BigQuery refused an append for good (names stream, batch, rows)
    │   │   ├── RowsRejectedError       rows BigQuery refused, no dead-letter table (names each)
    │   │   ├── DuplicateAppendError    ALREADY_EXISTS for a request that was never sent before
    │   │   └── StreamUnusableError     the stream takes no more appends (finalized, gone, ...)
    │   ├── CallRejectedError       a unary call (create, get, finalize, flush, commit) refused
    │   │   ├── CallNotFoundError       the stream or table does not exist (NOT_FOUND, or as
    │   │   │                           real BigQuery also says it); also google.api_core
    │   │   │                           NotFound (wire.unary)
    │   │   └── CallDeniedError         PERMISSION_DENIED: no access, or it does not exist
    │   ├── NonDeterministicInputError  a retry's rows are not the rows its partition sent
    │   ├── RetryDeadlineError      transient failures outlasted the retry deadline
    │   ├── RowCountMismatchError   a finalized stream holds other than the rows sent
    │   ├── CommitLimitError        a batch needs more streams than one commit takes; a ValueError
    │   ├── PendingBufferError      a pending batch's stream was finalized over ~4 h ago
    │   └── CommitRejectedError     BatchCommitWriteStreams refused the batch
    │       └── StreamsUncommittableError   for good: gone, or never finalized
    │           └── StreamsGoneError        NOT_FOUND: expired, or forgotten
    └── LedgerError (onceover.errors)   the ledger is unreadable or contradicts BigQuery
        ├── CheckpointResetError    the ledger knows batches Spark's checkpoint does not
        ├── LedgerNotSharedError    an executor cannot see the driver's ledger
        ├── PartitionTakenError     another attempt of the partition advanced it first
        ├── IntentUnresolvableError an intent's commit was asked for, its streams are gone
        └── ConcurrentDriverError   another driver still runs the same query or run

``LedgerError`` is the contract's (what :mod:`onceover.ledger_files` raises where a
ledger file cannot be read), so both planes catch the one class; the sink raises it
too where it cannot write one. Its subclasses here are the sink's refusals, each a
:class:`SinkError` as well.

google-api-core and gRPC errors are mapped to these at one boundary (the appender for AppendRows,
:mod:`onceover_jobs.sink.wire.unary` for every other call, and the committer) with ``raise ... from
exc``. Only failures a retry can fix are retried (the classes are in
:mod:`onceover_jobs.sink.wire.appender`); any other fails at once with one of these, naming the
call, the stream and its table, the gRPC code, the server's message and the ``StorageError`` code
when BigQuery sent one (:mod:`onceover_jobs.sink.wire.storage_errors`). Option and schema errors are
``ValueError`` as well, which is what Spark users expect from a bad ``.option(...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onceover.errors import LedgerError as LedgerError  # noqa: PLC0414 - re-exported
from onceover.errors import OnceoverError


class SinkError(OnceoverError):
    """Base class of every error the sink raises on purpose."""


class SinkOptionError(SinkError, ValueError):
    """A write option is missing or wrong; the message names the option."""

    def __init__(self, option: str, problem: str) -> None:
        self.option = option
        super().__init__(f"onceover option {option!r}: {problem}")


class CheckFailedError(SinkOptionError):
    """A write given ``check=true`` failed a check (``onceover_jobs.preflight``) before
    anything was created or written; the message names each failed check and its fix."""

    def __init__(self, failed: Sequence[tuple[str, str, str]]) -> None:
        self.checks = tuple(name for name, _, _ in failed)
        said = "; ".join(f"{name}: {reason} (fix: {fix})" for name, reason, fix in failed)
        super().__init__(
            "check",
            f"{len(failed)} of the checks before the write failed, so nothing was created "
            f"or written. {said}. `onceover check` runs the same checks from a shell",
        )


class LineageConfigError(SinkError, ValueError):
    """The OpenLineage configuration (a config file, or the variables) is wrong; the
    message names the field and where it was read (onceover_jobs.sink.job.lineage_config)."""

    def __init__(self, field: str, problem: str, source: str) -> None:
        self.field = field
        self.source = source
        where = f" in {source}" if source else ""
        what = f" {field}:" if field else ""
        super().__init__(f"OpenLineage configuration{where}:{what} {problem}")


class TableNotFoundError(SinkError, ValueError):
    """The target table does not exist and may not be created (``createDisposition`` is
    ``CREATE_NEVER``), or its dataset does not exist (the sink never creates datasets)."""


class SchemaMismatchError(SinkError, ValueError):
    """The DataFrame's columns do not fit the table; the message names every column at fault."""

    def __init__(self, table: str, problems: list[str]) -> None:
        self.table = table
        self.problems = problems
        super().__init__(f"schema of the DataFrame does not fit {table}: " + "; ".join(problems))


class AppendRejectedError(SinkError):
    """BigQuery refused an append for a reason a retry cannot fix (INVALID_ARGUMENT, row
    errors, NOT_FOUND, PERMISSION_DENIED, ...).

    Raised by the appender, it says which stream and table (``stream``, ``table``), the
    gRPC code by name (``grpc_code``) and the ``StorageError`` code when BigQuery sent one
    (``storage_code``); raised before anything was sent (a request over the size cap),
    these are None. Every one is keyword-only with a default, so the error pickles
    with its message alone.
    """

    def __init__(
        self,
        message: str,
        *,
        stream: str | None = None,
        table: str | None = None,
        grpc_code: str | None = None,
        storage_code: str | None = None,
    ) -> None:
        self.stream = stream
        self.table = table
        self.grpc_code = grpc_code
        self.storage_code = storage_code
        super().__init__(message)


class ArrowRefusedError(AppendRejectedError):
    """BigQuery refused the first append of a stream for its Arrow format (not its rows):
    nothing of it was applied, and the task writes the partition again as proto rows
    (onceover_jobs.sink.modes.row_format)."""


class RowsRejectedError(AppendRejectedError):
    """BigQuery refused rows of a request (``row_errors``) and the write has no
    dead-letter table: the message names each row (partition, offset, key, column,
    BigQuery's message: the first 20, then a count); ``rows`` holds them all
    (:class:`onceover_jobs.sink.rows.dead_letter.RefusedRow`)."""

    def __init__(self, message: str, *, rows: Sequence[Any] = (), **where: Any) -> None:
        self.rows = list(rows)
        super().__init__(message, grpc_code="INVALID_ARGUMENT", **where)


class RowsOutsidePartitionError(SinkError, ValueError):
    """A row of a ``datePartition`` write falls outside that partition (its partitioning
    column NULL or another date): BigQuery takes only the partition's rows into it. The
    write is pending, so nothing of it is committed."""


class ChangeRowsError(SinkError, ValueError):
    """A CDC write's row cannot be a change (a NULL primary key column, a change type other
    than UPSERT and DELETE, a malformed sequence number): the write stops, naming them,
    before those rows are sent (onceover_jobs.sink.rows.change_capture)."""


class RedriveRefusedError(SinkError, ValueError):
    """A re-drive that could send a row twice or lose one: of a re-drive's own run, from
    another dead-letter table than the unfinished one it must finish, without a ledger
    (onceover_jobs.redrive)."""


class DuplicateAppendError(AppendRejectedError):
    """ALREADY_EXISTS for a request that was not a retry of the same rows: offsets are wrong."""


class StreamUnusableError(AppendRejectedError):
    """The stream can take no more appends, whatever is retried: BigQuery answered with
    ``storage_code`` ``STREAM_FINALIZED``, ``STREAM_NOT_FOUND``, ``INVALID_STREAM_STATE``
    or ``STREAM_ALREADY_COMMITTED``. The rows of the request it names were not written
    to ``stream``; a caller that may move on to a new stream can do so (a PENDING stream
    is written from its first row again, never continued on another)."""

    stream: str
    storage_code: str

    def __init__(
        self,
        message: str,
        *,
        stream: str = "",
        table: str | None = None,
        grpc_code: str | None = None,
        storage_code: str = "",
    ) -> None:
        super().__init__(
            message, stream=stream, table=table, grpc_code=grpc_code, storage_code=storage_code
        )


class CallRejectedError(SinkError):
    """A unary Storage Write API call (CreateWriteStream, GetWriteStream,
    FinalizeWriteStream, FlushRows, BatchCommitWriteStreams) failed for a reason a retry
    cannot fix (PERMISSION_DENIED, INVALID_ARGUMENT, FAILED_PRECONDITION, ...).

    ``what`` is the call, ``target`` the stream or table resource it was on (``table`` its
    ``project.dataset.table``), ``grpc_code`` the gRPC code by name, ``storage_code`` the
    ``StorageError`` code when BigQuery sent one and ``server_message`` what the server said.
    ``message`` is the whole text (as on google-api-core's errors, which code catching those reads).
    NOT_FOUND raises the subclass ``onceover_jobs.sink.wire.unary.CallNotFoundError``, also a
    google-api-core ``NotFound``.
    """

    def __init__(
        self,
        message: str,
        *,
        what: str = "",
        target: str | None = None,
        table: str | None = None,
        grpc_code: str = "UNKNOWN",
        storage_code: str | None = None,
        server_message: str = "",
    ) -> None:
        self.what = what
        self.target = target
        self.table = table
        self.grpc_code = grpc_code
        self.storage_code = storage_code
        self.server_message = server_message
        super().__init__(message)
        self.message = message


class RetryDeadlineError(SinkError):
    """Transient failures (UNAVAILABLE, INTERNAL, ...) went on past the retry deadline."""


class RowCountMismatchError(SinkError):
    """``FinalizeWriteStream`` reported a row count other than the rows the task sent."""


class CommitRejectedError(SinkError):
    """``BatchCommitWriteStreams`` refused the batch; nothing of it is visible."""


class CheckpointResetError(LedgerError, SinkError):
    """Spark's checkpoint was reset while the ledger beside it was kept: the batch ids the
    ledger knows now name other data. Raised before anything is written."""


class LedgerNotSharedError(LedgerError, SinkError):
    """A task cannot see the ledger the driver writes: the executors would each keep
    their own, and a retried task would not find what its first attempt recorded.
    Raised before the task writes a row."""


class StreamsUncommittableError(CommitRejectedError):
    """BigQuery can never commit these streams (not found, wrong type or state): an
    intent recorded with them is settled by writing the batch again."""


class StreamFinalizedError(StreamsUncommittableError):
    """FlushRows on a BUFFERED stream that was finalized: BigQuery flushes nothing more of
    it, so rows past its last flush are never visible (Apache Beam reads an
    INVALID_ARGUMENT on a flush so; the local BigQuery answers OUT_OF_RANGE with
    ``STREAM_FINALIZED``)."""


class StreamTruncatedError(StreamsUncommittableError):
    """FlushRows to an offset "beyond the end of the stream": the stream holds fewer rows
    than the tasks reported acknowledged, so the batch's rows there cannot be flushed."""


class StreamsGoneError(StreamsUncommittableError):
    """BigQuery no longer knows the streams (NOT_FOUND): never committed and expired, or
    forgotten long after a commit; the ledger tells which (BatchRecord.commit_started_at)."""


class IntentUnresolvableError(LedgerError, SinkError):
    """An intent whose commit was asked for, and whose streams BigQuery no longer
    knows: whether its rows are in the table cannot be told by the sink. It stops,
    saying what is known and how to settle it (``python -m onceover_jobs.sink.settle``)."""


class NonDeterministicInputError(SinkError):
    """Committed mode: a retried task's rows are not those an earlier attempt of its
    partition sent at the same offsets (their digests differ, or there are fewer). Rows
    already visible would mix with others; the task stops before sending one."""


class PartitionTakenError(LedgerError, SinkError):
    """Committed mode: another attempt of the same partition (speculation, a zombie
    task) saved its progress first; this attempt stops rather than overwrite it."""


class ConcurrentDriverError(LedgerError, SinkError):
    """Another driver, still running on this host, writes the same query (checkpoint)
    or run id. Raised on the driver before any task writes a row."""


class OverwriteError(SinkError):
    """The transaction replacing a table's rows failed; it rolled back (old rows kept)."""


class PendingBufferError(SinkError):
    """A pending batch's stream was finalized longer ago than BigQuery keeps its rows for
    a commit (4 hours): refused before its intent (onceover_jobs.sink.wire.commit_limits)."""


class CommitLimitError(SinkError, ValueError):
    """A batch needs more than one ``BatchCommitWriteStreams`` takes (10,000 streams);
    refused before anything of it is committed (onceover_jobs.sink.wire.commit_limits)."""


SPARK_CONCURRENT_QUERY = ("CONCURRENT_STREAM_LOG_UPDATE", "ConcurrentModificationException")
"""What Spark raises in the second of two drivers that add the same entry to one
checkpoint's offsets or commits log ("Multiple streaming jobs detected for N"; the
error condition, and the Java exception older Sparks threw): it loses before its batch
runs, or after the sink found the batch committed by the other."""


def refused_as_concurrent(exc: BaseException) -> bool:
    """Whether ``exc`` is (or wraps) a :class:`ConcurrentDriverError`, or Spark's own
    refusal of a second driver on one checkpoint. Spark hands an error the data source
    raised on the driver back in an exception of its own, with the Python traceback as
    text, so the names are looked for in that text."""
    text = str(exc)
    return (
        isinstance(exc, ConcurrentDriverError)
        or ConcurrentDriverError.__name__ in text
        or any(name in text for name in SPARK_CONCURRENT_QUERY)
    )
