"""Stalled runs: a running run that has sent nothing for too long becomes ``stalled``,
and so does a resuming run whose launched job has not reported for as long.

Safe with several backend replicas on one PostgreSQL: each sweep runs in a
transaction holding a transaction-scoped advisory lock, and a replica that cannot get
it skips its turn (another replica is sweeping). On SQLite the sweep's transaction
takes the database's write lock, which serialises sweeps the same way.
A stalled run that sends anything newer runs again (see the projection).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import and_, col, or_, select

from onceover_backend.core.db import try_advisory_lock, write_transaction
from onceover_backend.services.periodic import every
from onceover_backend.tables import Attempt, Run

logger = logging.getLogger(__name__)

# pg_try_advisory_xact_lock key: "onceover" stall sweep (any constant both replicas share).
ADVISORY_LOCK_KEY = 0x6F6E63656F7601


def mark_stalled(
    engine: Engine, stalled_after: timedelta, now: datetime | None = None
) -> list[str] | None:
    """Mark stalled runs; their ids, or ``None`` when another replica holds the sweep."""
    now = now or datetime.now(UTC)
    with write_transaction(engine) as session:
        if not try_advisory_lock(session, ADVISORY_LOCK_KEY):
            return None
        runs = list(
            session.exec(
                select(Run)
                .where(
                    or_(
                        and_(
                            col(Run.status) == "running",
                            col(Run.last_event_at) < now - stalled_after,
                        ),
                        and_(
                            col(Run.status) == "resuming",
                            col(Run.updated_at) < now - stalled_after,
                        ),
                    )
                )
                .with_for_update(skip_locked=True)  # an ingest holding a run decides it
            )
        )
        for run in runs:
            run.status = "stalled"
            run.updated_at = now
            attempt = session.exec(
                select(Attempt).where(
                    Attempt.run_id == run.run_id, Attempt.attempt_id == run.current_attempt_id
                )
            ).first()
            if attempt is not None and attempt.status in ("running", "resuming"):
                attempt.status = "stalled"
        if runs:
            logger.warning(
                "stalled: %s (nothing heard for %.0f s)",
                ", ".join(r.run_id for r in runs),
                stalled_after.total_seconds(),
            )
        return [run.run_id for run in runs]


async def sweep_forever(
    engine: Engine,
    stalled_after: timedelta,
    interval_s: float,
    stop: asyncio.Event,
    on_change: Callable[[], None],
) -> None:
    """Sweep every ``interval_s`` until ``stop`` is set; a failed sweep is logged, not fatal."""

    def sweep() -> None:
        if mark_stalled(engine, stalled_after):
            on_change()

    await every(interval_s, stop, sweep, "the stalled-run sweep")
