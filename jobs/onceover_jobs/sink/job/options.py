"""The sink's options, validated once on the driver into a typed, picklable value.

==========================  ==========  ===============================================
option                      default     meaning
==========================  ==========  ===============================================
``table``                   (required)  ``project.dataset.table`` (or ``dataset.table``
                                        in the configured project), or
                                        ``save("dataset.table")``; created from the
                                        DataFrame when missing (``createDisposition``:
                                        onceover_jobs.sink.table.creation)
``mode``                    see below   ``pending`` (exactly-once, visible per batch,
                                        atomically), ``buffered`` (exactly-once,
                                        visible per batch, streams kept from batch
                                        to batch), ``committed`` (exactly-once,
                                        visible per append), ``default``
                                        (at-least-once baseline); ``buffered`` for
                                        ``writeStream``, else ``pending``
``key``                     none        column that identifies a row (reconciliation,
                                        and the rows BigQuery refuses are named by it)
``dead_letter``             none        a table (``project.dataset.table`` or
                                        ``dataset.table``) for the rows BigQuery
                                        refuses: created if missing, the rows set
                                        aside there exactly once and the rest written;
                                        without it a refused row fails the write,
                                        named (onceover_jobs.sink.rows.dead_letter)
``stamp``                   false       ``true``: write the run id and batch id into
                                        ``_onceover_run_id`` / ``_onceover_batch_id``
                                        (the table must have them) so reconciliation
                                        counts a run's and a batch's rows in place
``run_id``                  see below   the run this write belongs to; streaming: the
                                        query id; batch writes in ``pending`` or
                                        ``committed`` mode: required (a re-run with
                                        the same id writes nothing again); inside
                                        foreachBatch: not needed (the query id and
                                        micro-batch id are the write's identity)
``write_id``                the ordinal which of the run's (or the foreachBatch call's)
                                        writes to the table this is; by default their
                                        order (the first write to a table is 0, ...)
``ledger``                  see below   where the ledger is: a path or a bucket's URL
                                        (``gs://``, ``s3://``, ``abfss://``; on a cluster
                                        a bucket, or a disk every executor mounts);
                                        streaming: ``<checkpointLocation>/onceover``
                                        unless given; other writes
                                        ``$ONCEOVER_LEDGER``, else ``~/.onceover/ledger``
``job``                     none        a name for the job in events and the dashboard
``monitor.url``             none        control plane base URL; events go to
                                        ``<url>/api/events``
``monitor.token``           none        bearer token (role ``ingest``)
``run_events``              true        report the run's start, heartbeats and end
                                        from the driver (onceover_jobs.sink.reporting.run_report);
                                        false for a job that reports them itself
``row_format``              arrow       ``arrow``, or ``proto`` for projects without
                                        Arrow ingestion
``missingValue``            null        what a table's column the DataFrame lacks gets:
                                        ``null``, or ``default``: its DEFAULT
                                        (``default_missing_value_interpretation``;
                                        a REQUIRED column with a DEFAULT may then be
                                        left out)
``request.max_bytes``       19000000    cap of one append request on the wire, writer
                                        schema included (BigQuery's limit is
                                        20,000,000 bytes; at most 19,500,000)
``append.max_inflight``     4           requests in flight per stream (pipelining)
``retry.deadline_s``        300         how long transient errors are retried
(connection)                none        real BigQuery: ``credentialsFile``,
                                        ``credentials``, ``gcpAccessToken``,
                                        ``gcpImpersonationServiceAccount``,
                                        ``parentProject``,
                                        ``useParentProjectForMetadataOperations``,
                                        ``bigQueryStorageGrpcEndpoint``,
                                        ``bigQueryHttpEndpoint``, ``proxyAddress``,
                                        ``proxyUsername``, ``proxyPassword``, named
                                        as the spark-bigquery-connector names them
                                        (:mod:`onceover.connection`)
``openlineage.url``         see below   OpenLineage receiver for the run's lineage
                                        events (with ``openlineage.endpoint``,
                                        ``openlineage.api_key``,
                                        ``openlineage.namespace``; or a config file,
                                        ``openlineage.config``); else as the
                                        OpenLineage clients find it
                                        (onceover_jobs.sink.job.lineage_config)
``openlineage.run_id``      derived     the OpenLineage runId, for a job that reports
                                        its own run (``run_events`` false)
``check``                   false       ``true``: before anything is created or written,
                                        run ``onceover check``'s checks (credentials,
                                        location, permissions, ledger, Arrow) and
                                        refuse the write if one fails
                                        (onceover_jobs.preflight)
``ledger.keep_batches``     100         committed batches the ledger keeps per write;
                                        give Spark's
                                        ``spark.sql.streaming.minBatchesToRetain``
                                        if you changed it
                                        (``$ONCEOVER_LEDGER_KEEP_BATCHES`` overrides)
==========================  ==========  ===============================================

The spark-bigquery-connector's write options are read too, before these
(:mod:`onceover_jobs.sink.job.connector_options`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from onceover.checkpoint_layout import ledger_root
from onceover.connection import OPTIONS as CONNECTION_OPTIONS
from onceover.connection import Connection, ConnectionOptionError
from onceover.errors import ConfigurationError
from onceover.identifiers import COLUMN_NAME_RE
from onceover.ledger_store import check_location
from onceover.modes import BATCH_DEFAULT_MODE, MODES, STREAMING_DEFAULT_MODE, Mode
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.connector_options import translate
from onceover_jobs.sink.job.lineage_config import OPTIONS as LINEAGE_OPTIONS
from onceover_jobs.sink.ledger.leases import DEFAULT_DRIVER_LEASE_S
from onceover_jobs.sink.ledger.retention import DEFAULT_KEEP, how_many_to_keep
from onceover_jobs.sink.table.creation import TableCreation, is_creation_option, table_creation
from onceover_jobs.sink.table.date_partition import KEY as DATE_PARTITION_KEY
from onceover_jobs.sink.table.date_partition import date_partition_option
from onceover_jobs.sink.table.overwrite import (
    PARTITION_OVERWRITE_OPTIONS,
    PartitionOverwrite,
    partition_overwrite_option,
)
from onceover_jobs.sink.table.widening import Widening, widening_option
from onceover_jobs.sink.wire.retry import DEFAULT_THROTTLE_S

RowFormat = Literal["arrow", "proto"]

ROW_FORMATS: tuple[RowFormat, ...] = ("arrow", "proto")
MissingValue = Literal["null", "default"]
MISSING_VALUES: tuple[MissingValue, ...] = ("null", "default")
BIGQUERY_MAX_REQUEST_BYTES = 20_000_000
"""BigQuery's limit on one ``AppendRowsRequest``: "less than 20 MB" (the AppendRowsRequest
reference), read as 20,000,000 bytes, the smaller reading and the one Google's Java
client enforces (``getApiMaxRequestBytes()`` = ``20L * 1000L * 1000L``)."""
DEFAULT_MAX_REQUEST_BYTES = 19_000_000
"""5% under BigQuery's limit. The sink counts everything a request carries against the
cap (rows, writer schema, envelope: :mod:`onceover_jobs.sink.wire.requests`), so this is headroom
for what it cannot see, not for the schema."""
MAX_REQUEST_BYTES_LIMIT = 19_500_000
"""The most ``request.max_bytes`` may be: 500,000 bytes (2.5%) under BigQuery's limit, kept
for what the planner does not count: fields the client library may add to a request
(``trace_id``, missing-value interpretations), a stream name longer than the envelope's
allowance, and BigQuery counting a request otherwise than its serialized size."""
MIN_REQUEST_BYTES = 10_000
LEDGER_ENV = "ONCEOVER_LEDGER"
DEFAULT_BATCH_LEDGER = "~/.onceover/ledger"

KNOWN = frozenset(
    {
        "table",
        "mode",
        "key",
        "dead_letter",
        "stamp",
        "run_id",
        "write_id",
        "ledger",
        "job",
        "monitor.url",
        "monitor.token",
        "run_events",
        "row_format",
        "missingvalue",
        "allowfieldaddition",
        "allowfieldrelaxation",
        "request.max_bytes",
        "append.max_inflight",
        "retry.deadline_s",
        "retry.throttle_s",
        "driver.lease_s",
        "ledger.keep_batches",
        "check",
        "checkpointlocation",
        "path",
        "queryname",  # writeStream.queryName(...): Spark passes it to the sink
        *PARTITION_OVERWRITE_OPTIONS,
        DATE_PARTITION_KEY,
        *CONNECTION_OPTIONS,
        *LINEAGE_OPTIONS,
    }
)

_TABLE_RE = re.compile(
    r"^(?:(?P<project>[a-z][a-z0-9.:-]{4,61}[a-z0-9])\.)?"
    r"(?P<dataset>[A-Za-z0-9_]{1,1024})\.(?P<table>[A-Za-z0-9_$-]{1,1024})$"
)
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

T = TypeVar("T", bound=str)


@dataclass(frozen=True)
class SinkOptions:
    table: str
    """Always fully qualified: ``project.dataset.table``."""
    mode: Mode = BATCH_DEFAULT_MODE
    key: str | None = None
    dead_letter: str | None = None
    """Where rows BigQuery refuses are set aside (``project.dataset.table``)."""
    stamp: bool = False
    run_id: str | None = None
    write_id: str | None = None
    ledger: str | None = None
    checkpoint: str | None = None
    job: str | None = None
    monitor_url: str | None = None
    monitor_token: str | None = None
    run_events: bool = True
    row_format: RowFormat = "arrow"
    missing_value: MissingValue = "null"
    """``missingValue``: a column the DataFrame lacks is NULL, or gets its DEFAULT."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_inflight: int = 4
    retry_deadline_s: float = 300.0
    retry_throttle_s: float = DEFAULT_THROTTLE_S
    """``retry.throttle_s``: how long appends BigQuery's throughput quota refuses are
    tried again (onceover_jobs.sink.wire.retry)."""
    driver_lease_s: int = DEFAULT_DRIVER_LEASE_S
    """How long a driver on another host keeps its claim after its last commit
    (onceover_jobs.sink.ledger.leases.claim_driver); 0: never refuse one."""
    ledger_keep_batches: int = DEFAULT_KEEP
    """Committed batches the ledger keeps per write (onceover_jobs.sink.ledger.retention): as
    many as Spark keeps of its own logs (spark.sql.streaming.minBatchesToRetain)."""
    creation: TableCreation = field(default_factory=TableCreation)
    """What the write may do about a missing table (createDisposition, partitioning, ...:
    onceover_jobs.sink.table.creation)."""
    widening: Widening = field(default_factory=Widening)
    """``allowFieldAddition`` / ``allowFieldRelaxation``: what the write may widen in the
    table's schema first (onceover_jobs.sink.table.widening)."""
    partition_overwrite: PartitionOverwrite | None = None
    """``partitionOverwriteMode`` as given: a ``mode("overwrite")`` write replaces every
    row (static) or only its rows' partitions (dynamic); None: not given, refused for a
    partitioned table (onceover_jobs.sink.table.overwrite)."""
    date_partition: str | None = None
    """``datePartition`` (``20220331``): the one partition the rows go to, and the one an
    overwrite replaces (onceover_jobs.sink.table.date_partition); None: any."""
    check: bool = False
    """``check=true``: the driver runs the preflight checks before the write
    (onceover_jobs.preflight.run.check_before_write) and refuses it if one fails."""
    ignored: tuple[str, ...] = ()
    """A note for each of the connector's options given and ignored here
    (onceover_jobs.sink.job.connector_options), logged by the driver."""

    @property
    def project(self) -> str:
        return self.table.rsplit(".", 2)[0]

    @property
    def dataset(self) -> str:
        return self.table.rsplit(".", 2)[1]

    @property
    def table_name(self) -> str:
        return self.table.rsplit(".", 2)[2]


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    """A duration option in seconds, in (0, 86400]."""
    text = options.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SinkOptionError(name, f"{text!r} is not seconds") from None
    if not 0 < value <= 86_400:
        raise SinkOptionError(name, f"{value} is outside (0, 86400]")
    return value


