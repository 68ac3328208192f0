"""Every figure of one run set side by side: the modes against ``default`` and against the
floor, and the targets they are held to."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from onceover_tools.bench.stream_economy.figures import QueryFigure, Soak
from onceover_tools.bench.stream_economy.plan import (
    BASELINE,
    KEEPING,
    MODES,
    PARTITIONS,
    RATIO_TARGET,
    SEGMENT,
    STREAMS_PER_PARTITION_HOUR,
    TRIGGER,
)


@dataclass
class Economy:
    """Every figure of one run."""

    batches: int
    rows_per_batch: int
    partitions: int = PARTITIONS
    trigger: str = TRIGGER
    segment: int = SEGMENT
    modes: list[QueryFigure] = field(default_factory=list)
    round_loads: list[float] = field(default_factory=list)
    """The machine's load average (1 min) as each round began."""
    soak: Soak | None = None
    failed: str | None = None
    """Set when the run could not start (no Spark, no local BigQuery)."""
    floor: QueryFigure | None = None
    """The same query into Spark's hand-off, interleaved with the modes."""

    def mode(self, name: str) -> QueryFigure | None:
        return next((m for m in self.modes if m.name == name), None)

    def overhead(self, name: str, q: float) -> float | None:
        """``name``'s time per batch at quantile ``q`` less the floor's, ms."""
        mode = self.mode(name)
        if mode is None or self.floor is None or self.floor.failed:
            return None
        value, floor = mode.add_batch(q), self.floor.add_batch(q)
        return value - floor if value is not None and floor is not None else None

    def paired_overhead(self, name: str) -> float | None:
        """The median over the rounds of ``name``'s median time per batch in a round less
        the floor's in the same round, ms."""
        mode, floor = self.mode(name), self.floor
        if mode is None or floor is None or mode.failed or floor.failed:
            return None
        gaps = [
            value - base
            for number in mode.rounds
            if (value := mode.round_median(number)) is not None
            and (base := floor.round_median(number)) is not None
        ]
        return statistics.median(gaps) if gaps else None

    def ratio(self, name: str, q: float) -> float | None:
        """The sink's time per batch at quantile ``q``, ``name`` over ``default``."""
        mode, baseline = self.mode(name), self.mode(BASELINE)
        if mode is None or baseline is None:
            return None
        value, base = mode.add_batch(q), baseline.add_batch(q)
        return value / base if value is not None and base else None

    def paired_ratio(self, name: str) -> float | None:
        """The median over the rounds of ``name``'s median time per batch in a round over
        ``default``'s in the same round."""
        mode, baseline = self.mode(name), self.mode(BASELINE)
        if mode is None or baseline is None or mode.failed or baseline.failed:
            return None
        ratios = [
            value / base
            for number in mode.rounds
            if (value := mode.round_median(number)) is not None
            and (base := baseline.round_median(number))
        ]
        return statistics.median(ratios) if ratios else None

    @property
    def rounds(self) -> int:
        """Rounds after the first batches."""
        return math.ceil((self.batches - 1) / self.segment) if self.segment > 0 else 0

    @property
    def any_failed(self) -> bool:
        queries = [
            *self.modes,
            *([self.soak.query] if self.soak else []),
            *([self.floor] if self.floor else []),
        ]
        return bool(self.failed) or any(q.failed for q in queries) or not self.modes

    def as_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "rows_per_batch": self.rows_per_batch,
            "partitions": self.partitions,
            "trigger": self.trigger,
            "segment": self.segment,
            "rounds": self.rounds,
            "round_loads": self.round_loads,
            "modes": [m.as_json() for m in self.modes],
            "ratios_to_default": {
                name: {
                    "p50": self.ratio(name, 0.5),
                    "p95": self.ratio(name, 0.95),
                    "paired_p50": self.paired_ratio(name),
                }
                for name in MODES
                if name != BASELINE
            },
            "floor": self.floor.as_json() if self.floor else None,
            "overhead_over_floor_ms": {
                name: {
                    "p50": self.overhead(name, 0.5),
                    "p95": self.overhead(name, 0.95),
                    "paired_p50": self.paired_overhead(name),
                }
                for name in MODES
            },
            "soak": self.soak.as_json() if self.soak else None,
            "targets": [asdict(goal) for goal in goals(self)],
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Economy:
        return cls(
            batches=data["batches"],
            rows_per_batch=data["rows_per_batch"],
            partitions=data["partitions"],
            trigger=data["trigger"],
            segment=data.get("segment", SEGMENT),
            modes=[QueryFigure.from_json(m) for m in data["modes"]],
            round_loads=data.get("round_loads", []),
            soak=Soak.from_json(data["soak"]) if data["soak"] else None,
            failed=data["failed"],
            floor=QueryFigure.from_json(data["floor"]) if data.get("floor") else None,
        )


@dataclass(frozen=True)
class Goal:
    """A promise this bench measures: ``value`` at most ``goal`` (``None``: not taken)."""

    name: str
    value: float | None
    goal: float
    unit: str

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.goal


def default_mode() -> str:
    """The mode of a ``writeStream`` with no ``mode`` option."""
    from onceover.modes import STREAMING_DEFAULT_MODE

    return STREAMING_DEFAULT_MODE


def goals(result: Economy) -> list[Goal]:
    """The targets: streams per hour of the modes that keep streams, and the sink's time
    per batch against ``default``."""
    every: list[Goal] = []
    for name in KEEPING:
        mode = result.mode(name)
        every.append(
            Goal(
                f"streams created per hour, `{name}` ({result.partitions} partitions, 1 s trigger)",
                mode.streams_per_hour if mode else None,
                STREAMS_PER_PARTITION_HOUR * result.partitions,
                "streams/h",
            )
        )
    if result.soak is not None:
        every.append(
            Goal(
                f"streams created per hour, `writeStream`'s default (`{default_mode()}`), "
                f"{result.soak.minutes:g} min soak",
                result.soak.query.streams_per_hour,
                STREAMS_PER_PARTITION_HOUR * result.partitions,
                "streams/h",
            )
        )
    for name in MODES:
        if name == BASELINE:
            continue
        for q, label in ((0.5, "p50"), (0.95, "p95")):
            every.append(
                Goal(
                    f"sink time per micro-batch {label}, `{name}` / `default`",
                    result.ratio(name, q),
                    RATIO_TARGET,
                    "x",
                )
            )
    return every
