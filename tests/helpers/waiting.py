"""The tests' one wait: look at a condition until it holds, failing at a deadline.

Every test that waits for something another thread or process does (a delivery, a
status, a worker registering) waits through :func:`wait_until`; none sleeps a fixed
time, and none writes its own deadline loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from onceover.waiting import poll_until

T = TypeVar("T")


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout_s: float,
    *,
    every_s: float = 0.05,
    between: Callable[[], None] | None = None,
    seen: Callable[[], object] | None = None,
) -> T:
    """Call ``probe`` until it returns a value (anything but ``None``) and return it.

    ``between`` runs after each miss and may fail the wait early (a child that died
    need not be waited for). Past ``timeout_s`` an AssertionError names ``what`` and,
    when ``seen`` is given, what it returns then (the last state, a log's tail).
    """

    def timed_out() -> AssertionError:
        message = f"{what} did not happen within {timeout_s:g} s"
        return AssertionError(message if seen is None else f"{message}; seen: {seen()}")

    return poll_until(probe, timeout_s, timed_out=timed_out, every_s=every_s, between=between)