def _int(options: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SinkOptionError(name, f"{text!r} is not a whole number") from None
    if not low <= value <= high:
        raise SinkOptionError(name, f"{value} is outside {low:,}..{high:,}")
    return value


def _choice(
    options: Mapping[str, str], name: str, choices: tuple[T, ...], default: T | None = None
) -> T:
    text = options.get(name, default or choices[0]).strip().lower()
    if text not in choices:
        raise SinkOptionError(name, f"{text!r} is not one of {', '.join(choices)}")
    return text  # type: ignore[return-value,unused-ignore]  # one of choices


def _missing_value(options: Mapping[str, str]) -> MissingValue:
    text = options.get("missingvalue", "null").strip().lower()
    if text not in MISSING_VALUES:
        raise SinkOptionError(
            "missingValue",
            f"{text!r} is not null (a column the DataFrame lacks is NULL) or default (it "
            "gets the column's DEFAULT)",
        )
    return text  # type: ignore[return-value,unused-ignore]  # one of MISSING_VALUES


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def _bool(options: Mapping[str, str], name: str, *, default: bool = False) -> bool:
    text = options.get(name, "true" if default else "false").strip().lower()
    if text not in _TRUE | _FALSE:
        raise SinkOptionError(name, f"{text!r} is not true or false")
    return text in _TRUE


def _id(options: Mapping[str, str], name: str) -> str | None:
    """An id that names a run or a write (and becomes part of a ledger path)."""
    text = options.get(name) or None
    if text is not None and not _RUN_ID_RE.match(text):
        raise SinkOptionError(name, f"{text!r}: use 1-128 letters, digits, '.', '_', ':' or '-'")
    return text


def connection_options(raw: Mapping[str, str]) -> Connection:
    """How to reach real BigQuery, from the writer's connection options; a wrong one
    raises :class:`SinkOptionError` naming it."""
    try:
        return Connection.from_options({key.lower(): value for key, value in raw.items()})
    except ConnectionOptionError as exc:
        raise SinkOptionError(exc.option, str(exc).split(": ", 1)[1]) from None


def _table_option(options: Mapping[str, str], name: str, written: str) -> str | None:
    """A table option as ``project.dataset.table`` (in the project of the ``written``
    table when it names none), never the written table; None when not given."""
    text = options.get(name, "").strip()
    if not text:
        return None
    match = _TABLE_RE.match(text)
    if not match:
        raise SinkOptionError(name, f"{text!r} is not project.dataset.table or dataset.table")
    project = match["project"] or written.rsplit(".", 2)[0]
    table = f"{project}.{match['dataset']}.{match['table']}"
    if table == written:
        raise SinkOptionError(name, f"{table} is the table written; name another")
    return table


def checkpoint_location(checkpoint: str) -> str:
    """The checkpoint as the sink reads it (Spark's metadata and offsets log) and keeps
    the ledger beside it: a path (``file:`` stripped) or a bucket's URL (``gs://``,
    ``s3://``, ``s3a://``, ``abfss://``); anything else is refused naming the fix."""
    try:
        return check_location(checkpoint, "checkpointLocation")
    except ConfigurationError as exc:
        problem = str(exc).split(": ", 1)[-1]
        raise SinkOptionError(
            "checkpointLocation",
            f"{checkpoint!r}: {problem} (the sink reads Spark's offsets log there and keeps "
            "its ledger beside it, unless the 'ledger' option puts it elsewhere)",
        ) from None


def ledger_location(ledger: str) -> str:
    """The ``ledger`` option (or ``$ONCEOVER_LEDGER``): a path or a bucket's URL."""
    try:
        return check_location(ledger, "ledger")
    except ConfigurationError as exc:
        raise SinkOptionError("ledger", f"{ledger!r}: {str(exc).split(': ', 1)[-1]}") from None


def parse_options(
    raw: Mapping[str, str], *, default_project: str | None, streaming: bool
) -> SinkOptions:
    """Validate the writer's options; a bad one raises :class:`SinkOptionError` naming it."""
    # The connector's spelling first (save(path), writeAtLeastOnce, ...): a job moved
    # from format("bigquery") keeps its options.
    options, ignored = translate({key.lower(): value for key, value in raw.items()})
    unknown = sorted(key for key in set(options) - KNOWN if not is_creation_option(key))
    if unknown:
        raise SinkOptionError(unknown[0], f"unknown option; known: {', '.join(sorted(KNOWN))}")

    table_text = options.get("table", "").strip()
    if not table_text:
        raise SinkOptionError(
            "table", 'required: save("dataset.table"), or .option("table", "project.dataset.table")'
        )
    match = _TABLE_RE.match(table_text)
    if not match:
        raise SinkOptionError("table", f"{table_text!r} is not project.dataset.table")
    project = match["project"] or default_project
    if not project:
        raise SinkOptionError("table", f"{table_text!r} names no project and none is configured")
    table = f"{project}.{match['dataset']}.{match['table']}"

    key = options.get("key") or None
    if key is not None and not COLUMN_NAME_RE.match(key):
        raise SinkOptionError("key", f"{key!r} is not a column name")
    run_id = _id(options, "run_id")

    write_id = _id(options, "write_id")
    checkpoint = options.get("checkpointlocation") or None
    ledger = options.get("ledger") or None
    if streaming:
        if checkpoint is None:
            raise SinkOptionError(
                "checkpointLocation", "required for streaming writes (the ledger lives there)"
            )
        if write_id is not None:
            raise SinkOptionError(
                "write_id", "a streaming query writes one table: its batches are its writes"
            )
        checkpoint = checkpoint_location(checkpoint)
        # Beside Spark's own logs unless the ledger is given (a checkpoint on HDFS or a
        # disk, the ledger in a bucket).
        ledger = ledger_location(ledger) if ledger is not None else ledger_root(checkpoint)
    else:
        # Not the working directory: a driver restarted in cluster deploy mode runs in
        # a new one, and would find no ledger there.
        ledger = ledger_location(ledger or os.environ.get(LEDGER_ENV) or DEFAULT_BATCH_LEDGER)

    monitor_url = options.get("monitor.url") or None
    if monitor_url is not None:
        parts = urlsplit(monitor_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SinkOptionError("monitor.url", f"{monitor_url!r} is not an http(s) URL")
        monitor_url = monitor_url.rstrip("/")
    monitor_token = options.get("monitor.token") or None
    if monitor_token is not None and monitor_url is None:
        raise SinkOptionError("monitor.token", "given without monitor.url")

    deadline = _seconds(options, "retry.deadline_s", 300.0)

    return SinkOptions(
        table=table,
        # A streaming query writes a batch every trigger: its partitions keep their
        # streams from batch to batch (buffered mode: visible per batch, and a replay
        # need not see the same rows in the same order), where pending mode would
        # create one per partition and batch (onceover_jobs.sink.ledger.slots).
        mode=_choice(
            options, "mode", MODES, STREAMING_DEFAULT_MODE if streaming else BATCH_DEFAULT_MODE
        ),
        key=key,
        dead_letter=_table_option(options, "dead_letter", table),
        stamp=_bool(options, "stamp"),
        run_id=run_id,
        write_id=write_id,
        ledger=ledger,
        checkpoint=checkpoint,
        job=(options.get("job") or None),
        monitor_url=monitor_url,
        monitor_token=monitor_token,
        run_events=_bool(options, "run_events", default=True),
        row_format=_choice(options, "row_format", ROW_FORMATS),
        missing_value=_missing_value(options),
        max_request_bytes=_int(
            options,
            "request.max_bytes",
            DEFAULT_MAX_REQUEST_BYTES,
            MIN_REQUEST_BYTES,
            MAX_REQUEST_BYTES_LIMIT,
        ),
        max_inflight=_int(options, "append.max_inflight", 4, 1, 64),
        retry_deadline_s=deadline,
        retry_throttle_s=_seconds(options, "retry.throttle_s", DEFAULT_THROTTLE_S),
        driver_lease_s=_int(options, "driver.lease_s", DEFAULT_DRIVER_LEASE_S, 0, 86_400),
        ledger_keep_batches=how_many_to_keep(options.get("ledger.keep_batches")),
        check=_bool(options, "check"),
        ignored=tuple(ignored),
        creation=table_creation(options),
        widening=widening_option(options),
        partition_overwrite=partition_overwrite_option(options),
        date_partition=date_partition_option(options),
    )
