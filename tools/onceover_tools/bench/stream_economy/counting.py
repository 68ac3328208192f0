"""The counting in BigQuery: a stopped query's rows (``COUNT(*)``, ``COUNT(DISTINCT
event_id)``) and the streams the local BigQuery lists for its table, held against what
was read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from onceover_tools.bench.stream_economy.figures import QueryFigure, StreamCount
from onceover_tools.bench.stream_economy.plan import KEY
from onceover_tools.bench.stream_economy.progress import Progress
from onceover_tools.bench.stream_economy.session import Bench


def _created(streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The streams CreateWriteStream made: not ``_default``, which the local BigQuery
    lists once a write used it, but which is never created (nor counted by the quota)."""
    return [s for s in streams if s["streamType"] != "DEFAULT"]


def streams(bench: Bench, table_id: str) -> list[dict[str, Any]]:
    """Every write stream the local BigQuery ever created on ``table_id``."""
    from onceover_tools.localbq.admin import write_streams

    return write_streams(bench.rest_url, table_id)


def created(bench: Bench, table_id: str) -> int:
    """The streams created on ``table_id`` (``_default`` is never created)."""
    return len(_created(streams(bench, table_id)))


def count(bench: Bench, table_id: str) -> tuple[int, int]:
    """The rows in ``table_id`` and their distinct keys."""
    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT {KEY}) AS d FROM `{table_id}`"
    row = next(iter(bench.client.query_and_wait(query)))
    return int(row["n"]), int(row["d"])


def settle(bench: Bench, figure: QueryFigure, progress: Progress, table_id: str) -> None:
    """The batches, rows and streams of a stopped query; raises if its rows are not what
    was read."""
    figure.batches = progress.figures()
    figure.loads = progress.loads
    if progress.rows != figure.expected_rows:
        raise RuntimeError(f"Spark read {progress.rows:,} rows, {figure.expected_rows:,} put")
    if figure.is_floor:  # nothing written: the rows its writers were handed, per batch
        from onceover_tools.bench.handoff import counted_batches

        handed = counted_batches(bench.counted_path(figure.name))
        figure.counted = figure.distinct = sum(handed.values())
        figure.streams = StreamCount(0, 0, {})
        if figure.counted != figure.expected_rows:
            raise RuntimeError(
                f"the floor's writers were handed {figure.counted:,} rows, "
                f"{figure.expected_rows:,} were read"
            )
        return
    figure.counted, figure.distinct = count(bench, table_id)
    listed = _created(streams(bench, table_id))
    figure.streams.total = len(listed)
    figure.streams.types = dict(Counter(str(s["streamType"]) for s in listed))
    holds = (
        f"BigQuery holds {figure.counted:,} rows ({figure.distinct:,} distinct {KEY}), "
        f"{figure.expected_rows:,} were written"
    )
    if figure.exactly_once and not figure.exact:
        raise RuntimeError(holds)
    if not figure.exactly_once and (
        figure.distinct != figure.expected_rows or figure.counted < figure.expected_rows
    ):
        raise RuntimeError(holds)
