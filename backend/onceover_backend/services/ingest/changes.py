"""Change announcements for Server-Sent Events: which runs changed, as they change.

Across replicas the database is the source of truth: a listener asks it for runs whose
``updated_at`` moved. Within one replica, :class:`ChangeFeed` wakes listeners at once
after an ingest commits, so a page updates without waiting for the next look.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover_backend.tables import Run

# Transactions commit in a different order than their timestamps were taken, so each
# look goes this far back before the cursor and skips what was already announced.
COMMIT_SKEW = timedelta(seconds=10)


class ChangeFeed:
    """Wakes every waiting listener (each on its own event loop) when told of a change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        """Safe from any thread."""
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    async def wait(self, timeout_s: float) -> bool:
        """True when notified within ``timeout_s``."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                self._waiters.discard(entry)


@dataclass
class RunChange:
    run_id: str
    status: str
    rows_committed: int
    updated_at: datetime


@dataclass
class ChangeCursor:
    """What one listener has announced so far."""

    since: datetime
    announced: dict[str, datetime] = field(default_factory=dict)

    def changed_runs(self, engine: Engine, run_id: str | None = None) -> list[RunChange]:
        """Runs changed since the last call (each announced once per change)."""
        query = select(Run).where(col(Run.updated_at) > self.since - COMMIT_SKEW)
        if run_id is not None:
            query = query.where(Run.run_id == run_id)
        with Session(engine) as session:
            runs = list(session.exec(query.order_by(col(Run.updated_at))))
        fresh = [run for run in runs if self.announced.get(run.run_id) != run.updated_at]
        for run in fresh:
            self.announced[run.run_id] = run.updated_at
            self.since = max(self.since, run.updated_at)
        horizon = self.since - COMMIT_SKEW
        self.announced = {k: v for k, v in self.announced.items() if v > horizon}
        return [
            RunChange(run.run_id, run.status, run.rows_committed, run.updated_at) for run in fresh
        ]
