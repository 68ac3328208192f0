"""Waiting in the demo: poll a condition until it holds, a deadline passes, or Ctrl-C."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from onceover.errors import OnceoverError
from onceover.waiting import poll_until

T = TypeVar("T")

POLL_S = 0.25
"""Between two looks; the things waited for take seconds, so this costs nothing."""


def poll(what: str, probe: Callable[[], T | None], timeout_s: float, stop: threading.Event) -> T:
    """Call ``probe`` until it returns a value and return it.

    Raises :class:`OnceoverError` naming ``what`` once ``timeout_s`` has passed, and
    KeyboardInterrupt when ``stop`` is set (Ctrl-C or SIGTERM: the demo ends as a
    Ctrl-C would, stopping what it started on the way out).
    """
    return poll_until(
        probe,
        timeout_s,
        timed_out=lambda: OnceoverError(f"{what} did not happen within {timeout_s:.0f} s"),
        every_s=POLL_S,
        stop=stop,
    )
