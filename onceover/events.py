"""The event schema both planes share: what jobs send to ``POST /api/events``.

Version 1. Every event carries ``schema_version``, a deterministic ``id`` (the same
fact sent twice has the same id, so the control plane stores it once), the ``type``
that selects its shape, the time it happened and the run and table it belongs to.

=============================  ======================================================
Driver (run and batch)         ``run_started`` (with the job's spec, for resume),
                               ``run_heartbeat``, ``run_finished``, ``run_failed``,
                               ``batch_intent``, ``batch_committed``,
                               ``batch_skipped_duplicate``, ``batch_aborted``,
                               ``overwrite_swap_started``, ``overwrite_swapped``
Executors (one stream each)    ``stream_created``, ``append_acknowledged``,
                               ``append_already_exists``, ``append_out_of_range``,
                               ``append_error``, ``rows_rejected``,
                               ``stream_finalized``, ``stream_orphaned``
=============================  ======================================================

Batch and stream events carry the sink's ``mode``; a stream's ``stream_type`` follows
from it:

=============  ===============  =======================================================
``mode``       ``stream_type``  rows become visible
=============  ===============  =======================================================
``pending``    ``PENDING``      at the batch's ``BatchCommitWriteStreams``, all at once
                                (a stream per task attempt, finalized first)
``buffered``   ``BUFFERED``     when the driver flushes each stream (``FlushRows``) to
                                the batch's end, after ``batch_intent`` (a stream per
                                partition, reused across micro-batches)
``committed``  ``COMMITTED``    at each append (a stream per partition, reused across
                                micro-batches)
``default``    ``DEFAULT``      at each append to the ``_default`` stream (at least once)
=============  ===============  =======================================================

Only ``pending`` streams are committed by ``BatchCommitWriteStreams``; ``buffered``
streams are never finalized. A ``buffered`` or ``committed`` batch left an intent may
have rows in the table already (flushed on some of its streams, or appended, before the
driver stopped); a replay of the batch finishes it.

ALREADY_EXISTS is deduplication doing its job (an identical retry after a lost
acknowledgement); OUT_OF_RANGE is a gap in the client's offsets, a correctness alarm.
Rows BigQuery refuses (a value too long for ``STRING(n)``, out of a ``NUMERIC(p, s)``
range, a NULL in a REQUIRED column) are named in ``rows_rejected`` by the task that sent
them, every time it sent them (a retried task names them again). With a dead-letter
table they are set aside there and the rest of the request is sent again; the batch's
``batch_intent`` and ``batch_committed`` then carry ``dead_lettered_rows`` (counted
once, whatever was retried) and the ``dead_letter_streams`` committed with the batch.
Without one the task fails naming them.

A ``mode("overwrite")`` write commits its batch to a staging table (its streams name
that table, not ``table``), then replaces the table's rows in the write's scope with them
in one transaction, a BigQuery job whose id is fixed before it is asked for:
``overwrite_swap_started`` says that job is recorded and about to be asked for (again,
after a failed one, under the next id), ``overwrite_swapped`` that it is done. A batch
committed without either stopped with its rows staged; a swap started and not swapped
stopped with its job asked for, which ran once or not at all.

Adding an optional field keeps version 1; renaming or removing one makes version 2.
A new value of ``mode`` or ``stream_type`` keeps version 1 too, but a control plane
older than the value refuses the events carrying it (upgrade the control plane first).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from onceover.identifiers import COLUMN_NAME_RE
from onceover.key_checksum import BUCKET_LIMIT, KEY_BUCKETS
from onceover.modes import Mode as Mode  # noqa: PLC0414 - part of the event schema
from onceover.modes import StreamType as StreamType  # noqa: PLC0414 - likewise

SCHEMA_VERSION = 1


_ID = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$", description="deterministic event id")]
_NAME = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@/=+-]+$")]
_WRITE = Annotated[
    str | None,
    Field(
        default=None,
        max_length=140,
        pattern=r"^(0|[1-9][0-9]{0,8}|id-[A-Za-z0-9._:-]{1,128})$",
        description=(
            "which of the foreachBatch call's (or the batch run's) writes to the table: "
            "its ordinal ('0', '1', ...) or 'id-<write_id>'; none for the streaming sink, "
            "whose micro-batch is its write"
        ),
    ),
]
_TABLE = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9.:_-]+\.[A-Za-z0-9_]+\.[A-Za-z0-9_$-]+$",
        max_length=1100,
        description="project.dataset.table",
    ),
]
_COUNT = Annotated[int, Field(ge=0)]
_COLUMN_PATH = Annotated[
    str,
    Field(
        max_length=1000,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        description="a column, or a nested field as column.field",
    ),
]


def event_id(*parts: object) -> str:
    """A deterministic id from the facts that make an event unique (32 hex digits)."""
    text = "\x1f".join("" if part is None else str(part) for part in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def new_attempt_id() -> str:
    """An id for one launch of a job (its run id stays the same across launches)."""
    return uuid.uuid4().hex


def now() -> datetime:
    return datetime.now(UTC)


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    id: _ID
    time: AwareDatetime
    run_id: _NAME
    table: _TABLE
    job: Annotated[str, Field(max_length=200)] | None = None


class AutoResume(BaseModel):
    """The job's own policy: the control plane resumes it after a failure by itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(
        ge=1, le=100, description="attempts in all, the first one included, before giving up"
    )
    backoff_s: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="wait before the first automatic resume; doubled before each one after it",
    )


