"""Change data capture rows: ``_CHANGE_TYPE`` and ``_CHANGE_SEQUENCE_NUMBER`` checked, and
a sequence number given to every row that has none, the same on every replay.

BigQuery applies a CDC row (an UPSERT or a DELETE of the row with its primary key) only
on the table's ``_default`` stream, which takes no offsets: a retried request, a task
run twice or a replayed micro-batch appends its changes again. Sent again with the same
``_CHANGE_SEQUENCE_NUMBER``, a change converges: BigQuery keeps, per key, the change
with the greatest sequence number (ties to the later ingest, here the same change). So
the *effect* is exactly once when every row's number is the same on every attempt and
orders the changes as the source did; without numbers, a replay of an old batch lands
after a newer one and brings its old values (or a deleted row) back.

The rule the sink numbers rows by when the DataFrame has no ``_CHANGE_SEQUENCE_NUMBER``
(:func:`derived_sequence_numbers`), in three hexadecimal sections::

    <write base>/<partition>/<row>

- *write base*: microseconds since the epoch when the first task of this write's batch
  started, kept in the ledger (``onceover_jobs.sink.ledger.change_sequence``): every
  retry and replay of the batch reads the same one, a later batch of the query has a
  greater one, and so does a later run;
- *partition*: the Spark partition the row is in;
- *row*: its place in the partition, from 0.

What follows from it (the guide's "Change data capture" says it to users): batches and
runs are ordered by when they ran; within a batch, a key changed in two partitions keeps
the change of the higher partition, and a key changed twice in one partition keeps the
later row. A source that changes a key more than once per batch should bring its
changes to one partition in their order (``repartition(key).sortWithinPartitions(seq)``)
or give its own ``_CHANGE_SEQUENCE_NUMBER`` (a log sequence number, say), which the sink
checks and sends as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from onceover_jobs.sink.errors import ChangeRowsError

CHANGE_TYPE = "_CHANGE_TYPE"
CHANGE_SEQUENCE_NUMBER = "_CHANGE_SEQUENCE_NUMBER"
PSEUDO_COLUMNS = (CHANGE_TYPE, CHANGE_SEQUENCE_NUMBER)
"""BigQuery's CDC pseudo-columns: sent with each row, never columns of the table."""
CHANGE_TYPES = ("UPSERT", "DELETE")
MAX_KEY_COLUMNS = 16
"""BigQuery: "Composite primary keys containing up to 16 columns are supported"."""
MAX_SECTIONS = 4
MAX_SECTION_DIGITS = 16
"""BigQuery: up to four ``/``-separated sections of up to 16 hexadecimal digits each."""
_SECTION = re.compile(r"^[0-9A-Fa-f]{1,16}$")
_WELL_FORMED = r"^[0-9A-Fa-f]{1,16}(/[0-9A-Fa-f]{1,16}){0,3}$"
NAMED_IN_ERROR = 5
"""Rows a refusal names one by one."""

PSEUDO_FIELDS = pa.schema(
    [pa.field(CHANGE_TYPE, pa.string()), pa.field(CHANGE_SEQUENCE_NUMBER, pa.string())]
)
"""The pseudo-columns as the sink sends them, behind the table's columns."""


def with_pseudo(schema: pa.Schema) -> pa.Schema:
    """``schema`` (the table's columns sent) with the pseudo-columns behind them."""
    return pa.schema([*schema, *PSEUDO_FIELDS], metadata=schema.metadata)


def pseudo_schema_fields() -> list[Any]:
    """The pseudo-columns as the proto writer schema declares them: STRING fields."""
    from google.cloud.bigquery import SchemaField

    return [SchemaField(name, "STRING") for name in PSEUDO_COLUMNS]


@dataclass(frozen=True)
class ChangeCapture:
    """A CDC write, as the driver checked it: what each task needs to send its rows."""

    key: tuple[str, ...]
    """The table's primary key columns, as the table spells them."""
    change_type: str
    """The DataFrame's ``_CHANGE_TYPE`` column, as it spells it."""
    sequence_number: str | None
    """The DataFrame's ``_CHANGE_SEQUENCE_NUMBER`` column, or None: derived."""


def pseudo_columns(names: list[str]) -> dict[str, str]:
    """The CDC pseudo-columns among a DataFrame's column names: BigQuery's name → the
    DataFrame's spelling (names match case-insensitively, as BigQuery's do)."""
    found: dict[str, str] = {}
    for name in names:
        for pseudo in PSEUDO_COLUMNS:
            if name.casefold() == pseudo.casefold():
                found[pseudo] = name
    return found


