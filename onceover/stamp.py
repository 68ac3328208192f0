"""The two columns a stamped write adds to every row: which run and which batch wrote it.

With the sink's ``stamp=true`` each row carries ``_onceover_run_id`` (STRING, the run
id) and ``_onceover_batch_id`` (INT64, the micro-batch id; NULL for a batch write).
Reconciliation then counts a run's and a batch's rows in place, in BigQuery, instead
of assuming the run wrote the whole table. The names are a contract between the sink
(which writes them) and the control plane (which queries them), so they live here.

The values are the same on every replay of a batch, so stamping never turns a retry
into a different row: the Storage Write API's offsets still deduplicate it.
"""

from __future__ import annotations

RUN_ID_COLUMN = "_onceover_run_id"
BATCH_ID_COLUMN = "_onceover_batch_id"
STAMP_COLUMNS: dict[str, str] = {RUN_ID_COLUMN: "STRING", BATCH_ID_COLUMN: "INT64"}
"""Each stamp column and its BigQuery type (both NULLABLE)."""

_LEGACY_TYPES = {"INTEGER": "INT64"}


def missing_stamp_columns(schema: dict[str, str]) -> list[str]:
    """What a table of ``schema`` (column name -> type) lacks to hold stamps, as
    ``"_onceover_run_id STRING"`` items; names match case-insensitively, as in BigQuery."""
    types = {name.casefold(): _LEGACY_TYPES.get(kind, kind) for name, kind in schema.items()}
    return [
        f"{name} {kind}"
        for name, kind in STAMP_COLUMNS.items()
        if types.get(name.casefold()) != kind
    ]


def add_columns_ddl(table: str) -> str:
    """The statement that makes ``table`` (``project.dataset.table``) ready for stamps."""
    columns = ", ".join(f"ADD COLUMN {name} {kind}" for name, kind in STAMP_COLUMNS.items())
    return f"ALTER TABLE `{table}` {columns}"