LEGACY_JOB_PACKAGES = {"jobs.": "onceover_jobs."}
"""Old job module prefixes and the names they have now."""


class JobSpec(BaseModel):
    """How to launch the job again: ``python -m <module> <args...>`` in ``cwd``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    module: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$", max_length=200)]
    args: list[Annotated[str, Field(max_length=4096)]] = Field(max_length=200)
    checkpoint: str | None = None
    ledger: str | None = None
    cwd: Annotated[str, Field(max_length=4096)] | None = Field(
        default=None, description="the directory the job was started in (relative arguments)"
    )
    auto_resume: AutoResume | None = None

    @field_validator("module")
    @classmethod
    def _current_module_name(cls, module: str) -> str:
        # Runs recorded before the data plane's package was named onceover_jobs name
        # their job ``jobs.<name>``; they stay resumable as the same module.
        for old, new in LEGACY_JOB_PACKAGES.items():
            if module.startswith(old):
                return new + module[len(old) :]
        return module


class StreamRows(BaseModel):
    """One stream of a batch with what it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stream: _NAME
    rows: _COUNT
    bytes: _COUNT = 0
    partition: _COUNT | None = None
    attempt: _COUNT | None = None


# -- driver: runs -------------------------------------------------------------------


class _RunEvent(_Event):
    attempt_id: _NAME


class RunStarted(_RunEvent):
    type: Literal["run_started"] = "run_started"
    mode: Mode
    spec: JobSpec | None = None
    query_id: _NAME | None = None


class RunHeartbeat(_RunEvent):
    type: Literal["run_heartbeat"] = "run_heartbeat"
    rows_committed: _COUNT
    batches_committed: _COUNT


class RunFinished(_RunEvent):
    type: Literal["run_finished"] = "run_finished"
    rows_committed: _COUNT
    batches_committed: _COUNT


class RunFailed(_RunEvent):
    type: Literal["run_failed"] = "run_failed"
    error: Annotated[str, Field(max_length=4000)]
    rows_committed: _COUNT | None = None
    refused: bool = Field(
        default=False,
        description=(
            "this attempt was refused before writing a row because another driver still "
            "runs the same query or run id; that driver goes on, so the run has not failed"
        ),
    )


# -- driver: batches ----------------------------------------------------------------


