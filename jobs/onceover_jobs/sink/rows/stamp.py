"""Stamping: the run id and batch id added to every row a ``stamp=true`` write sends.

The driver checks the table can hold the stamps (:func:`check_stamp_columns`) and plans
the write with the two columns appended (:func:`with_stamp_fields`), so the usual schema
checks cover them; each executor then appends the two constant columns to every batch
before conversion (:func:`stamped`). The column names are in :mod:`onceover.stamp`.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from onceover.stamp import BATCH_ID_COLUMN, RUN_ID_COLUMN, add_columns_ddl, missing_stamp_columns
from onceover_jobs.sink.errors import SinkOptionError

STAMP_FIELDS = (pa.field(RUN_ID_COLUMN, pa.string()), pa.field(BATCH_ID_COLUMN, pa.int64()))


def check_stamp_columns(
    table: str, dataframe_columns: Iterable[str], schema: dict[str, str]
) -> None:
    """Raise naming the problem when a stamped write of these columns into a table of
    ``schema`` (top-level column name -> BigQuery type) cannot work."""
    reserved = {field.name for field in STAMP_FIELDS}
    clashing = sorted(name for name in dataframe_columns if name.casefold() in reserved)
    if clashing:
        raise SinkOptionError(
            "stamp",
            f"the DataFrame has column {clashing[0]!r}, which stamp=true writes itself; "
            "drop or rename it",
        )
    missing = missing_stamp_columns(schema)
    if missing:
        raise SinkOptionError(
            "stamp",
            f"table {table} lacks {' and '.join(missing)} (NULLABLE) to hold the stamps; "
            f"add them with {add_columns_ddl(table)}, or create the table with "
            "the load job's --create-table --stamp",
        )


def with_stamp_fields(schema: pa.Schema) -> pa.Schema:
    """The DataFrame's Arrow schema with the two stamp columns appended."""
    for field in STAMP_FIELDS:
        schema = schema.append(field)
    return schema


def stamped(batch: pa.RecordBatch, run_id: str, batch_id: int | None) -> pa.RecordBatch:
    """``batch`` with the run id and batch id (NULL for a batch write) on every row."""
    rows = batch.num_rows
    run_ids = pa.repeat(pa.scalar(run_id, pa.string()), rows)
    batch_ids = (
        pa.nulls(rows, pa.int64())
        if batch_id is None
        else pa.repeat(pa.scalar(batch_id, pa.int64()), rows)
    )
    return pa.RecordBatch.from_arrays(
        [*batch.columns, run_ids, batch_ids], schema=with_stamp_fields(batch.schema)
    )
