"""The ``onceover`` PySpark data source: exactly-once writes into BigQuery.

Batch::

    spark.dataSource.register(OnceoverDataSource)
    (df.write.format("onceover")
       .option("table", "my-project.billing.usage")
       .option("run_id", "usage-2026-11-21")      # a re-run with the same id is a no-op
       .option("ledger", "/shared/onceover-ledger")
       .mode("append").save())

The same inside ``foreachBatch`` needs no ``run_id``: the query id and micro-batch id are the
write's identity (:mod:`onceover_jobs.sink.ledger.identity` says what identifies each write).

Structured Streaming::

    (df.writeStream.format("onceover")
       .option("table", "my-project.billing.usage")
       .option("checkpointLocation", "/shared/checkpoints/usage")   # ledger lives here
       .option("monitor.url", "http://onceover:8000").option("monitor.token", token)
       .trigger(availableNow=True).start())

Options (see :mod:`onceover_jobs.sink.job.options` for all): ``table`` (required), ``mode``
(``pending``, the default of ``df.write``; ``buffered``, the default of ``writeStream``;
``committed``; ``default``), ``partitionOverwriteMode`` (with ``mode("overwrite")``), ``key``,
``run_id``, ``ledger``, ``stamp``, ``job``, ``monitor.url``, ``monitor.token``,
``row_format`` (``arrow``/``proto``), ``request.max_bytes``, ``append.max_inflight``,
``retry.deadline_s``.

Options, the table and the DataFrame's schema are checked on the driver before any task runs; a bad
option or a column that does not fit raises ``ValueError`` naming it. ``write()`` runs on executors
and stages rows (:mod:`onceover_jobs.sink.protocol.task`); ``commit()`` makes a batch visible once
(:mod:`onceover_jobs.sink.protocol.committer`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from onceover.bigquery import BigQueryConfig
from onceover.ledger_store import open_store
from onceover.modes import traits_of
from onceover_jobs.preflight.run import check_before_write
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import (
    ConcurrentDriverError,
    OverwriteError,
    SchemaMismatchError,
    SinkOptionError,
)
from onceover_jobs.sink.job.lineage_config import resolve as resolve_lineage
from onceover_jobs.sink.job.options import SinkOptions, connection_options, parse_options
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob, streaming_query_id
from onceover_jobs.sink.ledger.identity import UnresolvedWrite, WriteIdentity
from onceover_jobs.sink.ledger.leases import claim_driver, leave_probe
from onceover_jobs.sink.ledger.offsets_log import check_not_reset
from onceover_jobs.sink.protocol.committer import BatchCommitter, written_by_tasks
from onceover_jobs.sink.protocol.overwrite import commit_overwrite
from onceover_jobs.sink.reporting.lineage import LineageReport
from onceover_jobs.sink.reporting.run_report import RunReport
from onceover_jobs.sink.table.date_partition import DatePartition
from onceover_jobs.sink.table.overwrite import Overwrite

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from onceover_jobs.sink.rows.change_capture import ChangeCapture
    from onceover_jobs.sink.rows.plan import WritePlan

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnceoverCommitMessage(WriterCommitMessage):
    """What a task sends the driver: its stream and the rows it staged there."""

    result: TaskResult


def prepare_job(
    raw_options: dict[str, str], schema: StructType, overwrite: bool, *, streaming: bool
) -> SinkJob:
    """Validate everything on the driver, before any task starts."""
    from onceover_jobs.sink.modes.staging import encoder_for
    from onceover_jobs.sink.wire.requests import request_budget

    failpoints.check_environment()
    if overwrite and streaming:
        raise SinkOptionError(
            "outputMode",
            "a streaming query's micro-batches are appended, each exactly once; complete "
            "output (the table replaced every trigger) is not supported: to replace rows from "
            "a stream, write each micro-batch in foreachBatch with mode('overwrite')",
        )
    # The connection first: the default project may be its parentProject or come from its
    # credentials.
    config = replace(BigQueryConfig.from_env(), connection=connection_options(raw_options))
    options = parse_options(
        raw_options, default_project=config.table_project(), streaming=streaming
    )
    for note in options.ignored:  # a connector option that steers nothing here
        logger.warning("onceover: %s", note)
    check_before_write(config, options)  # check=true: before a table is made or a row written
    # Read here, on the driver's side where the commits run too, so a wrong file
    # fails the write before a row, not its commit.
    lineage = resolve_lineage({key.lower(): value for key, value in raw_options.items()})
    options, capture, arrow_schema = _columns(config, options, raw_options, schema, overwrite)
    written = arrow_schema
    if options.stamp:
        from onceover_jobs.sink.rows.stamp import with_stamp_fields

        written = with_stamp_fields(arrow_schema)  # a table created for it has them
    fields = _table_fields(config, options, written)
    partition = _date_partition(config, options, overwrite)
    replacing = _overwrite(config, options, fields, partition) if overwrite else None
    if options.dead_letter is not None:
        from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

        ensure_dead_letter_table(config, options.dead_letter)
    if options.stamp:
        from onceover_jobs.sink.rows.stamp import check_stamp_columns, with_stamp_fields

        check_stamp_columns(
            options.table, arrow_schema.names, {f.name: f.field_type for f in fields}
        )
        arrow_schema = with_stamp_fields(arrow_schema)
    plan = _plan(options, arrow_schema, fields)
    write: WriteIdentity | UnresolvedWrite
    if streaming:
        assert options.checkpoint is not None
        query_id = streaming_query_id(open_store(options.checkpoint, config.connection))
        write = WriteIdentity("streaming", query_id, options.table, None)
    else:
        # Which write this is, the tasks work out (onceover_jobs.sink.protocol.resolve):
        # only they see whether it runs inside foreachBatch, and which execution it is.
        write = UnresolvedWrite(options.table, options.run_id or uuid.uuid4().hex)
    assert options.ledger is not None
    job = SinkJob(
        options=options,
        bigquery=config,
        plan=plan,
        table_fields=tuple(field.to_api_repr() for field in fields),
        probe=leave_probe(open_store(options.ledger, config.connection)),
        write=write,
        lineage=lineage,
        overwrite=replacing,
        date_partition=partition,
        change_capture=capture,
    )
    # A writer schema that leaves no room for a row under the cap: refused here, before
    # any task creates a stream.
    request_budget(encoder_for(job), options.max_request_bytes, table=options.table)
    if streaming:
        assert options.checkpoint is not None
        try:
            claim_driver(
                job.store,
                query_id,
                f"the query on {options.checkpoint}",
                options.driver_lease_s,
            )
        except ConcurrentDriverError as exc:
            raise ConcurrentDriverError(f"{exc}. {PLANNED_FIRST}") from None
        assert job.checkpoint_store is not None
        check_not_reset(job.ledger(), job.checkpoint_store)  # before any task writes a row
    elif options.run_id is not None:
        claim_driver(job.store, options.run_id, f"run {options.run_id}", options.driver_lease_s)
    return job


def _columns(
    config: BigQueryConfig,
    options: SinkOptions,
    raw_options: dict[str, str],
    schema: StructType,
    overwrite: bool,
) -> tuple[SinkOptions, ChangeCapture | None, pa.Schema]:
    """The DataFrame's columns as Arrow, ``key`` among them. A DataFrame with
    ``_CHANGE_TYPE`` is a change data capture write: checked before a table is made, its
    pseudo-columns no columns of the table, its rows sent as proto rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from onceover_jobs.sink.table.change_capture import change_capture_of

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    capture, arrow_schema = change_capture_of(
        config, options.table, arrow_schema, raw_options,
        mode=options.mode, date_partition=options.date_partition, overwrite=overwrite,
    )  # fmt: skip
    if capture is not None:
        options = replace(options, row_format="proto")
    if options.key is not None and options.key.lower() not in {
        name.lower() for name in arrow_schema.names
    }:
        raise SinkOptionError("key", f"{options.key!r} is not a column of the DataFrame")
    return options, capture, arrow_schema


