"""``datePartition``: the one partition of the table a write goes to (the connector's option).

The connector writes such a write into the partition decorator ``table$20220331``, where
BigQuery takes only that partition's rows; with ``mode("overwrite")`` the partition is
replaced and every other one kept. The value names the partition as BigQuery does, in the
table's own time unit: ``YYYYMMDDHH`` (HOUR), ``YYYYMMDD`` (DAY), ``YYYYMM`` (MONTH),
``YYYY`` (YEAR).

Onceover cannot address a decorator: the Storage Write API takes one only on the
``_default`` stream ("only supports partition decorator syntax with DEFAULT stream", the
2025 design note for the Kafka connector's Storage Write path), never on the PENDING
streams an exactly-once write commits. So the
decorator's rule is kept by the sink itself. On the driver (:func:`resolve`) the table
must be partitioned by a DATE, TIMESTAMP or DATETIME column in the value's unit. In every
task (:func:`check_rows`) each row's partitioning column must fall in the partition, or
the write fails naming the row; the write is pending (every row staged, committed at
once), so a refused row leaves nothing of the write in the table. An overwrite's scope is
then that one partition (:mod:`onceover_jobs.sink.table.overwrite`).

A table partitioned by ingestion time is refused: its rows carry no column to check, and
the partition would have to be set by DML on ``_PARTITIONTIME``, which the local BigQuery
cannot hold (measured: it answers the time of the query, and drops a row inserted with
one), so no such write could be proven here.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceover.partitions import TIME_COLUMN_TYPES, time_partitioning
from onceover_jobs.sink.errors import RowsOutsidePartitionError, SinkOptionError

if TYPE_CHECKING:
    import pyarrow as pa
    from google.cloud.bigquery import Table

OPTION = "datePartition"
KEY = OPTION.lower()
"""As Spark hands the option to the data source."""

UNIT_OF_DIGITS = {4: "YEAR", 6: "MONTH", 8: "DAY", 10: "HOUR"}
FORMAT_OF_UNIT = {"YEAR": "YYYY", "MONTH": "YYYYMM", "DAY": "YYYYMMDD", "HOUR": "YYYYMMDDHH"}
_DIGITS_RE = re.compile(r"^\d+$")
ROWS_NAMED = 3
"""Values outside the partition a refusal quotes."""


@dataclass(frozen=True)
class DatePartition:
    """The partition a write goes to, resolved against its table on the driver."""

    value: str
    """As given and as BigQuery names the partition: ``20220331``."""
    unit: str
    column: str
    column_type: str
    """DATE, TIMESTAMP or DATETIME."""
    start: dt.datetime
    """The partition's first instant (UTC for a TIMESTAMP column, else wall-clock)."""
    end: dt.datetime
    """The next partition's first instant."""

    @property
    def partition_id(self) -> str:
        """SQL of ``{c}``: a row's partition id (:mod:`onceover.partitions`)."""
        return time_partitioning(self.column, self.column_type, self.unit).partition_id

    def describe(self) -> str:
        return (
            f"partition {self.value} of {self.column} ({self.column_type}, by {self.unit}): "
            f"{self._bound(self.start)} <= {self.column} < {self._bound(self.end)}"
        )

    def _bound(self, moment: dt.datetime) -> str:
        if self.column_type == "DATE":
            return moment.date().isoformat()
        utc = " UTC" if self.column_type == "TIMESTAMP" else ""
        return f"{moment.isoformat(sep=' ')}{utc}"


def date_partition_option(options: Mapping[str, str]) -> str | None:
    """``datePartition`` as given (lower-case keys), its form checked; None if not given."""
    text = options.get(KEY)
    if text is None:
        return None
    value = text.strip()
    unit = UNIT_OF_DIGITS.get(len(value)) if _DIGITS_RE.match(value) else None
    if unit is None:
        raise SinkOptionError(
            OPTION,
            f"{text!r} names no partition: give YYYYMMDD for a day (YYYYMMDDHH an hour, "
            "YYYYMM a month, YYYY a year), as BigQuery names the partition",
        )
    _bounds(value, unit)  # a real date
    return value


