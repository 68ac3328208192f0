"""``schema_update``: a table's schema widened by tables.update / patch widens its storage.

BigQuery ("Modifying table schemas"): a table's schema may be changed by
``tables.update`` or ``tables.patch`` to add columns (NULLABLE or REPEATED) and to relax
REQUIRED columns to NULLABLE, and rows written afterwards carry the new columns.
bqemulator changed only its catalog: the DuckDB table under it kept its old columns, so
the next commit failed ("table t has 2 columns but 3 values were supplied"). The patch
adds each new top-level column to the DuckDB table as the table's creation would have
made it (bqemulator's own type mapping). Relaxing needs nothing there: bqemulator keeps
no NOT NULL in DuckDB (REQUIRED is checked per row by ``row_errors``, from the catalog).
A field added inside an existing RECORD is not carried into DuckDB here (its STRUCT type
would have to change); the sink's own tests add top-level columns.

Pinned by ``tests/localbq/test_patches.py``:
``test_a_column_added_by_a_schema_update_takes_rows``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    from bqemulator.api.routes.tables import _field_to_rest
    from bqemulator.catalog.memory_repository import MemoryCatalogRepository
    from bqemulator.storage.sql_identifiers import quoted_table_ref
    from bqemulator.storage.type_map import bq_schema_to_duckdb_columns

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def update_table(catalog: Any, table: Any) -> Any:
            before = catalog.get_table(table.project_id, table.dataset_id, table.table_id)
            updated = original(catalog, table)
            engine = getattr(catalog, "_engine", None)  # none: a cache, not the catalog
            if before is None or engine is None or table.table_type != "TABLE":
                return updated
            known = {f.name.casefold() for f in before.schema_.fields}
            added = [f for f in updated.schema_.fields if f.name.casefold() not in known]
            if not added or not before.schema_.fields:
                return updated
            target = quoted_table_ref(table.project_id, table.dataset_id, table.table_id)
            columns = bq_schema_to_duckdb_columns([_field_to_rest(f) for f in added])
            for name, kind in columns:
                engine.execute(f'ALTER TABLE {target} ADD COLUMN "{name}" {kind}')
            return updated

        return update_table

    # The launcher's local BigQuery keeps its catalog in memory (its ephemeral mode), the
    # catalog holding the engine; the persistent catalog's cache holds none.
    wrap(MemoryCatalogRepository, "update_table", make)
