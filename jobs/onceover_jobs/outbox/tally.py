"""What became of an emitter's events, counted: each event that reaches an end is counted
once under that end (one sent twice is counted twice as delivered)."""

from __future__ import annotations

import threading
from typing import Literal

Outcome = Literal["delivered", "spooled", "rejected", "parked", "dropped"]


class Tally:
    """Counts of events by :data:`Outcome`; safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[Outcome, int] = dict.fromkeys(
            ("delivered", "spooled", "rejected", "parked", "dropped"), 0
        )

    def add(self, outcome: Outcome, events: int) -> None:
        with self._lock:
            self._counts[outcome] += events

    def __getitem__(self, outcome: Outcome) -> int:
        with self._lock:
            return self._counts[outcome]

    def reset_after_fork(self) -> None:
        """In a forked child: a lock of its own, the counts kept."""
        self._lock = threading.Lock()
