"""The figures one run takes: each micro-batch, each query's rows and streams, the soak's
samples of its process tree."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from onceover.modes import STREAMING_DEFAULT_MODE, traits_of
from onceover_tools.bench.stream_economy.plan import HOUR_S, PARTITIONS, SINK, TRIGGER_S


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; ``None`` for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per hour; ``None`` under two."""
    if len(points) < 2:
        return None
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread * HOUR_S


@dataclass(frozen=True)
class BatchFigure:
    """One micro-batch, from its StreamingQueryProgress."""

    batch_id: int
    rows: int
    add_batch_ms: float
    trigger_ms: float
    started: float
    """The trigger's start, seconds since the epoch (the progress's ``timestamp``)."""
    round: int = 0
    """The round it ran in (0: the first batches; the soak's are all 0)."""

    @property
    def ended(self) -> float:
        return self.started + self.trigger_ms / 1000


@dataclass
class StreamCount:
    """The streams of one table: in all, by the end of the first batch, and their types."""

    total: int | None = None
    first_batch: int | None = None
    types: dict[str, int] = field(default_factory=dict)

    @property
    def steady(self) -> int | None:
        if self.total is None or self.first_batch is None:
            return None
        return self.total - self.first_batch


@dataclass
class QueryFigure:
    """One query: its batches, its rows as BigQuery counts them, its streams."""

    name: str
    """The mode, or ``soak``."""
    mode: str | None
    """The ``mode`` option given; ``None``: the sink's default for ``writeStream``."""
    expected_rows: int = 0
    batches: list[BatchFigure] = field(default_factory=list)
    counted: int | None = None
    distinct: int | None = None
    streams: StreamCount = field(default_factory=StreamCount)
    failed: str | None = None
    loads: tuple[float, float] | None = None
    """The machine's load average (1 min) as the query started and as it stopped."""
    sink: str = SINK
    """The format written to: the sink, or the floor's hand-off (nothing written)."""

    @property
    def is_floor(self) -> bool:
        return self.sink != SINK

    @property
    def exactly_once(self) -> bool:
        # No mode option: writeStream's default (the soak; the floor, which writes nothing).
        return traits_of(self.mode or STREAMING_DEFAULT_MODE).exactly_once

    @property
    def exact(self) -> bool:
        return self.counted == self.expected_rows and self.distinct == self.expected_rows

    @property
    def steady_batches(self) -> list[BatchFigure]:
        return self.batches[1:]

    @property
    def trigger_period_s(self) -> float | None:
        """Mean start-to-start time of consecutive steady batches within a round (a round's
        first batch waited for the mode before it); with no two such batches, the mean of
        each batch's time or the trigger, whichever is longer."""
        steady = self.steady_batches
        gaps = [
            b.started - a.started
            for a, b in pairwise(steady)
            if b.batch_id == a.batch_id + 1 and b.round == a.round
        ]
        if gaps:
            return statistics.fmean(gaps)
        return (
            statistics.fmean(max(TRIGGER_S, b.trigger_ms / 1000) for b in steady)
            if steady
            else None
        )

    @property
    def steady_seconds(self) -> float | None:
        """The steady batches back to back at the trigger period kept."""
        period = self.trigger_period_s
        return None if period is None else period * len(self.steady_batches)

    @property
    def streams_per_hour(self) -> float | None:
        seconds, steady = self.steady_seconds, self.streams.steady
        if self.failed or seconds is None or steady is None or seconds <= 0:
            return None
        return steady / seconds * HOUR_S

    @property
    def streams_per_partition_hour(self) -> float | None:
        per_hour = self.streams_per_hour
        return None if per_hour is None else per_hour / PARTITIONS

    def add_batch(self, q: float) -> float | None:
        """The ``q`` quantile of the sink's time per batch, ms, every batch but the first."""
        if self.failed:
            return None
        return percentile([b.add_batch_ms for b in self.steady_batches], q)

    def round_median(self, number: int) -> float | None:
        """The sink's median time per batch in round ``number`` (not the first batch)."""
        return percentile([b.add_batch_ms for b in self.steady_batches if b.round == number], 0.5)

    @property
    def rounds(self) -> list[int]:
        return sorted({b.round for b in self.steady_batches})

    @property
    def first_batch_ms(self) -> float | None:
        return self.batches[0].add_batch_ms if self.batches and not self.failed else None

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "exact": self.exact,
            "steady_seconds": self.steady_seconds,
            "streams_steady": self.streams.steady,
            "streams_per_hour": self.streams_per_hour,
            "streams_per_partition_hour": self.streams_per_partition_hour,
            "add_batch_p50_ms": self.add_batch(0.50),
            "add_batch_p95_ms": self.add_batch(0.95),
            "first_batch_ms": self.first_batch_ms,
            "trigger_period_s": self.trigger_period_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueryFigure:
        return cls(
            name=data["name"],
            mode=data["mode"],
            expected_rows=data["expected_rows"],
            batches=[BatchFigure(**b) for b in data["batches"]],
            counted=data["counted"],
            distinct=data["distinct"],
            streams=StreamCount(**data["streams"]),
            failed=data["failed"],
            loads=(data["loads"][0], data["loads"][1]) if data.get("loads") else None,
            sink=data.get("sink", SINK),
        )


