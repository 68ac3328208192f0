"""Background work the backend repeats while it runs (the stall sweep, auto-resume)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)


async def every(
    interval_s: float, stop: asyncio.Event, work: Callable[[], object], what: str
) -> None:
    """Run ``work`` on a thread every ``interval_s`` until ``stop`` is set.

    A round that raises is logged and the next one runs as planned: the database may be
    down for a while, and background work must outlive that.
    """
    while True:
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
            return
        except TimeoutError:
            pass
        try:
            await asyncio.to_thread(work)
        except Exception:
            logger.exception("%s failed", what)