class _BatchEvent(_Event):
    mode: Mode
    query_id: _NAME
    batch_id: int | None = Field(default=None, ge=0, description="None for a batch write")
    write: _WRITE = None
    key: Annotated[str, Field(pattern=COLUMN_NAME_RE.pattern)] | None = Field(
        default=None, description="the column identifying a row, if the write named one"
    )
    stamped: bool = Field(
        default=False, description="rows carry _onceover_run_id and _onceover_batch_id"
    )


class _DeadLetters(BaseModel):
    """What a batch set aside in its dead-letter table (none without one)."""

    dead_lettered_rows: _COUNT = Field(
        default=0, description="rows BigQuery refused, written to the dead-letter table"
    )
    dead_letter_table: _TABLE | None = None
    dead_letter_streams: list[StreamRows] = Field(
        default=[], description="the PENDING streams on the dead-letter table"
    )


class _Changes(BaseModel):
    """A change data capture write's rows by kind (none for a plain append)."""

    upserts: _COUNT | None = Field(
        default=None, description="CDC writes: the batch's UPSERT rows; null for appends"
    )
    deletes: _COUNT | None = Field(
        default=None, description="CDC writes: the batch's DELETE rows; null for appends"
    )


class BatchIntent(_BatchEvent, _DeadLetters, _Changes):
    type: Literal["batch_intent"] = "batch_intent"
    streams: list[StreamRows]
    expected_rows: _COUNT = Field(description="rows for the target table (set-aside rows apart)")


_TALLY_COUNT = Annotated[int, Field(ge=0, le=BUCKET_LIMIT)]
KeyBucketRow = tuple[
    Annotated[int, Field(ge=0, lt=KEY_BUCKETS)],
    _TALLY_COUNT,
    _TALLY_COUNT,
    Annotated[str, Field(pattern=r"^-?[0-9]{1,40}$")] | None,
]
"""One bucket of a key tally (onceover.key_checksum.KeyBucket)."""


class BatchCommitted(_BatchEvent, _DeadLetters, _Changes):
    """The batch's receipt: which rows, from which source offsets, committed when."""

    type: Literal["batch_committed"] = "batch_committed"
    streams: list[StreamRows]
    rows: _COUNT = Field(description="rows committed to the target table")
    duration_ms: Annotated[float, Field(ge=0)] | None = None
    resolved: bool = Field(
        default=False, description="committed by an earlier attempt, found on replay"
    )
    commit_time: AwareDatetime | None = Field(
        default=None,
        description="when the rows became the table's: pending, BigQuery's commit time "
        "(BatchCommitWriteStreams); buffered, when the driver's last FlushRows returned "
        "(BigQuery reports no time for a flush); committed, when the driver recorded the "
        "batch committed (rows were visible as they were appended)",
    )
    source_offsets: list[Annotated[str, Field(max_length=8000)]] | None = Field(
        default=None,
        max_length=64,
        description="streaming: the batch's entry in Spark's offsets log, one offset per "
        "source as Spark wrote it (JSON text); null for batch and foreachBatch writes",
    )
    key_checksum: Annotated[int, Field(ge=0)] | None = Field(
        default=None,
        description="stamped writes with an INT64 or STRING key: the sum over the "
        "batch's rows of the first 32 bits of MD5(CAST(key AS STRING)) "
        "(onceover.key_checksum), so one aggregate query checks the batch in place",
    )
    key_buckets: list[KeyBucketRow] | None = Field(
        default=None,
        max_length=KEY_BUCKETS,
        description="with key_checksum: the batch's key tally, one item per non-empty "
        "bucket (byte 4 of MD5(CAST(key AS STRING))): [bucket, rows, checksum, sum of the "
        "key values as decimal text for INT64 keys, else null] (onceover.key_checksum); "
        "reconciliation compares it bucket by bucket and names a missing key from it",
    )


class BatchSkippedDuplicate(_BatchEvent):
    type: Literal["batch_skipped_duplicate"] = "batch_skipped_duplicate"
    rows: _COUNT = Field(description="rows the replay wrote again on streams never committed")
    orphaned_streams: list[_NAME] = []


