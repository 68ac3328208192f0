"""A query's micro-batches, read from Spark's progress updates as they come."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from onceover.waiting import poll_until
from onceover_tools.bench.stream_economy.figures import BatchFigure
from onceover_tools.bench.stream_economy.plan import POLL_S

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def _batch(progress: Any) -> BatchFigure | None:
    """The figure of one progress update; ``None`` for one of no data (an idle trigger)."""
    durations = progress.durationMs
    if "addBatch" not in durations or not progress.numInputRows:
        return None
    started = datetime.fromisoformat(progress.timestamp).timestamp()
    return BatchFigure(
        batch_id=int(progress.batchId),
        rows=int(progress.numInputRows),
        add_batch_ms=float(durations["addBatch"]),
        trigger_ms=float(durations.get("triggerExecution", durations["addBatch"])),
        started=started,
    )


class Progress:
    """The batches of one query, read from its progress updates as they come."""

    def __init__(self, query: StreamingQuery) -> None:
        self.query = query
        self.batches: dict[int, BatchFigure] = {}
        self.rounds: dict[int, int] = {}
        """Batch id -> the round it ran in; untagged: round 0."""
        self.loads: tuple[float, float] | None = None
        """The machine's load average (1 min) as the query started and as it stopped."""

    def poll(self) -> None:
        """Take the last update; read the recent ones when a batch went by unseen."""
        progress = self.query.lastProgress
        last = _batch(progress) if progress is not None else None
        if last is None or last.batch_id in self.batches:
            return
        if (last.batch_id - 1 in self.batches) or (not self.batches and last.batch_id == 0):
            self.batches[last.batch_id] = last
            return
        for progress in self.query.recentProgress:
            figure = _batch(progress)
            if figure is not None:
                self.batches.setdefault(figure.batch_id, figure)

    def alive(self) -> None:
        if not self.query.isActive:
            raise RuntimeError(f"the query stopped: {self.query.exception()}")

    def wait_for(self, count: int, timeout_s: float) -> None:
        def done() -> bool | None:
            self.poll()
            return True if len(self.batches) >= count else None

        poll_until(done, timeout_s, every_s=POLL_S, between=self.alive, timed_out=lambda: (
            TimeoutError(f"{len(self.batches)} of {count} micro-batches within {timeout_s:.0f} s")
        ))  # fmt: skip

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches.values())

    def tag(self, number: int) -> None:
        """The batches seen and not yet tagged ran in round ``number``."""
        for batch_id in self.batches:
            self.rounds.setdefault(batch_id, number)

    def figures(self) -> list[BatchFigure]:
        return [replace(self.batches[k], round=self.rounds.get(k, 0)) for k in sorted(self.batches)]