def _table_fields(config: BigQueryConfig, options: SinkOptions, written: pa.Schema) -> list[Any]:
    """The table's schema: the table created first when missing, then widened for the
    DataFrame when ``allowFieldAddition`` / ``allowFieldRelaxation`` say so."""
    from onceover_jobs.sink.table.creation import ensure_table
    from onceover_jobs.sink.table.widening import widen_table

    fields = ensure_table(config, options.table, options.creation, written)
    if options.widening.any:
        return widen_table(config, options.table, written, options.widening)
    return fields


def _plan(options: SinkOptions, arrow_schema: pa.Schema, fields: list[Any]) -> WritePlan:
    """The rows' plan against the table; the columns with a DEFAULT the DataFrame lacks
    named when the write leaves them NULL."""
    from onceover_jobs.sink.rows.missing_values import defaults_left_out
    from onceover_jobs.sink.rows.schema import plan_write

    defaults = options.missing_value == "default"
    try:
        plan = plan_write(options.table, arrow_schema, fields, defaults=defaults)
    except SchemaMismatchError as exc:
        from onceover_jobs.sink.table.widening import widening_advice

        # A micro-batch that brings a new column, or stops sending a REQUIRED one, is
        # refused before a row: the message says which option would let it through.
        advice = widening_advice(fields, arrow_schema, options.widening, exc.problems)
        if not advice:
            raise
        raise SchemaMismatchError(exc.table, [*exc.problems, *advice]) from None
    if not defaults and (left := defaults_left_out(arrow_schema, fields)):
        logger.warning(
            "onceover: %s has a DEFAULT for %s, which the DataFrame lacks: they are written "
            "NULL; give .option('missingValue', 'default') for their defaults",
            options.table, ", ".join(left),
        )  # fmt: skip
    return plan


