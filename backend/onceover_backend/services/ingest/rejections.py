"""The rows BigQuery refused, as a run keeps them: the newest few, each row once."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from onceover import events as ev

REJECTIONS_KEPT = 20
"""Rows a run's page shows of those BigQuery refused: the newest, each row once."""


def rejections(event: ev.RowsRejected) -> list[dict[str, Any]]:
    """The samples of a ``rows_rejected`` event as a run keeps them (JSON)."""
    where = {
        "time": event.time.astimezone(UTC).isoformat(), "table": event.table,
        "query_id": event.query_id, "batch_id": event.batch_id, "write": event.write,
        "partition": event.partition, "attempt": event.attempt, "stream": event.stream,
        "dead_letter_table": event.dead_letter_table,
    }  # fmt: skip
    return [{**where, **sample.model_dump(mode="json")} for sample in event.samples]


def _rejection_key(sample: dict[str, Any]) -> tuple[Any, ...]:
    """One row of a write: a retried task names the same rows again."""
    return tuple(
        sample.get(name)
        for name in ("table", "query_id", "batch_id", "write", "partition", "offset", "column")
    )


def merge_rejections(kept: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest :data:`REJECTIONS_KEPT` of ``kept`` and ``new``, newest first, each row
    once (its latest report)."""
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for sample in sorted([*kept, *new], key=lambda s: s["time"], reverse=True):
        newest.setdefault(_rejection_key(sample), sample)
    return list(newest.values())[:REJECTIONS_KEPT]
