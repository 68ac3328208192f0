"""Group commit: event batches posted at the same time stored in one transaction.

A transaction costs about the same whatever it holds: a commit (on SQLite an fsync of
its log), the runs locked, the streams loaded, the rollups upserted; at the sink's 500
events a batch that fixed cost was a large share of ingest's CPU (docs/journal/profiling.md,
"Group commit"). While one transaction runs, the batches that arrive wait in a queue;
the next transaction takes them all, up to ``max_events``, in the order they came.
Nothing is answered before the commit that holds it, so a batch answered is a batch
stored, as before.

A batch is still all or none, and on its own: when a group's transaction fails for any
reason but a collision (which :func:`ingest_batches` retries), each of its batches is
stored again alone, so one bad batch fails only its own POST.

The thread that finds no transaction running leads: it stores the oldest waiting
batches, its own among them or not, until its own is stored, then hands the lead to
a waiting thread. No thread of its own, nothing to start or stop.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from prometheus_client import Gauge
from sqlalchemy import Engine

from onceover_backend.services.ingest.transaction import EventBatch, Ingested, ingest_batches

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Waiting:
    batch: EventBatch
    result: Ingested | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def outcome(self) -> Ingested:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class GroupCommit:
    """Stores each batch given to :meth:`ingest`, with the batches given meanwhile from
    other threads in the same transaction; one transaction at a time.

    One at a time on PostgreSQL too: there, two at once stored no more than one
    (docs/journal/profiling.md, "Group commit"), and a single writer keeps a process's ingest
    from taking every core from the dashboard's reads."""

    def __init__(self, engine: Engine, *, max_events: int, depth: Gauge | None = None) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be at least 1, not {max_events}")
        self._engine = engine
        self._max_events = max_events
        self._leading = False
        self._queue: deque[_Waiting] = deque()
        self._changed = threading.Condition()
        self._depth = depth  # the queue's length, for GET /metrics

    def ingest(self, batch: EventBatch) -> Ingested:
        """Store ``batch`` (blocking): its own result, or its own error."""
        waiting = _Waiting(batch)
        with self._changed:
            self._queue.append(waiting)
            self._measure()
            while not waiting.done and self._leading:
                self._changed.wait()
            if waiting.done:
                return waiting.outcome()
            self._leading = True
        try:
            while not waiting.done:
                with self._changed:
                    group = self._take()
                self._store(group)
                with self._changed:
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._leading = False
                self._changed.notify_all()
        return waiting.outcome()

    def waiting(self) -> int:
        """Batches waiting for a transaction (the one running not counted)."""
        with self._changed:
            return len(self._queue)

    def _take(self) -> list[_Waiting]:
        """The oldest waiting batches, at least one (if any), up to ``max_events``."""
        group: list[_Waiting] = []
        events = 0
        while self._queue:
            size = len(self._queue[0].batch.events)
            if group and events + size > self._max_events:
                break
            group.append(self._queue.popleft())
            events += size
        self._measure()
        return group

    def _measure(self) -> None:
        """Called holding the lock, as the queue changes: a gauge set (a float, or a
        word in a file with several workers) costs nothing beside a transaction."""
        if self._depth is not None:
            self._depth.set(len(self._queue))

    def _store(self, group: list[_Waiting]) -> None:
        try:
            try:
                results = ingest_batches(self._engine, [waiting.batch for waiting in group])
            except Exception as exc:
                if len(group) == 1:
                    group[0].error = exc
                    return
                logger.info("a group of %d failed (%s); storing each alone", len(group), exc)
                for waiting in group:
                    try:
                        waiting.result = ingest_batches(self._engine, [waiting.batch])[0]
                    except Exception as alone:  # handed to its own caller
                        waiting.error = alone
            else:
                for waiting, result in zip(group, results, strict=True):
                    waiting.result = result
        finally:
            for waiting in group:
                if not waiting.done:
                    waiting.error = RuntimeError("ingest stopped before this batch was stored")
