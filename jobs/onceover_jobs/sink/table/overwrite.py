"""``mode("overwrite")``: the table's rows, or the DataFrame's partitions of them, replaced
in one atomic step.

BigQuery has no append that replaces. The sink stages the DataFrame's rows exactly once in
a staging table beside the target (PENDING streams and one BatchCommitWriteStreams: the
pending mode, unchanged), then swaps them in with one multi-statement transaction::

    BEGIN TRANSACTION;
    DELETE FROM target WHERE <scope>;    -- every row, or those of the staged partitions
    INSERT INTO target (<columns>) SELECT <columns> FROM staging;
    COMMIT TRANSACTION;

A reader sees the old rows or the new ones: never a mix, never an empty table between.
Not a copy job with ``WRITE_TRUNCATE``: a copy takes the source's schema (the target's
descriptions and policy tags would go) and cannot replace only some partitions, and
"streamed data can take up to 90 minutes to become available for copy operations"
(BigQuery's DML page), where a query reads rows the moment their streams are committed.
DML keeps the target's schema, description, policy tags, partitioning and clustering.

The scope (:func:`scope_of`): the whole table (``partitionOverwriteMode`` static), or with
``dynamic`` only the partitions the staged rows fall in, by the target's own partitioning
(time-unit or integer-range, :mod:`onceover.partitions`; the NULL partition and the integer range's
``__UNPARTITIONED__`` are partitions like any). A partitioned table's overwrite must say
which (:func:`dynamic_scope`): Spark's session setting does not reach a Python data
source, and guessing static for a user who set it dynamic would delete the partitions
they meant to keep. The staging table expires after :data:`STAGING_LIFETIME_S` in case
the driver never comes back; the protocol (:mod:`onceover_jobs.sink.protocol.overwrite`)
drops it once the swap is recorded.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from onceover.ledger_files import stream_table
from onceover.partitions import NULL_PARTITION, partitioning_of
from onceover_jobs.sink.errors import SinkOptionError

if TYPE_CHECKING:
    from google.cloud.bigquery import SchemaField, Table

    from onceover.bigquery import BigQueryConfig
    from onceover_jobs.sink.table.date_partition import DatePartition

logger = logging.getLogger(__name__)

STAGING_PREFIX = "_onceover_staging_"
STAGING_LIFETIME_S = 3 * 86_400
"""How long a staging table outlives a driver that never came back to drop it: long
enough for a resume over a weekend's outage, short enough not to pile up storage."""
STAGING_LABEL = ("onceover", "staging")

PARTITION_OVERWRITE_OPTIONS = ("partitionoverwritemode", "spark.sql.sources.partitionoverwritemode")
"""Spark's per-write option and its session setting's name, as a write may give either."""

ScopeKind = Literal["table", "partitions", "partition"]
_TABLE_NAME_MAX = 1024


@dataclass(frozen=True)
class Overwrite:
    """What the driver decided for a ``mode("overwrite")`` write, shipped to every task."""

    staging: str
    """The staging table this driver created (``project.dataset.table``): where its tasks
    write. A replay finds the rows of an earlier attempt where its streams were."""
    dynamic: bool = False
    """``partitionOverwriteMode=dynamic``: only the staged rows' partitions are replaced."""


@dataclass(frozen=True)
class OverwriteScope:
    """Which of the target's rows the staged rows replace."""

    kind: ScopeKind
    column: str | None = None
    partition_of: str | None = None
    """A SQL expression of ``{c}`` (the column, qualified) naming a row's partition."""
    partition_id: str | None = None
    """A SQL expression of ``{c}``: the partition's id as BigQuery names it (``20261102``,
    a range's start, ``__UNPARTITIONED__``); NULL for the NULL partition."""
    only: str | None = None
    """Kind ``partition``: the one partition replaced, by its id (``datePartition``)."""

    def describe(self) -> str:
        if self.kind == "table":
            return "every row of the table"
        if self.kind == "partition":
            return f"the rows of partition {self.only} (by {self.column})"
        return f"the rows of the partitions (by {self.column}) the new rows fall in"

    def where(self, target: str, staging: str) -> str:
        """The DELETE's condition over ``target`` (aliased ``t``)."""
        if self.kind == "partition" and self.column and self.partition_id and self.only:
            # ``only`` is digits (onceover_jobs.sink.table.date_partition checked it).
            return f"{self.partition_id.format(c=f't.{_quoted(self.column)}')} = '{self.only}'"
        if self.kind == "table" or self.column is None or self.partition_of is None:
            return "TRUE"
        column = _quoted(self.column)
        mine = self.partition_of.format(c=f"t.{column}")
        theirs = self.partition_of.format(c=f"s.{column}")
        return (
            f"{mine} IN (SELECT DISTINCT {theirs} FROM {_ref(staging)} AS s "
            f"WHERE s.{column} IS NOT NULL) OR (t.{column} IS NULL AND EXISTS "
            f"(SELECT 1 FROM {_ref(staging)} AS s WHERE s.{column} IS NULL))"
        )


