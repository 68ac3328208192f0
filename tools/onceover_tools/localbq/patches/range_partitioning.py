"""``range_partitioning``: a table created with integer-range partitioning keeps it.

BigQuery's ``tables.insert`` takes ``rangePartitioning`` (``field`` and ``range``:
``start``, ``end``, ``interval``, "integer-range partitioning": the Table resource
reference) and ``tables.get`` answers it. bqemulator's catalog has the field but its REST
routes neither read nor answer it, so a table the sink creates with the connector's
``partitionRangeStart/End/Interval`` came back unpartitioned. The patch reads the block
on insert and update (an update without it keeps the table's, as for
``timePartitioning``) and answers it on get.

Pinned by ``tests/localbq/test_patches.py``:
``test_a_table_created_with_integer_range_partitioning_answers_it``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Read ``rangePartitioning`` into the table's metadata, and answer it."""
    from bqemulator.api.routes import tables
    from bqemulator.catalog.models import RangePartitioning

    def reading(original: Callable[..., Any]) -> Callable[..., Any]:
        def _rest_to_table_meta(
            project_id: str, dataset_id: str, body: dict[str, Any], clock: Any,
            existing: Any = None,
        ) -> Any:  # fmt: skip
            meta = original(project_id, dataset_id, body, clock, existing)
            block = body.get("rangePartitioning")
            kept: Any
            if isinstance(block, dict) and block.get("field"):
                bounds = block.get("range") or {}
                kept = RangePartitioning(
                    field=str(block["field"]),
                    start=int(bounds.get("start", 0)),
                    end=int(bounds.get("end", 0)),
                    interval=int(bounds.get("interval", 1)),
                )
            else:
                kept = existing.range_partitioning if existing is not None else None
            return meta.model_copy(update={"range_partitioning": kept})

        return _rest_to_table_meta

    def answering(original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_to_rest(table: Any) -> dict[str, Any]:
            body: dict[str, Any] = original(table)
            bounds = table.range_partitioning
            if bounds is not None:
                body["rangePartitioning"] = {
                    "field": bounds.field,
                    "range": {
                        "start": str(bounds.start),
                        "end": str(bounds.end),
                        "interval": str(bounds.interval),
                    },
                }
            return body

        return _table_to_rest

    wrap(tables, "_rest_to_table_meta", reading)
    wrap(tables, "_table_to_rest", answering)
