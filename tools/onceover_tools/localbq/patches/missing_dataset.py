"""``missing_dataset``: a table created in a dataset that does not exist is NOT_FOUND.

BigQuery answers ``tables.insert`` into a missing dataset with HTTP 404, reason
``notFound``, "Not found: Dataset <project>:<dataset>" (the Table resource's
``tables.insert``; datasets are never created by it). bqemulator ran the table's DuckDB
``CREATE TABLE`` before it looked for the dataset, so DuckDB's CatalogException ("Schema
with name ... does not exist") came back as HTTP 500, which Google's clients retry as a
transient error for their whole deadline (ten minutes) before a write could say that the
dataset is missing. The patch answers the DuckDB error of a ``CREATE TABLE`` whose schema
(a dataset) is missing with the catalog's own not-found error for that dataset.

Pinned by ``tests/localbq/test_patches.py``:
``test_a_table_inserted_into_a_missing_dataset_is_not_found``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

_MISSING_SCHEMA = re.compile(r"Schema with name \"?(?P<schema>[^\s\"]+)\"? does not exist")
SCHEMA_SEPARATOR = "__"
"""bqemulator names a dataset's DuckDB schema ``<project>__<dataset>``; a project id
holds no underscore, so the first ``__`` ends it."""


def apply() -> None:
    """Answer a CREATE TABLE into a missing schema as the missing dataset."""
    import duckdb
    from bqemulator.domain.errors import ResourceRef, resource_not_found
    from bqemulator.storage.engine import DuckDBEngine

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def execute(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, sql, *args, **kwargs)
            except duckdb.CatalogException as exc:
                found = _MISSING_SCHEMA.search(str(exc))
                if not sql.lstrip().upper().startswith("CREATE TABLE") or found is None:
                    raise
                project, _, dataset = found["schema"].partition(SCHEMA_SEPARATOR)
                raise resource_not_found(ResourceRef("dataset", project, dataset)) from exc

        return execute

    wrap(DuckDBEngine, "execute", make)
