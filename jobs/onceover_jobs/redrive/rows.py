"""A set-aside row read back from its JSON text into the table's types, for Spark.

The dead-letter table keeps each row as the sink sent it (``onceover_jobs.sink.rows.
dead_letter.row_json``): the table's column names, bytes as base64, NUMERIC and
BIGNUMERIC as decimal text, dates and times in ISO 8601, RECORDs as objects, REPEATED
columns as arrays, a RANGE as ``{"start": ..., "end": ...}``. Each value is turned back
into what PySpark takes for the column's Spark type, and the DataFrame is given the
Spark schema the sink maps onto the table's columns (``onceover_jobs.sink.rows.schema``).
A change data capture row keeps its ``_CHANGE_TYPE`` and ``_CHANGE_SEQUENCE_NUMBER``, so
it is sent again as the change it was, with its original number.

A value that does not read back as its column's type (the dead-letter row edited by hand
into something else) refuses the re-drive before a row is sent, naming the row and the
column.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.rows.change_capture import PSEUDO_COLUMNS

if TYPE_CHECKING:
    from google.cloud.bigquery import SchemaField
    from pyspark.sql.types import DataType, StructType

BIGNUMERIC_SCALE = 18
"""Spark's widest decimal is (38, s): BIGNUMERIC values are read at this scale; one that
needs more digits refuses the re-drive, naming it, rather than being rounded."""


class UnreadableRowError(SinkOptionError):
    """A set-aside row whose JSON no longer reads as its table's columns."""


def spark_schema(fields: Sequence[SchemaField], names: Sequence[str]) -> StructType:
    """The Spark schema of ``fields`` (the table's), then the CDC pseudo-columns among
    ``names`` (the rows' keys)."""
    from pyspark.sql.types import StringType, StructField, StructType

    columns = [StructField(f.name, _spark_type(f), nullable=True) for f in fields]
    pseudo = [StructField(p, StringType(), True) for p in PSEUDO_COLUMNS if p in names]
    return StructType(columns + pseudo)


def _spark_type(field: SchemaField) -> DataType:
    from pyspark.sql import types as t

    kind = field.field_type.upper()
    element: DataType
    if kind in ("RECORD", "STRUCT"):
        element = t.StructType([t.StructField(f.name, _spark_type(f), True) for f in field.fields])
    elif kind == "RANGE":
        bound = _scalar_type(str(field.range_element_type.element_type).upper())
        bounds = [t.StructField("start", bound, True), t.StructField("end", bound, True)]
        element = t.StructType(bounds)
    else:
        element = _scalar_type(kind)
    return t.ArrayType(element, containsNull=False) if field.mode == "REPEATED" else element


def _scalar_type(kind: str) -> DataType:
    from pyspark.sql import types as t

    scalars: dict[str, DataType] = {
        "STRING": t.StringType(), "JSON": t.StringType(), "GEOGRAPHY": t.StringType(),
        "BYTES": t.BinaryType(), "INTEGER": t.LongType(), "INT64": t.LongType(),
        "FLOAT": t.DoubleType(), "FLOAT64": t.DoubleType(), "BOOLEAN": t.BooleanType(),
        "BOOL": t.BooleanType(), "NUMERIC": t.DecimalType(38, 9),
        "DECIMAL": t.DecimalType(38, 9), "BIGNUMERIC": t.DecimalType(38, BIGNUMERIC_SCALE),
        "BIGDECIMAL": t.DecimalType(38, BIGNUMERIC_SCALE), "DATE": t.DateType(),
        "TIMESTAMP": t.TimestampType(), "DATETIME": t.TimestampNTZType(),
    }  # fmt: skip
    found = scalars.get(kind)
    if found is None:
        raise UnreadableRowError("dead_letter", f"a {kind} column cannot be re-driven yet")
    return found


def read_row(text: str, fields: Sequence[SchemaField], where: str) -> dict[str, Any]:
    """The row ``text`` (a dead-letter row's JSON) as values of ``fields``' Spark types."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise UnreadableRowError("dead_letter", f"{where}: the row is not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise UnreadableRowError("dead_letter", f"{where}: the row is not a JSON object")
    by_name = {name.casefold(): value for name, value in raw.items()}
    row = {f.name: _value(by_name.get(f.name.casefold()), f, f"{where}, column {f.name}")
           for f in fields}  # fmt: skip
    for pseudo in PSEUDO_COLUMNS:
        if pseudo.casefold() in by_name:
            row[pseudo] = by_name[pseudo.casefold()]
    return row


def _value(value: Any, field: SchemaField, where: str) -> Any:
    if value is None:
        return [] if field.mode == "REPEATED" else None
    if field.mode == "REPEATED":
        if not isinstance(value, list):
            raise UnreadableRowError("dead_letter", f"{where}: {value!r} is not an array")
        return [_one(v, field, where) for v in value]
    return _one(value, field, where)


def _one(value: Any, field: SchemaField, where: str) -> Any:
    kind = field.field_type.upper()
    try:
        if kind in ("RECORD", "STRUCT"):
            by_name = {name.casefold(): v for name, v in dict(value).items()}
            return {f.name: _value(by_name.get(f.name.casefold()), f, f"{where}.{f.name}")
                    for f in field.fields}  # fmt: skip
        if kind == "RANGE":
            read = _READERS[str(field.range_element_type.element_type).upper()]
            return {b: None if value.get(b) is None else read(value[b]) for b in ("start", "end")}
        return _READERS[kind](value)
    except (ValueError, TypeError, KeyError, AttributeError, InvalidOperation) as exc:
        raise UnreadableRowError(
            "dead_letter", f"{where}: {value!r} does not read as {kind} ({exc})"
        ) from exc


def _decimal(scale: int) -> Callable[[Any], Decimal]:
    def read(value: Any) -> Decimal:
        number = Decimal(str(value))
        if number.as_tuple().exponent < -scale:  # type: ignore[operator]
            raise ValueError(f"more than {scale} decimal places")
        return number

    return read


def _timestamp(value: Any) -> datetime:
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _text(value: Any) -> str:
    if isinstance(value, dict | list):  # a JSON column's value, parsed with the row
        return json.dumps(value)
    return str(value)


_READERS: dict[str, Callable[[Any], Any]] = {
    "STRING": _text, "JSON": _text, "GEOGRAPHY": _text,
    "BYTES": lambda v: base64.b64decode(str(v), validate=True),
    "INTEGER": int, "INT64": int, "FLOAT": float, "FLOAT64": float,
    "BOOLEAN": bool, "BOOL": bool,
    "NUMERIC": _decimal(9), "DECIMAL": _decimal(9),
    "BIGNUMERIC": _decimal(BIGNUMERIC_SCALE), "BIGDECIMAL": _decimal(BIGNUMERIC_SCALE),
    "DATE": lambda v: date.fromisoformat(str(v)),
    "TIMESTAMP": _timestamp,
    "DATETIME": lambda v: datetime.fromisoformat(str(v)).replace(tzinfo=None),
}  # fmt: skip