def _date_partition(
    config: BigQueryConfig, options: SinkOptions, overwrite: bool
) -> DatePartition | None:
    """The partition ``datePartition`` names in the table, checked before any task runs.
    Only a pending write may take one: its tasks refuse a row outside the partition, and
    only a write committed at once leaves nothing of itself behind them."""
    from onceover_jobs.sink.rows.schema import rest_client
    from onceover_jobs.sink.table.date_partition import OPTION, resolve

    if options.date_partition is None:
        return None
    if traits_of(options.mode).publish != "batch_commit":
        raise SinkOptionError(
            OPTION,
            f"{options.date_partition!r} with mode {options.mode!r}: a row outside the "
            "partition stops the write, and only the pending mode (every stream committed "
            "at once, the batch default) then leaves nothing of it in the table; leave the "
            "mode out. Nothing was written",
        )
    target = rest_client(config).get_table(options.table)
    return resolve(target, options.date_partition)


def _overwrite(
    config: BigQueryConfig,
    options: SinkOptions,
    fields: list[Any],
    partition: DatePartition | None,
) -> Overwrite:
    """A ``mode("overwrite")`` write's staging table, made before any task writes to it;
    what cannot be replaced is refused here, before a row is staged. With
    ``datePartition`` the scope is that partition, whatever ``partitionOverwriteMode``."""
    from onceover_jobs.sink.rows.schema import rest_client
    from onceover_jobs.sink.table.overwrite import (
        create_staging,
        dynamic_scope,
        scope_of,
        staging_table_id,
    )

    if traits_of(options.mode).publish != "batch_commit":
        raise SinkOptionError(
            "mode",
            f"{options.mode!r} with mode('overwrite'): an overwrite stages its rows on "
            "PENDING streams, committed at once, before it swaps them in; leave the mode "
            "out. Nothing was written",
        )
    target = rest_client(config).get_table(options.table)
    dynamic = partition is None and dynamic_scope(target, options.partition_overwrite)
    scope_of(target, dynamic=dynamic, partition=partition)  # refused now, not after staging
    staging = staging_table_id(options.table, options.run_id)
    create_staging(config, staging, fields)
    return Overwrite(staging, dynamic=dynamic)


