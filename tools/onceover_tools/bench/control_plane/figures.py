"""What one database measured at one size."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Figures:
    """What one database measured at one size; ``None`` where a phase did not run."""

    database: str
    stored: int = 0
    size_mb: float | None = None
    fill_rate: float | None = None
    fill_tenths: list[float] = field(default_factory=list)  # events/s over each tenth filled
    ingest_seconds: float | None = None
    posted: int = 0
    post_ms: list[float] = field(default_factory=list)
    tenths: list[float] = field(default_factory=list)  # events/s over each tenth posted
    server_cpu_s: float | None = None  # the server's CPU time while the events were posted
    reads_ms: dict[str, list[float]] = field(default_factory=dict)  # idle, all stored
    reads_under_ingest_ms: dict[str, list[float]] = field(default_factory=dict)
    failed: str | None = None
    events: int = 0  # the size: events stored in all once every phase ran

    @property
    def ingest_rate(self) -> float | None:
        if not self.ingest_seconds or not self.posted:
            return None
        return self.posted / self.ingest_seconds

    @property
    def server_us_per_event(self) -> float | None:
        if self.server_cpu_s is None or not self.posted:
            return None
        return self.server_cpu_s / self.posted * 1e6
