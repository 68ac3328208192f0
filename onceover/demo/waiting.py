"""Waiting in the demo: poll a condition until it holds, a deadline passes, or Ctrl-C."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from onceover.errors import OnceoverError

T = TypeVar("T")

POLL_S = 0.25
"""Between two looks; the things waited for take seconds, so this costs nothing."""


def poll(what: str, probe: Callable[[], T | None], timeout_s: float, stop: threading.Event) -> T:
    """Call ``probe`` until it returns a value and return it.

    Raises :class:`OnceoverError` naming ``what`` once ``timeout_s`` has passed, and
    KeyboardInterrupt when ``stop`` is set (Ctrl-C or SIGTERM: the demo ends as a
    Ctrl-C would, stopping what it started on the way out).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise OnceoverError(f"{what} did not happen within {timeout_s:.0f} s")
        if stop.wait(POLL_S):
            raise KeyboardInterrupt