PLANNED_FIRST = (
    "Spark planned this driver's micro-batch in the checkpoint before it asked the sink, "
    "so the other driver may stop at its next micro-batch on that entry (its next start "
    "commits the batch once); claim the checkpoint before start() to be refused before "
    "Spark writes (onceover_jobs.sink.claim.claim_checkpoint)"
)


ONCE_PER_SAVE = (
    "onceover: the write to %s committed once, atomically, as run %s (an id made for this "
    "save()): a re-run of this script writes its rows again. Give the write "
    ".option('run_id', 'a-stable-id') to make a re-run write nothing"
)


ABORTED = (
    "Spark aborted the write (a task, the job or its commit failed); the driver's log says why"
)


def _write(job: SinkJob, iterator: Iterator[pa.RecordBatch]) -> OnceoverCommitMessage:
    """A task's side (the executor): imported here, so the driver's commit worker never
    imports what the tasks write with."""
    from onceover_jobs.sink.protocol.task import current_task, write_partition

    # Spark tells executors the micro-batch id through a local property.
    return OnceoverCommitMessage(write_partition(job, iterator, current_task(None)))


def _made_for_this_save(job: SinkJob) -> bool:
    """A batch write given no run_id: its run id is this save()'s own."""
    write = job.write
    return isinstance(write, WriteIdentity) and write.kind == "batch" and not job.options.run_id


def _results(messages: Sequence[WriterCommitMessage | None]) -> list[TaskResult | None]:
    return [m.result if isinstance(m, OnceoverCommitMessage) else None for m in messages]


class OnceoverBatchWriter(DataSourceArrowWriter):
    def __init__(self, job: SinkJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OnceoverCommitMessage:
        return _write(self.job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        results = _results(messages)
        job = written_by_tasks(self.job, results)
        record = None
        if job is None and self.job.overwrite is not None:
            raise OverwriteError(
                f"Spark ran no task for the overwrite of {self.job.table} (a DataFrame of no "
                "partitions), so which write it is cannot be told; nothing was replaced. To "
                "empty the table, run TRUNCATE TABLE; to replace its rows with none, "
                "repartition(1) the empty DataFrame first"
            )
        if job is not None and job.overwrite is not None:
            record = commit_overwrite(job, results)
        elif job is not None:  # else no task ran: nothing was written
            record = BatchCommitter(job, None).commit(results)
            if _made_for_this_save(job):
                logger.warning(ONCE_PER_SAVE, job.table, job.run_id)
        RunReport(job or self.job, None).committed()
        LineageReport(job or self.job, None).committed(record)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        results = _results(messages)
        job = written_by_tasks(self.job, results)
        if job is not None:
            BatchCommitter(job, None).abort(results)
        RunReport(job or self.job, None).aborted(ABORTED)
        LineageReport(job or self.job, None).aborted(ABORTED)


class OnceoverStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, job: SinkJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OnceoverCommitMessage:
        return _write(self.job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        record = BatchCommitter(self.job, batchId).commit(_results(messages))
        RunReport(self.job, batchId).committed()
        LineageReport(self.job, batchId).committed(record)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        BatchCommitter(self.job, batchId).abort(_results(messages))
        why = f"micro-batch {batchId}: {ABORTED}"
        RunReport(self.job, batchId).aborted(why)
        LineageReport(self.job, batchId).aborted(why)


class OnceoverDataSource(DataSource):
    """Format ``onceover``: exactly-once appends into an existing BigQuery table."""

    @classmethod
    def name(cls) -> str:
        return "onceover"

    def writer(self, schema: StructType, overwrite: bool) -> OnceoverBatchWriter:
        return OnceoverBatchWriter(
            prepare_job(dict(self.options), schema, overwrite, streaming=False)
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> OnceoverStreamWriter:  # noqa: N802
        return OnceoverStreamWriter(
            prepare_job(dict(self.options), schema, overwrite, streaming=True)
        )


def register(spark: Any) -> None:
    """Make ``format("onceover")`` available in ``spark``."""
    spark.dataSource.register(OnceoverDataSource)