class BatchAborted(_BatchEvent):
    type: Literal["batch_aborted"] = "batch_aborted"
    streams: list[StreamRows]
    reason: Annotated[str, Field(max_length=4000)]


# -- driver: an overwrite's swap ----------------------------------------------------


SWAP_PARTITIONS_LISTED = 100
"""Partitions a swap event names (``partition_count`` counts them all)."""
_PARTITION_ID = Annotated[
    str,
    Field(
        pattern=r"^(-?[0-9]{1,20}|__NULL__|__UNPARTITIONED__)$",
        description="a partition as BigQuery names it: 20261102 (a day), 2026110212 (an "
        "hour), 202611, 2026, an integer range's start, __NULL__, __UNPARTITIONED__",
    ),
]


class _SwapEvent(_BatchEvent):
    """One transaction replacing the table's rows in the scope with the staged ones."""

    staging: _TABLE = Field(description="the staging table the batch's rows were committed to")
    scope: Annotated[str, Field(max_length=300, description="what the swap replaces, in words")]
    job_id: Annotated[
        str,
        Field(
            pattern=r"^[A-Za-z0-9_-]{1,1024}$",
            description="the BigQuery job of the transaction, fixed before it is asked for",
        ),
    ]
    attempt: _COUNT = Field(description="0, then 1, ... after a job that failed")
    staged_rows: _COUNT = Field(description="the rows inserted: every row staged")
    rows_replaced: _COUNT | None = Field(
        default=None,
        description="the table's rows in the scope, counted as the swap's first attempt began",
    )
    partitions: Annotated[list[_PARTITION_ID], Field(max_length=SWAP_PARTITIONS_LISTED)] | None = (
        Field(
            default=None,
            description="the partitions replaced (the first 100); null: the whole table",
        )
    )
    partition_count: _COUNT | None = Field(
        default=None, description="the partitions replaced, all of them; null: the whole table"
    )


class OverwriteSwapStarted(_SwapEvent):
    type: Literal["overwrite_swap_started"] = "overwrite_swap_started"


class OverwriteSwapped(_SwapEvent):
    type: Literal["overwrite_swapped"] = "overwrite_swapped"
    swapped_at: AwareDatetime = Field(description="when the driver saw the transaction done")


# -- executors: streams -------------------------------------------------------------


class _StreamEvent(_Event):
    mode: Mode
    query_id: _NAME
    batch_id: int | None = Field(default=None, ge=0)
    write: _WRITE = None
    partition: _COUNT
    attempt: _COUNT
    stream: _NAME
    stream_type: StreamType


class StreamCreated(_StreamEvent):
    type: Literal["stream_created"] = "stream_created"
    resumed: bool = Field(default=False, description="a retried task found this stream again")


class AppendAcknowledged(_StreamEvent):
    type: Literal["append_acknowledged"] = "append_acknowledged"
    offset: _COUNT | None
    rows: _COUNT
    bytes: _COUNT
    latency_ms: Annotated[float, Field(ge=0)]


class AppendAlreadyExists(_StreamEvent):
    type: Literal["append_already_exists"] = "append_already_exists"
    offset: _COUNT
    rows: _COUNT
    bytes: _COUNT = 0


class AppendOutOfRange(_StreamEvent):
    type: Literal["append_out_of_range"] = "append_out_of_range"
    offset: _COUNT
    rows: _COUNT
    message: Annotated[str, Field(max_length=4000)] = ""


class AppendError(_StreamEvent):
    type: Literal["append_error"] = "append_error"
    code: Annotated[str, Field(pattern=r"^[A-Z_]+$", max_length=40)]
    offset: _COUNT | None
    rows: _COUNT
    message: Annotated[str, Field(max_length=4000)] = ""
    retrying: bool