def resolve(table: Table, value: str) -> DatePartition:
    """The partition ``value`` names in ``table``; refused, naming why, when the table
    has no such partition for the sink to check rows against."""
    name = f"{table.project}.{table.dataset_id}.{table.table_id}"
    time = table.time_partitioning
    if time is None:
        partitioned = "by integer range" if table.range_partitioning is not None else "not"
        raise SinkOptionError(
            OPTION,
            f"{value!r}: {name} is {partitioned} partitioned, so it has no date partition; "
            "leave the option out. Nothing was written",
        )
    if time.field is None:
        raise SinkOptionError(
            OPTION,
            f"{value!r}: {name} is partitioned by ingestion time, whose rows carry no column "
            "the sink can check against the partition, and the Storage Write API takes a "
            "partition decorator only on the _default stream (at least once); partition "
            "the table by a DATE, TIMESTAMP or DATETIME column. Nothing was written",
        )
    unit = (time.type_ or "DAY").upper()
    given = UNIT_OF_DIGITS[len(value)]
    if given != unit:
        raise SinkOptionError(
            OPTION,
            f"{value!r} names a {given.lower()}, but {name} is partitioned by {unit} of "
            f"{time.field}: give {FORMAT_OF_UNIT.get(unit, unit)}. Nothing was written",
        )
    column_type = {f.name: f.field_type for f in table.schema}.get(time.field, "")
    if column_type not in TIME_COLUMN_TYPES:
        raise SinkOptionError(OPTION, f"{name} is partitioned on a {column_type} column")
    start, end = _bounds(value, unit)
    return DatePartition(value, unit, time.field, column_type, start, end)


def check_rows(batch: pa.RecordBatch, partition: DatePartition) -> None:
    """Raise :class:`RowsOutsidePartitionError` when a row of ``batch`` (as the table takes
    it) is not in ``partition``: its column NULL, before the start or from the end on."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = batch.schema.get_field_index(partition.column)
    if index < 0:
        raise RowsOutsidePartitionError(
            f"{OPTION} {partition.value!r}: the rows have no {partition.column} column, so "
            f"none is in {partition.describe()}; nothing of the write is committed"
        )
    column = batch.column(index)
    start, end = _scalar(partition.start, column.type), _scalar(partition.end, column.type)
    inside = pc.and_(pc.greater_equal(column, start), pc.less(column, end))
    outside = pc.invert(pc.fill_null(inside, False))
    count = pc.sum(outside.cast(pa.int64())).as_py() or 0
    if count:
        values = column.filter(outside).slice(0, ROWS_NAMED).to_pylist()
        raise RowsOutsidePartitionError(
            f"{OPTION} {partition.value!r}: {count} of {batch.num_rows} rows are not in "
            f"{partition.describe()} (their {partition.column}: "
            f"{', '.join('NULL' if v is None else str(v) for v in values)}"
            f"{', ...' if count > ROWS_NAMED else ''}). BigQuery takes only that partition's "
            "rows into it; the write stops, and nothing of it is committed"
        )


def _scalar(moment: dt.datetime, kind: pa.DataType) -> pa.Scalar:
    import pyarrow as pa

    if pa.types.is_date(kind):
        return pa.scalar(moment.date(), type=kind)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return pa.scalar(moment.replace(tzinfo=dt.UTC), type=kind)
    return pa.scalar(moment, type=kind)


def _bounds(value: str, unit: str) -> tuple[dt.datetime, dt.datetime]:
    """The partition's first instant and the next one's."""
    try:
        year = int(value[:4])
        month = int(value[4:6]) if unit != "YEAR" else 1
        day = int(value[6:8]) if unit in ("DAY", "HOUR") else 1
        hour = int(value[8:10]) if unit == "HOUR" else 0
        start = dt.datetime(year, month, day, hour)
        if unit == "HOUR":
            end = start + dt.timedelta(hours=1)
        elif unit == "DAY":
            end = start + dt.timedelta(days=1)
        elif unit == "MONTH":
            end = start.replace(year=year + month // 12, month=month % 12 + 1)
        else:
            end = start.replace(year=year + 1)
    except (ValueError, OverflowError):
        raise SinkOptionError(OPTION, f"{value!r} is not a date ({FORMAT_OF_UNIT[unit]})") from None
    return start, end
