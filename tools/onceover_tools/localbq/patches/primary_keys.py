"""``primary_keys``: a table keeps the primary key ``tables.insert`` gives it.

BigQuery's Table resource has ``tableConstraints`` (``primaryKey.columns``; "Primary key
constraints ... are not enforced": NOT ENFORCED keys, the Table resource reference), set
by ``tables.insert`` and ``tables.update`` and answered by ``tables.get``; change data
capture needs one ("You must declare primary keys for the destination table",
change-data-capture: composite keys of up to 16 columns). bqemulator's catalog has no such
field and its routes drop the block (measured: insert answers none, get answers none).
The patch keeps each table's key beside the catalog (a catalog entry cannot take another
field), by project, dataset and table: set by an insert or an update that gives the block,
kept by an update that gives none, forgotten by an insert without one (a table made again
under the same name), and answered on get. :func:`key_of` and :func:`set_key` read and
set a table's key for the patches that need it (``ddl_primary_keys``: keys declared by
DDL; ``change_data_capture``: the key CDC changes are applied by).

Pinned by ``tests/localbq/test_patches.py``:
``test_a_table_created_with_a_primary_key_answers_it``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

_lock = threading.Lock()
_keys: dict[tuple[str, str, str], dict[str, Any]] = {}
"""(project, dataset, table) → the table's ``tableConstraints`` block, as given."""


def apply() -> None:
    """Read ``tableConstraints`` on insert and update, and answer it on get."""
    from bqemulator.api.routes import tables

    def reading(original: Callable[..., Any]) -> Callable[..., Any]:
        def _rest_to_table_meta(
            project_id: str, dataset_id: str, body: dict[str, Any], clock: Any,
            existing: Any = None,
        ) -> Any:  # fmt: skip
            meta = original(project_id, dataset_id, body, clock, existing)
            where = (project_id, dataset_id, str(meta.table_id))
            block = body.get("tableConstraints")
            with _lock:
                if isinstance(block, dict):
                    _keys[where] = block
                elif existing is None:  # a new table: none of an earlier one's
                    _keys.pop(where, None)
            return meta

        return _rest_to_table_meta

    def answering(original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_to_rest(table: Any) -> dict[str, Any]:
            body: dict[str, Any] = original(table)
            with _lock:
                block = _keys.get((table.project_id, table.dataset_id, table.table_id))
            if block is not None:
                body["tableConstraints"] = block
            return body

        return _table_to_rest

    wrap(tables, "_rest_to_table_meta", reading)
    wrap(tables, "_table_to_rest", answering)


def key_of(project: str, dataset: str, table: str) -> tuple[str, ...] | None:
    """The columns of the table's primary key, as declared; None when it has none."""
    with _lock:
        block = _keys.get((project, dataset, table))
    key = block.get("primaryKey") if isinstance(block, dict) else None
    columns = key.get("columns") if isinstance(key, dict) else None
    return tuple(str(c) for c in columns) if isinstance(columns, list) and columns else None


def set_key(project: str, dataset: str, table: str, columns: tuple[str, ...] | None) -> None:
    """Give the table the primary key ``columns`` (None: no primary key), keeping the rest
    of its ``tableConstraints`` (foreign keys) as they were."""
    where = (project, dataset, table)
    with _lock:
        block = dict(_keys.get(where) or {})
        if columns:
            block["primaryKey"] = {"columns": list(columns)}
        else:
            block.pop("primaryKey", None)
        if block:
            _keys[where] = block
        else:
            _keys.pop(where, None)