class AppendThrottled(_StreamEvent):
    """BigQuery's throughput quota refused an append (RESOURCE_EXHAUSTED): the stream waits
    for the quota to refill, up to ``wait_limit_s``. Sent once per spell of refusals; each
    try is an ``append_error`` as well."""

    type: Literal["append_throttled"] = "append_throttled"
    offset: _COUNT | None
    rows: _COUNT
    message: Annotated[str, Field(max_length=4000)] = ""
    wait_limit_s: Annotated[float, Field(ge=0)]


class AppendFormatRefused(_StreamEvent):
    """BigQuery refused the stream's first append for its row format (Arrow): nothing of
    it was applied, and the job's rows go as ``sent_as`` from then on, in the process that
    met it. Sent once per process and project."""

    type: Literal["append_format_refused"] = "append_format_refused"
    refused: Literal["arrow"] = "arrow"
    sent_as: Literal["proto"] = "proto"
    message: Annotated[str, Field(max_length=4000)] = ""


ROW_REJECTION_SAMPLES = 20
"""Rows a ``rows_rejected`` event names (its ``rows`` counts them all)."""


class RowRejection(BaseModel):
    """One row BigQuery refused, named as a user finds it again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offset: _COUNT = Field(description="the row's offset in its partition (0 = first row)")
    key: Annotated[str, Field(max_length=1000)] | None = Field(
        default=None, description="the write's key column's value, as text"
    )
    column: _COLUMN_PATH | None = Field(default=None, description="the column BigQuery named")
    reason: Annotated[str, Field(max_length=1000)]


class RowsRejected(_StreamEvent):
    type: Literal["rows_rejected"] = "rows_rejected"
    offset: _COUNT = Field(description="the stream offset of the request BigQuery refused")
    rows: _COUNT = Field(description="rows of the request BigQuery refused")
    dead_letter_table: _TABLE | None = Field(
        default=None,
        description="where they were set aside; none: no dead-letter table, the task fails",
    )
    samples: Annotated[list[RowRejection], Field(max_length=ROW_REJECTION_SAMPLES)] = []


class StreamFinalized(_StreamEvent):
    type: Literal["stream_finalized"] = "stream_finalized"
    row_count: _COUNT


class StreamOrphaned(_StreamEvent):
    type: Literal["stream_orphaned"] = "stream_orphaned"
    reason: Annotated[str, Field(max_length=4000)]
    rows: _COUNT = 0


Event = Annotated[
    RunStarted
    | RunHeartbeat
    | RunFinished
    | RunFailed
    | BatchIntent
    | BatchCommitted
    | BatchSkippedDuplicate
    | BatchAborted
    | OverwriteSwapStarted
    | OverwriteSwapped
    | StreamCreated
    | AppendAcknowledged
    | AppendAlreadyExists
    | AppendOutOfRange
    | AppendError
    | AppendThrottled
    | AppendFormatRefused
    | RowsRejected
    | StreamFinalized
    | StreamOrphaned,
    Field(discriminator="type"),
]
"""Any event of version 1, told apart by ``type``."""

EVENT_LIST: TypeAdapter[list[Event]] = TypeAdapter(list[Event])
"""Validates a JSON batch as ``POST /api/events`` receives it."""

RunEvent = RunStarted | RunHeartbeat | RunFinished | RunFailed
"""Events the driver sends about a launch of the job (they carry ``attempt_id``)."""
SwapEvent = OverwriteSwapStarted | OverwriteSwapped
"""Events the driver sends about an overwrite's swap."""
BatchEvent = (
    BatchIntent
    | BatchCommitted
    | BatchSkippedDuplicate
    | BatchAborted
    | OverwriteSwapStarted
    | OverwriteSwapped
)
"""Events the driver sends about one batch (an overwrite's swap among them)."""
StreamEvent = (
    StreamCreated
    | AppendAcknowledged
    | AppendAlreadyExists
    | AppendOutOfRange
    | AppendError
    | AppendThrottled
    | AppendFormatRefused
    | RowsRejected
    | StreamFinalized
    | StreamOrphaned
)
"""Events executors send about one write stream."""
