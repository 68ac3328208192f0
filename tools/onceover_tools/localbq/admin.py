"""What the local BigQuery's read-only admin endpoint tells: every write stream it ever
created, with its type, state, next offset and row count (bqemulator's
``/admin/streams``). Benchmarks and tests count a job's streams with it."""

from __future__ import annotations

from typing import Any

import httpx


def write_streams(rest_url: str, table_id: str) -> list[dict[str, Any]]:
    """Every write stream created on ``table_id`` (``project.dataset.table``)."""
    project, dataset, table = table_id.split(".")
    answer = httpx.get(f"{rest_url}/admin/streams", timeout=30)
    answer.raise_for_status()
    return [
        s
        for s in answer.json()["writeStreams"]
        if (s["projectId"], s["datasetId"], s["tableId"]) == (project, dataset, table)
    ]
