"""A change data capture write's rows, on an executor: the pseudo-columns put behind the
table's columns, each row checked (its key set, its change type, its sequence number) and
numbered by the rule of :mod:`onceover_jobs.sink.rows.change_capture` when the DataFrame
gives no sequence number."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from onceover_jobs.sink.errors import ChangeRowsError
from onceover_jobs.sink.rows.change_capture import (
    CHANGE_SEQUENCE_NUMBER,
    CHANGE_TYPE,
    CHANGE_TYPES,
    ChangeCapture,
    check_sequence_number,
)

NAMED_IN_ERROR = 5
"""Rows a refusal names one by one."""
_WELL_FORMED = r"^[0-9A-Fa-f]{1,16}(/[0-9A-Fa-f]{1,16}){0,3}$"

PSEUDO_FIELDS = pa.schema(
    [pa.field(CHANGE_TYPE, pa.string()), pa.field(CHANGE_SEQUENCE_NUMBER, pa.string())]
)
"""The pseudo-columns as the sink sends them, behind the table's columns."""


def with_pseudo(schema: pa.Schema) -> pa.Schema:
    """``schema`` (the table's columns sent) with the pseudo-columns behind them."""
    return pa.schema([*schema, *PSEUDO_FIELDS], metadata=schema.metadata)


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
