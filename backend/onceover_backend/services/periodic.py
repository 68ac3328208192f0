"""Background work the backend repeats while it runs (the stall sweep, auto-resume, alert
evaluation, webhook dispatch, retention).

Each loop runs its rounds on a thread of its own, never on the event loop's default
executor: ``asyncio.to_thread`` callers (anything, up to a flood of requests) share that
one, and a round queued behind them sent its webhooks late. A loop's rounds are
sequential, so one thread is all it needs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)


async def every(
    interval_s: float, stop: asyncio.Event, work: Callable[[], object], what: str
) -> None:
    """Run ``work`` on this loop's own thread every ``interval_s`` until ``stop`` is set.

    A round that raises is logged and the next one runs as planned: the database may be
    down for a while, and background work must outlive that. Once ``stop`` is set, the
    round under way ends and the thread with it.
    """
    name = what.removeprefix("the ").replace(" ", "-")
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"onceover-{name}")
    try:
        while True:
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
                return
            except TimeoutError:
                pass
            try:
                await loop.run_in_executor(executor, work)
            except Exception:
                logger.exception("%s failed", what)
    finally:
        # Only a cancelled loop leaves a round running; it ends on its own, unwaited.
        executor.shutdown(wait=False, cancel_futures=True)
