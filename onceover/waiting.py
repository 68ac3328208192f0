"""Waiting for a condition: poll it until it holds, with a deadline (never a bare sleep)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(
    probe: Callable[[], T | None],
    timeout_s: float,
    *,
    timed_out: Callable[[], BaseException],
    every_s: float = 0.05,
    between: Callable[[], None] | None = None,
    stop: threading.Event | None = None,
) -> T:
    """Call ``probe`` until it returns a value (anything but ``None``) and return it.

    After each miss ``between`` runs, and may raise (a child process that died need not
    be waited for). Once ``timeout_s`` has passed, the exception ``timed_out()`` makes is
    raised. A set ``stop`` raises KeyboardInterrupt: the caller ends as a Ctrl-C would.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if between is not None:
            between()
        if time.monotonic() > deadline:
            raise timed_out()
        if stop is None:
            time.sleep(every_s)
        elif stop.wait(every_s):
            raise KeyboardInterrupt