def check_sequence_number(text: str) -> str | None:
    """Why ``text`` is not a ``_CHANGE_SEQUENCE_NUMBER`` BigQuery takes; None when it is."""
    sections = text.split("/")
    if len(sections) > MAX_SECTIONS:
        return f"{len(sections)} sections (at most {MAX_SECTIONS}, separated by '/')"
    for section in sections:
        if not _SECTION.match(section):
            if len(section) > MAX_SECTION_DIGITS and all(
                c in "0123456789abcdefABCDEF" for c in section
            ):
                return f"section {section!r} has more than {MAX_SECTION_DIGITS} hex digits"
            return f"section {section!r} is not hexadecimal (0-9, A-F)"
    return None


def derived_sequence_numbers(base: int, partition: int, start_row: int, rows: int) -> pa.Array:
    """The sequence numbers of ``rows`` rows of ``partition`` from its row ``start_row``,
    under the write's ``base`` (the rule in this module's docstring)."""
    prefix = f"{base:X}/{partition:X}/"
    return pa.array([f"{prefix}{row:X}" for row in range(start_row, start_row + rows)], pa.string())


def change_rows(
    source: pa.RecordBatch,
    converted: pa.RecordBatch,
    capture: ChangeCapture,
    *,
    derived: pa.Array | None,
    where: str,
    start_row: int,
) -> pa.RecordBatch:
    """``converted`` (the table's columns of ``source``) with the pseudo-columns behind
    them: the change type upper-cased, the sequence number given (checked) or
    ``derived``. A row that cannot be a change stops the write, naming the rows and
    columns: a NULL key column, a change type other than UPSERT and DELETE, a sequence
    number BigQuery would refuse."""
    problems: list[str] = []
    for column in capture.key:
        values = converted.column(converted.schema.get_field_index(column))
        if values.null_count:
            problems.append(
                f"primary key column {column} is NULL at rows "
                f"{_rows(pc.is_null(values), start_row)}"
            )
    types = pc.utf8_upper(source.column(source.schema.get_field_index(capture.change_type)))
    bad_type = pc.invert(pc.fill_null(pc.is_in(types, pa.array(CHANGE_TYPES)), False))
    if pc.any(bad_type).as_py():
        shown = sorted({str(v) for v in pc.filter(types, bad_type).to_pylist()})[:NAMED_IN_ERROR]
        problems.append(
            f"{CHANGE_TYPE} is {', '.join(shown)} at rows {_rows(bad_type, start_row)}: "
            f"BigQuery takes {' and '.join(CHANGE_TYPES)}"
        )
    if capture.sequence_number is not None:
        given = source.column(source.schema.get_field_index(capture.sequence_number))
        sequences = given.cast(pa.string())
        problems.extend(_sequence_problems(sequences, start_row))
    else:
        assert derived is not None
        sequences = derived
    if problems:
        raise ChangeRowsError(f"{where}: {'; '.join(problems)}. Nothing of these rows was sent")
    return pa.RecordBatch.from_arrays(
        [*converted.columns, types.cast(pa.string()), sequences],
        schema=pa.schema([*converted.schema, *PSEUDO_FIELDS]),
    )


def counted_changes(rows: pa.RecordBatch) -> tuple[int, int]:
    """The upserts and deletes among ``rows`` (as :func:`change_rows` made them)."""
    types = rows.column(rows.schema.get_field_index(CHANGE_TYPE))
    deletes = int(pc.sum(pc.equal(types, "DELETE")).as_py() or 0)
    return rows.num_rows - deletes, deletes


def _sequence_problems(sequences: pa.Array, start_row: int) -> list[str]:
    problems: list[str] = []
    if sequences.null_count:
        problems.append(
            f"{CHANGE_SEQUENCE_NUMBER} is NULL at rows {_rows(pc.is_null(sequences), start_row)} "
            "(give every row one, or leave the column out for the sink's own)"
        )
    well_formed = pc.match_substring_regex(sequences, _WELL_FORMED)
    bad = pc.invert(pc.fill_null(well_formed, True))
    if pc.any(bad).as_py():  # named one by one only here, off the vectorised path
        for row, text in enumerate(sequences.to_pylist()):
            why = None if text is None else check_sequence_number(text)
            if why is not None:
                problems.append(
                    f"{CHANGE_SEQUENCE_NUMBER} {text!r} at row {start_row + row}: {why}"
                )
                if len(problems) >= NAMED_IN_ERROR:
                    break
    return problems


def _rows(mask: pa.Array, start_row: int) -> str:
    """The rows ``mask`` marks, as offsets in the partition: the first few, then a count."""
    marked = [start_row + i for i, v in enumerate(mask.to_pylist()) if v]
    shown = ", ".join(str(i) for i in marked[:NAMED_IN_ERROR])
    more = len(marked) - NAMED_IN_ERROR
    return f"{shown} and {more} more" if more > 0 else shown