PartitionOverwrite = Literal["static", "dynamic"]


def partition_overwrite_option(options: Mapping[str, str]) -> PartitionOverwrite | None:
    """``partitionOverwriteMode`` as the write gives it (lower-case keys); None when it
    gives none."""
    given = [options[key] for key in PARTITION_OVERWRITE_OPTIONS if key in options]
    if not given:
        return None
    value = given[0].strip().lower()
    if value == "static":
        return "static"
    if value == "dynamic":
        return "dynamic"
    raise SinkOptionError("partitionOverwriteMode", f"{given[0]!r} is not static or dynamic")


UNSAID = (
    "it is partitioned, and the write does not say whether to replace every partition or "
    "only the DataFrame's: give .option('partitionOverwriteMode', 'static') for every row, "
    "or 'dynamic' for the partitions the rows fall in. Spark's session setting "
    "spark.sql.sources.partitionOverwriteMode never reaches a Python data source (Spark "
    "hands it only the write's own options), so it cannot be read here, and a dynamic "
    "overwrite taken for a static one would delete every other partition. Nothing was "
    "written"
)


def dynamic_scope(table: Table, given: PartitionOverwrite | None) -> bool:
    """Whether an overwrite of ``table`` replaces only its rows' partitions: as the write
    says; a partitioned table's overwrite that says nothing is refused (:data:`UNSAID`),
    an unpartitioned one is replaced whole."""
    if given is not None:
        return given == "dynamic"
    if table.time_partitioning is not None or table.range_partitioning is not None:
        raise SinkOptionError("partitionOverwriteMode", f"{table.full_table_id}: {UNSAID}")
    return False


def scope_of(
    table: Table, *, dynamic: bool, partition: DatePartition | None = None
) -> OverwriteScope:
    """What a write into ``table`` replaces: the one partition ``datePartition`` names, or
    by ``dynamic``; a dynamic overwrite of a table partitioned by ingestion time is
    refused (the rows carry no partition to replace)."""
    if partition is not None:
        return OverwriteScope(
            "partition", partition.column, partition_id=partition.partition_id,
            only=partition.value,
        )  # fmt: skip
    if not dynamic:
        return OverwriteScope("table")
    time = table.time_partitioning
    if time is not None and time.field is None:
        raise SinkOptionError(
            "partitionOverwriteMode",
            f"'dynamic': {table.full_table_id} is partitioned by ingestion time, so its "
            "rows name no partition to replace; overwrite the whole table (leave the "
            "option out), or partition the table by a column. Nothing was written",
        )
    try:
        partitioning = partitioning_of(table)
    except ValueError as exc:
        raise SinkOptionError("partitionOverwriteMode", f"{exc} is not supported") from None
    if partitioning is None:
        logger.warning(
            "onceover: partitionOverwriteMode=dynamic, but %s is not partitioned: the whole "
            "table is replaced (as Spark does for an unpartitioned table)",
            table.full_table_id,
        )
        return OverwriteScope("table")
    return OverwriteScope(
        "partitions", partitioning.column, partitioning.partition_of, partitioning.partition_id
    )


def staging_table_id(target: str, run_id: str | None) -> str:
    """The staging table of a write into ``target``: fixed by the run id, so every
    attempt of a run stages in the same table; a write without one gets its own."""
    project, dataset, table = target.split(".")
    token = (
        hashlib.sha256(f"{target}\n{run_id}".encode()).hexdigest()[:16]
        if run_id
        else uuid.uuid4().hex[:16]
    )
    room = _TABLE_NAME_MAX - len(STAGING_PREFIX) - len(token) - 1
    return f"{project}.{dataset}.{STAGING_PREFIX}{table[:room]}_{token}"


def table_of_stream(stream: str) -> str:
    """``projects/p/datasets/d/tables/t/streams/s`` as ``p.d.t``."""
    return stream_table(stream)


