"""A table's partitions as BigQuery names them, in SQL: the partition a row falls in and
that partition's id (``20261102`` for a day, ``2026110212`` an hour, ``202611``, ``2026``,
an integer range's start, ``__UNPARTITIONED__`` for a value outside the ranges; NULL for
the NULL partition, which BigQuery calls ``__NULL__``), computed from the row's
partitioning column. Described once: the sink replaces and names the partitions of a
dynamic overwrite by them, the control plane counts those partitions' rows again.

Each expression is a template of ``{c}``, the column as the query names it (quoted,
qualified if need be), for ``str.format``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.cloud.bigquery import Table

NULL_PARTITION = "__NULL__"
UNPARTITIONED = "__UNPARTITIONED__"
TIME_COLUMN_TYPES = ("DATE", "TIMESTAMP", "DATETIME")
"""The column types a table can be partitioned by time on."""
_TRUNC = {"DATE": "DATE_TRUNC", "TIMESTAMP": "TIMESTAMP_TRUNC", "DATETIME": "DATETIME_TRUNC"}
_FORMAT = {"DATE": "FORMAT_DATE", "TIMESTAMP": "FORMAT_TIMESTAMP", "DATETIME": "FORMAT_DATETIME"}
_ID_FORMAT = {"HOUR": "%Y%m%d%H", "DAY": "%Y%m%d", "MONTH": "%Y%m", "YEAR": "%Y"}
"""The partition ids of each time unit (INFORMATION_SCHEMA.PARTITIONS)."""


@dataclass(frozen=True)
class Partitioning:
    """How a table's rows fall into partitions by a column of theirs."""

    column: str
    partition_of: str
    """SQL of ``{c}``: a row's partition, comparable between rows (NULL for NULL)."""
    partition_id: str
    """SQL of ``{c}``: the partition's id as BigQuery names it (NULL for NULL)."""


def time_partitioning(column: str, column_type: str, unit: str | None) -> Partitioning:
    """Partitions by ``unit`` (HOUR, DAY, MONTH, YEAR; DAY if None) of a DATE, TIMESTAMP
    or DATETIME column (:data:`TIME_COLUMN_TYPES`; others raise ValueError)."""
    kind = column_type.upper()
    if kind not in _TRUNC:
        raise ValueError(f"a table partitioned on a {kind} column")
    period = (unit or "DAY").upper()
    truncated = f"{_TRUNC[kind]}({{c}}, {period})"
    return Partitioning(column, truncated, f"{_FORMAT[kind]}('{_ID_FORMAT[period]}', {truncated})")


def range_partitioning(column: str, start: int, end: int, interval: int) -> Partitioning:
    """Integer ranges of ``interval`` from ``start`` to ``end`` (exclusive); a value outside
    them is in ``__UNPARTITIONED__``."""
    outside = f"{{c}} < {int(start)} OR {{c}} >= {int(end)}"
    step = f"DIV({{c}} - {int(start)}, {int(interval)})"
    return Partitioning(
        column,
        f"CASE WHEN {outside} THEN NULL ELSE {step} END",
        f"CASE WHEN {outside} THEN '{UNPARTITIONED}' "
        f"ELSE CAST({int(start)} + {step} * {int(interval)} AS STRING) END",
    )


def partitioning_of(table: Table) -> Partitioning | None:
    """How ``table``'s rows name their partitions; None when they name none (a table not
    partitioned, or partitioned by ingestion time)."""
    columns = {field.name: field.field_type for field in table.schema}
    time = table.time_partitioning
    if time is not None:
        if time.field is None:
            return None
        return time_partitioning(time.field, columns[time.field], time.type_)
    ranges = table.range_partitioning
    if ranges is not None and ranges.field is not None:
        bounds = ranges.range_
        return range_partitioning(ranges.field, bounds.start, bounds.end, bounds.interval)
    return None
