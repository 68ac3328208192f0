"""``linear_column_alignment``: a wide table's append costs time linear in its columns.

bqemulator lined an Arrow append's columns up with the table's by looking each table
column up in a list of the batch's column names built anew for every lookup: quadratic in
the columns, so every append to a table of 10,000 columns took ten thousand times the
lookups of one to a table of 100. BigQuery takes tables of up to 10,000 columns ("Quotas
and limits": maximum columns in a table) at no such cost. The patch finds each column
through a dict built once per append; the table it returns is the same (the table's
column order and types, a missing column NULL, an extra one dropped, a name the batch
holds twice failing as before).

Pinned by ``tests/localbq/test_limits.py``:
``test_an_arrow_append_to_a_10000_column_table_is_not_quadratic_in_its_columns``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Line an Arrow append's columns up with the table's in time linear in the columns."""
    import pyarrow as pa
    from bqemulator.grpc_api import write_servicer

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def _align_to_target(table: pa.Table, target_schema: pa.Schema) -> pa.Table:
            position: dict[str, int | None] = {}
            for index, name in enumerate(table.column_names):
                position[name] = None if name in position else index  # None: there twice
            arrays: list[Any] = []
            for field in target_schema:
                if field.name not in position:
                    arrays.append(pa.nulls(table.num_rows, type=field.type))
                    continue
                i = position[field.name]
                # A name there twice: bqemulator's lookup by name raises, and so does this.
                column = table.column(field.name if i is None else i)
                if column.type != field.type:
                    column = column.cast(field.type)
                arrays.append(column.combine_chunks())
            return pa.Table.from_arrays(arrays, schema=target_schema)

        return _align_to_target

    # _rows_for_request looks the module-level function up by name at each append.
    wrap(write_servicer, "_align_to_target", make)