@dataclass(frozen=True)
class Sample:
    """The soak's process tree at one moment."""

    seconds: float
    driver_rss_mb: float
    driver_threads: int
    jvm_rss_mb: float | None
    jvm_threads: int | None
    workers: int
    workers_rss_mb: float
    workers_pss_mb: float
    workers_threads: int
    grpc_connections: int
    grpc_connections_peak: int
    """The most seen at once by a check every second since the sample before."""
    grpc_closed_last_minute: int
    """Connections on the gRPC port in TIME_WAIT: closed within the last minute."""
    streams: int
    batches: int
    load: float = 0.0
    """The machine's load average over the last minute (others' work shows here)."""


SAMPLED: tuple[tuple[str, str], ...] = (
    ("driver_rss_mb", "driver Python RSS, MB"),
    ("driver_threads", "driver Python threads"),
    ("jvm_rss_mb", "Spark JVM RSS, MB"),
    ("jvm_threads", "Spark JVM threads"),
    ("workers", "Python workers (processes)"),
    ("workers_rss_mb", "Python workers RSS, MB (summed)"),
    ("workers_pss_mb", "Python workers PSS, MB (summed: shared pages divided)"),
    ("workers_threads", "Python workers threads (summed)"),
    ("grpc_connections", "TCP connections to BigQuery's gRPC port, open"),
    ("grpc_connections_peak", "  the most open at once (checked every second)"),
    ("grpc_closed_last_minute", "  closed within the last minute (TIME_WAIT)"),
    ("streams", "streams created so far"),
    ("batches", "micro-batches so far"),
    ("load", "the machine's load average, 1 min"),
)


@dataclass
class Soak:
    """The default-options query for ``minutes``, sampled."""

    minutes: float
    sample_s: float
    query: QueryFigure
    samples: list[Sample] = field(default_factory=list)

    def points(self, name: str, *, second_half: bool = False) -> list[tuple[float, float]]:
        samples = self.samples
        if second_half and samples:
            middle = samples[-1].seconds / 2
            samples = [s for s in samples if s.seconds >= middle]
        return [(s.seconds, float(v)) for s in samples if (v := getattr(s, name)) is not None]

    def add_batch_tenths(self) -> tuple[float | None, float | None]:
        """The sink's p50 per batch over the first and the last tenth of the soak's batches."""
        steady = self.query.steady_batches
        tenth = max(1, len(steady) // 10)
        first = percentile([b.add_batch_ms for b in steady[:tenth]], 0.5)
        last = percentile([b.add_batch_ms for b in steady[-tenth:]], 0.5)
        return first, last

    def as_json(self) -> dict[str, Any]:
        first, last = self.add_batch_tenths()
        return {
            "minutes": self.minutes,
            "sample_s": self.sample_s,
            "query": self.query.as_json(),
            "samples": [asdict(s) for s in self.samples],
            "slopes_per_hour": {name: slope_per_hour(self.points(name)) for name, _ in SAMPLED},
            "slopes_per_hour_second_half": {
                name: slope_per_hour(self.points(name, second_half=True)) for name, _ in SAMPLED
            },
            "add_batch_p50_ms_first_tenth": first,
            "add_batch_p50_ms_last_tenth": last,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Soak:
        return cls(
            minutes=data["minutes"],
            sample_s=data["sample_s"],
            query=QueryFigure.from_json(data["query"]),
            samples=[Sample(**s) for s in data["samples"]],
        )
