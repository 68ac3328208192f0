"""DATETIME columns fed from Spark strings, as the spark-bigquery-connector takes them
(its PR #1153: before Spark 3.4 had ``timestamp_ntz`` a string was the only way).

The plan (:func:`onceover_jobs.sink.rows.schema.plan_write`) keeps such a column as the
string it is, marked :data:`DATETIME_TEXT`, so the rows a request is cut from, and the
rows a dead-letter table keeps, hold the text as given. The request's rows are made when
it is encoded (:class:`DatetimeTextEncoder`, around the Arrow or proto encoder): each
text is read as BigQuery reads a DATETIME literal::

    YYYY-[M]M-[D]D[( |T)[H]H:[M]M:[S]S[.F]]     F: 1 to 6 fractional digits

(``2024-02-29 13:05:09.5``, ``2024-2-29T13:05:09``, ``2024-02-29`` for midnight),
checked (a real day of years 1 to 9999, hours 0-23, minutes and seconds 0-59) and sent as
BigQuery's DATETIME: microseconds of civil time (``timestamp[us]``) in Arrow, the
``YYYY-MM-DD HH:MM:SS.ffffff`` literal in proto rows. No time zone is applied: a DATETIME
is a wall-clock time.

A text that is not one is a row refused, as BigQuery refuses a row it cannot store: the
request comes out of the encoder with the row named in :attr:`EncodedRows.refused
<onceover_jobs.sink.wire.requests.EncodedRows.refused>` (``Field <column>: ...``), and the
appender hands it to the task's row-error handler before sending anything
(:mod:`onceover_jobs.sink.wire.appender`), which names the row (partition, offset, key,
column), sets it aside with a dead-letter table and sends the rest, or fails the task
naming it (:mod:`onceover_jobs.sink.rows.dead_letter`). Vectorised: one regular
expression and integer arithmetic per column, no Python object per value.

Only whole columns: a DATETIME inside a RECORD, an array or a RANGE takes
``timestamp_ntz`` (the plan says so).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from onceover_jobs.sink.wire.requests import EncodedRows, RowEncoder

if TYPE_CHECKING:  # numpy only where such a column is written: the sink's wheel needs none
    import numpy as np
    import numpy.typing as npt

DATETIME_TEXT = b"onceover.datetime_text"
"""Field metadata key of a planned string column that goes to a DATETIME column."""
SENT = pa.timestamp("us")
"""What such a column is sent as (the plan's type for DATETIME)."""
LITERAL = "YYYY-[M]M-[D]D[( |T)[H]H:[M]M:[S]S[.F]] (F: up to 6 digits)"

_PARTS = ("year", "month", "day", "hour", "minute", "second", "fraction")
_LITERAL_RE = (
    r"^(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[Tt ](?P<hour>\d{1,2}):(?P<minute>\d{1,2}):(?P<second>\d{1,2})"
    r"(?:\.(?P<fraction>\d{1,6}))?)?$"
)
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_US_PER_SECOND = 1_000_000
_SHOWN = 80
"""Characters of a refused text a message shows."""


def parser_missing() -> bool:
    """Whether numpy, which the parsing takes, is missing (the sink's wheel does not
    bring it: only a DATETIME fed from text needs it)."""
    import importlib.util

    return importlib.util.find_spec("numpy") is None


def marked(field: pa.Field) -> pa.Field:
    """``field`` (a string) marked as text for a DATETIME column."""
    return field.with_metadata({**(field.metadata or {}), DATETIME_TEXT: b"1"})


def is_datetime_text(field: pa.Field) -> bool:
    return bool(field.metadata and DATETIME_TEXT in field.metadata)


def sent_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` as the requests carry it: marked columns as DATETIME (``timestamp[us]``)."""
    fields = [pa.field(f.name, SENT) if is_datetime_text(f) else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def parse(text: pa.Array) -> tuple[pa.Array, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """``text`` as DATETIME (``timestamp[us]``, NULL where it is NULL or not one), and two
    masks of the texts that are not one: not in the literal's form; in it, but no such
    day or time."""
    import numpy as np

    text = text.cast(pa.string())
    given = text.is_valid().to_numpy(zero_copy_only=False)
    parts = pc.extract_regex(text, _LITERAL_RE)
    formed = parts.is_valid().to_numpy(zero_copy_only=False)
    numbers = {name: _numbers(parts.field(name), name) for name in _PARTS}
    year, month, day = numbers["year"], numbers["month"], numbers["day"]
    hour, minute, second = numbers["hour"], numbers["minute"], numbers["second"]
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    days_in_month = np.array(_DAYS_IN_MONTH, dtype=np.int64)[np.clip(month, 0, 12)] + (
        (month == 2) & leap
    )
    real = (
        (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= days_in_month)
        & (hour <= 23) & (minute <= 59) & (second <= 59)
    )  # fmt: skip
    valid = formed & real
    seconds = hour * 3600 + minute * 60 + second
    micros = (_days_from_civil(year, month, day) * 86_400 + seconds) * _US_PER_SECOND
    micros += numbers["fraction"]
    sent = pa.array(np.where(valid, micros, 0), type=SENT, mask=~valid)
    return sent, given & ~formed, given & formed & ~real


def refusals(name: str, text: pa.Array) -> tuple[pa.Array, list[tuple[int, str]], list[bytes]]:
    """Column ``name``'s ``text`` as sent, each refused row's (index, message), and the
    refused texts themselves (for the request's digest: a retry must refuse the same)."""
    import numpy as np

    sent, unformed, unreal = parse(text)
    bad = np.flatnonzero(unformed | unreal)
    if not len(bad):
        return sent, [], []
    values = text.take(pa.array(bad, pa.int64())).to_pylist()
    messages = []
    for index, value in zip(bad.tolist(), values, strict=True):
        shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
        why = (
            f"{shown!r} is not a DATETIME literal: BigQuery takes {LITERAL}"
            if unformed[index]
            else f"{shown!r} is no DATETIME: no such day or time (years 1 to 9999)"
        )
        messages.append((index, f"Field {name}: {why}"))
    return sent, messages, [value.encode() for value in values]


class DatetimeTextEncoder:
    """An encoder (Arrow or proto) of rows whose marked columns hold DATETIME text: the
    text parsed and sent as DATETIME, the rows that hold none named in
    :attr:`~onceover_jobs.sink.wire.requests.EncodedRows.refused`."""

    def __init__(self, inner: RowEncoder, schema: pa.Schema) -> None:
        self.inner = inner
        self.columns = [i for i, field in enumerate(schema) if is_datetime_text(field)]
        self.schema = sent_schema(schema)

    def schema_payload(self, request: Any) -> None:
        self.inner.schema_payload(request)

    def encode(self, batch: pa.RecordBatch) -> EncodedRows:
        columns = list(batch.columns)
        refused: list[tuple[int, str]] = []
        texts: list[bytes] = []
        for i in self.columns:
            columns[i], messages, bad = refusals(batch.schema.field(i).name, columns[i])
            refused.extend(messages)
            texts.extend(bad)
        encoded = self.inner.encode(pa.RecordBatch.from_arrays(columns, schema=self.schema))
        if not refused:
            return encoded
        refused.sort()
        return replace(encoded, parts=(*encoded.parts, *texts), refused=tuple(refused))


def with_datetime_text(inner: RowEncoder, schema: pa.Schema) -> RowEncoder:
    """``inner`` for batches of ``schema`` (the plan's): wrapped when a column of it is
    DATETIME text, else itself."""
    if any(is_datetime_text(field) for field in schema):
        return DatetimeTextEncoder(inner, schema)
    return inner


def _numbers(part: pa.Array, name: str) -> npt.NDArray[np.int64]:
    """One matched part as integers: absent (or not matched) as 0; the fraction as
    microseconds (``5`` → 500000)."""
    import numpy as np

    if name == "fraction":
        part = pc.utf8_rpad(part, 6, "0")
    digits = pc.if_else(pc.equal(part, ""), "0", part).fill_null("0")
    numbers: npt.NDArray[np.int64] = (
        digits.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64)
    )
    return numbers


def _days_from_civil(
    year: npt.NDArray[np.int64], month: npt.NDArray[np.int64], day: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    import numpy as np

    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days: npt.NDArray[np.int64] = era * 146_097 + doe - 719_468
    return days