def create_staging(config: BigQueryConfig, staging: str, fields: Sequence[SchemaField]) -> None:
    """The staging table, with the target's columns, expiring in case nobody drops it;
    one already there (the same run's earlier attempt) is kept as it is."""
    from google.api_core.exceptions import Conflict
    from google.cloud.bigquery import Table

    from onceover_jobs.sink.rows.schema import rest_client

    table = Table(staging, schema=list(fields))
    table.expires = datetime.now(UTC) + timedelta(seconds=STAGING_LIFETIME_S)
    table.labels = dict([STAGING_LABEL])
    table.description = "rows of a mode('overwrite') write, staged by Onceover; dropped after"
    # One there already is an earlier attempt's of the same run: its rows may be the ones
    # swapped, so it is kept as it is.
    with suppress(Conflict):
        rest_client(config).create_table(table)


def drop_staging(config: BigQueryConfig, staging: str) -> None:
    from onceover_jobs.sink.rows.schema import rest_client

    if not table_name(staging).startswith(STAGING_PREFIX):  # never a user's table
        raise ValueError(f"{staging} is not a staging table")
    rest_client(config).delete_table(staging, not_found_ok=True)


def table_name(table_id: str) -> str:
    return table_id.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class ScopeFigures:
    """What a swap is about to replace, counted just before it runs (the transaction
    itself cannot answer: the figures of a run stopped after it are the first count's)."""

    rows_replaced: int
    """The target's rows in the scope as the swap began (a row appended between the count
    and the transaction is replaced as well, and not counted)."""
    partitions: tuple[str, ...] | None
    """The ids of the partitions replaced, as BigQuery names them (``20261102``,
    ``__NULL__``; the first PARTITIONS_LISTED); None when the scope is the whole table."""
    partition_count: int | None


PARTITIONS_LISTED = 100


def scope_figures(
    config: BigQueryConfig, target: str, staging: str, scope: OverwriteScope
) -> ScopeFigures:
    from onceover_jobs.sink.rows.schema import rest_client

    client = rest_client(config)
    (replaced,) = client.query_and_wait(
        f"SELECT COUNT(*) AS n FROM {_ref(target)} AS t WHERE {scope.where(target, staging)}"
    )
    if scope.kind == "partition" and scope.only is not None:
        return ScopeFigures(int(replaced["n"]), (scope.only,), 1)
    if scope.kind == "table" or scope.column is None or scope.partition_id is None:
        return ScopeFigures(int(replaced["n"]), None, None)
    partition = scope.partition_id.format(c=f"s.{_quoted(scope.column)}")
    found = [
        NULL_PARTITION if row["p"] is None else str(row["p"])
        for row in client.query_and_wait(
            f"SELECT DISTINCT {partition} AS p FROM {_ref(staging)} AS s ORDER BY p"
        )
    ]
    return ScopeFigures(int(replaced["n"]), tuple(found[:PARTITIONS_LISTED]), len(found))


STAGED_ROWS_CHANGED = "onceover: the staging table does not hold the rows staged"
"""The swap's own error when its staging table is not as staged (:func:`swap_script`)."""


def swap_script(
    target: str, staging: str, columns: Sequence[str], scope: OverwriteScope, staged_rows: int
) -> str:
    """The transaction that replaces ``scope`` of ``target`` with ``staging``'s rows. It
    first checks, inside the transaction, that ``staging`` holds exactly the
    ``staged_rows`` the ledger committed: a staging table that expired (and was made
    again, empty, by the next attempt) or lost rows fails the job, which rolls back
    before a row of ``target`` is deleted."""
    names = ", ".join(_quoted(c) for c in columns)
    return (
        "BEGIN TRANSACTION;\n"
        f"SELECT ERROR(CONCAT('{STAGED_ROWS_CHANGED}: ', CAST(n AS STRING), ' rows, not "
        f"{staged_rows}')) FROM (SELECT COUNT(*) AS n FROM {_ref(staging)}) "
        f"WHERE n != {staged_rows};\n"
        f"DELETE FROM {_ref(target)} AS t WHERE {scope.where(target, staging)};\n"
        f"INSERT INTO {_ref(target)} ({names}) SELECT {names} FROM {_ref(staging)};\n"
        "COMMIT TRANSACTION;"
    )


def _quoted(column: str) -> str:
    return f"`{column}`"


def _ref(table_id: str) -> str:
    return f"`{table_id}`"
