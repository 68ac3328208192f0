"""Write streams a user's streaming query creates, and what each mode costs a micro-batch,
side by side; then a soak of the query as ``writeStream`` runs it by default.

    .venv/bin/python -m onceover_tools.bench.stream_economy [--batches 60] [--segment 5]
        [--soak-minutes 20] [--out DIR] [--rows-per-batch 200] [--sample-seconds 30]
        [--warmup-batches 2]

The query is a user's: a directory of JSON files read with ``maxFilesPerTrigger=1`` (one
file of ``--rows-per-batch`` rows per micro-batch), ``repartition(8, "event_id")``, a
``processingTime`` trigger of 1 second, ``writeStream.format("onceover")`` with the table
and a checkpoint. Spark ``local[2]``; the local BigQuery in a child process of its own, so
the driver's figures in the soak are the driver's alone.

1. **The modes, interleaved** (``pending``, ``buffered``, ``committed``, ``default``):
   one query per mode into a fresh table of its own, all four started together and
   running to the end, but only one ever has a file to read, so only one runs a batch
   at a time (the others' triggers find nothing new and run no batch). Round 0 gives
   each mode its first file in turn; then each round gives each mode ``--segment``
   files (default 5) in turn and waits for its batches before the next mode's files go
   in, the order rotated by one mode each round, until every mode has run
   ``--batches``. So every mode's batches are spread over the whole run in short
   segments, each beside the others', and a spell of load from other work on the
   machine falls on every mode alike instead of on whichever happened to run then (the
   modes ran one after another before, and the slowest was whichever ran while the
   machine was busiest).
2. **Streams**: what the local BigQuery lists for each table at ``/admin/streams``
   (every stream ever created; ``_default`` is never created). Those by the end of a
   mode's first batch (round 0) are counted apart; the rest are the steady state's,
   extrapolated to an hour at the trigger period the mode kept: the mean start-to-start
   time of its consecutive batches within a round, times its steady batches. Target: at
   most 2 streams per partition an hour (16 for 8) for the modes that keep their
   streams (``buffered``, ``committed``) and for the soak.
3. **Per micro-batch**: Spark's ``durationMs["addBatch"]`` of each batch (the sink's time
   for it: the batch's plan runs into the sink's tasks, and when it returns the rows are
   visible in every mode), p50 and p95 over every batch but the first, pooled over the
   rounds: every mode's batches sampled the same stretches of the run, so their
   quantiles compare. The ratios of ``pending``, ``buffered`` and ``committed`` to
   ``default`` (target: at most 1.2). As a check, the paired ratio: in each round, a
   mode's median over ``default``'s median in that same round, and the median of those
   over the rounds.
4. **The floor**: the same query into Spark's hand-off (``format("onceover-handoff")``,
   :mod:`onceover_tools.bench.handoff`: a Python data source whose writers count the rows
   and write nothing), run interleaved with the modes as one more of them. Each mode's
   overhead per micro-batch over it: the mode's p50 (p95) ``addBatch`` less the floor's
   p50 (p95), in ms; and paired, the median over the rounds of the mode's round median
   less the floor's. What a micro-batch costs in each mode beyond what Spark costs any
   Python sink.
5. **The soak** (``--soak-minutes``, 0 skips it): the query with no ``mode`` option (so
   ``writeStream``'s default, ``buffered``) for that long, a file put in whenever fewer
   than two wait, sampling every ``--sample-seconds``: the driver's Python process (RSS,
   threads), the Spark JVM (RSS, threads), the Python workers under it (count, RSS and
   threads summed), the TCP connections of that process tree to the local BigQuery's gRPC
   port, and the streams created so far. First and last sample and the least-squares
   slope, per hour.

Every query's rows are counted in BigQuery (``COUNT(*)``, ``COUNT(DISTINCT event_id)``)
before its figures are kept: exact for the exactly-once modes (and the soak); ``default``
is at least once, so every key once and no row missing. The floor's rows are counted as
its writers were handed them, every batch's once. Figures, not assertions: a missed
target is printed as missed. Exits 1 only when a figure could not be taken (a query that
failed, rows missing or repeated in an exactly-once mode).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover.waiting import poll_until

if TYPE_CHECKING:
    from google.cloud import bigquery
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

MODES = ("pending", "buffered", "committed", "default")
BASELINE = "default"
FLOOR = "floor"
"""The query into Spark's hand-off (onceover_tools.bench.handoff): nothing written."""
SINK = "onceover"
KEEPING = ("buffered", "committed")
"""The modes that keep a stream per partition from batch to batch: a streams target each."""
PARTITIONS = 8
TRIGGER = "1 second"
TRIGGER_S = 1.0
MASTER = "local[2]"
DATASET = "bench_stream_economy"
KEY = "event_id"
SOURCE_SCHEMA = (
    "event_id BIGINT, order_id STRING, customer_id BIGINT, amount DOUBLE, currency STRING, "
    "event_time TIMESTAMP"
)
ROWS_PER_BATCH = 200
BATCHES = 60
SEGMENT = 5
"""Micro-batches each mode runs in turn in a round."""
SOAK_MINUTES = 20.0
SAMPLE_S = 30.0
WARMUP_BATCHES = 2
STREAMS_PER_PARTITION_HOUR = 2.0
STREAMS_PER_HOUR_TARGET = STREAMS_PER_PARTITION_HOUR * PARTITIONS
RATIO_TARGET = 1.2
BACKLOG = 2
"""The soak puts a file in whenever fewer than this many wait: a batch every trigger."""
FIRST_BATCH_S = 180.0  # a cold JVM and the workers' imports come first
BATCH_S = 30.0
POLL_S = 0.2
JSON_NAME = "stream-economy.json"
MARKDOWN_NAME = "stream-economy.md"
HOUR_S = 3600.0
MB = 1024 * 1024


def say(line: str) -> None:
    print(line, flush=True)


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


# -- the figures --------------------------------------------------------------------------


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
        return self.mode != "default"

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


# -- the process tree, from /proc ---------------------------------------------------------


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command name)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        name = text[text.index("(") + 1 : text.rindex(")")]
        table[int(entry.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), name)
    return table


def _descendants(root: int, table: dict[int, tuple[int, str]], skip: set[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in skip:
                found.append(child)
                todo.append(child)
    return found


def _rss_threads(pid: int) -> tuple[float, int] | None:
    """RSS (MB) and threads of ``pid``; ``None`` once it has ended."""
    rss_kb = threads = None
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return (rss_kb / 1024, threads) if rss_kb is not None and threads is not None else None


def _pss_mb(pid: int) -> float:
    """Proportional set size: each shared page divided among the processes that map it
    (forked workers share most of theirs, which their RSS counts in each)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in lines if line.startswith("Pss:")), 0.0)


ESTABLISHED, TIME_WAIT = "01", "06"


def _tcp(port: int) -> tuple[set[int], int]:
    """Socket inodes of established TCP connections whose remote end is ``port``, and
    how many connections on ``port`` (either end) are in TIME_WAIT."""
    inodes: set[int] = set()
    waiting = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote = (int(parts[i].rsplit(":", 1)[1], 16) for i in (1, 2))
            if parts[3] == ESTABLISHED and remote == port:
                inodes.add(int(parts[9]))
            elif parts[3] == TIME_WAIT and port in (local, remote):
                waiting += 1
    return inodes, waiting


def _sockets(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


@dataclass(frozen=True)
class ProcessTree:
    """This driver, the Spark JVM it started and the JVM's Python workers; not the local
    BigQuery, which is a child of this process too."""

    bigquery_pid: int | None
    grpc_port: int

    def members(self) -> tuple[list[int], list[int], list[int]]:
        """The pids of the whole tree (this process first), of the JVM, of its workers."""
        table = _processes()
        me = os.getpid()
        tree = _descendants(me, table, {self.bigquery_pid} if self.bigquery_pid else set())
        jvms = [pid for pid in tree if table[pid][1] == "java"]
        workers = [
            pid for jvm in jvms for pid in _descendants(jvm, table, set())
        ]  # the daemon and the workers it forked: Spark's executors' Python
        return [me, *tree], jvms, workers

    def connections(self, pids: list[int] | None = None) -> tuple[int, int]:
        """The tree's open connections to the gRPC port, and those closed within a minute."""
        held: set[int] = set()
        for pid in self.members()[0] if pids is None else pids:
            held |= _sockets(pid)
        established, waiting = _tcp(self.grpc_port)
        return len(held & established), waiting

    def sample(self, seconds: float, streams: int, batches: int, peak: int = 0) -> Sample:
        pids, jvms, workers = self.members()
        driver = _rss_threads(pids[0]) or (0.0, 0)
        jvm = [figures for pid in jvms if (figures := _rss_threads(pid))]
        worker = [figures for pid in workers if (figures := _rss_threads(pid))]
        held, closed = self.connections(pids)
        return Sample(
            seconds=round(seconds, 1),
            driver_rss_mb=round(driver[0], 1),
            driver_threads=driver[1],
            jvm_rss_mb=round(sum(r for r, _ in jvm), 1) if jvm else None,
            jvm_threads=sum(t for _, t in jvm) if jvm else None,
            workers=len(worker),
            workers_rss_mb=round(sum(r for r, _ in worker), 1),
            workers_pss_mb=round(sum(_pss_mb(pid) for pid in workers), 1),
            workers_threads=sum(t for _, t in worker),
            grpc_connections=held,
            grpc_connections_peak=max(peak, held),
            grpc_closed_last_minute=closed,
            streams=streams,
            batches=batches,
            load=round(os.getloadavg()[0], 2),
        )


def _created(streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The streams CreateWriteStream made: not ``_default``, which the local BigQuery
    lists once a write used it, but which is never created (nor counted by the quota)."""
    return [s for s in streams if s["streamType"] != "DEFAULT"]


# -- a query's progress -------------------------------------------------------------------


def _batch(progress: Any) -> BatchFigure | None:
    """The figure of one progress update; ``None`` for one of no data (an idle trigger)."""
    durations = progress.durationMs
    if "addBatch" not in durations or not progress.numInputRows:
        return None
    started = datetime.fromisoformat(progress.timestamp).timestamp()
    return BatchFigure(
        batch_id=int(progress.batchId),
        rows=int(progress.numInputRows),
        add_batch_ms=float(durations["addBatch"]),
        trigger_ms=float(durations.get("triggerExecution", durations["addBatch"])),
        started=started,
    )


class Progress:
    """The batches of one query, read from its progress updates as they come."""

    def __init__(self, query: StreamingQuery) -> None:
        self.query = query
        self.batches: dict[int, BatchFigure] = {}
        self.rounds: dict[int, int] = {}
        """Batch id -> the round it ran in; untagged: round 0."""
        self.loads: tuple[float, float] | None = None
        """The machine's load average (1 min) as the query started and as it stopped."""

    def poll(self) -> None:
        """Take the last update; read the recent ones when a batch went by unseen."""
        progress = self.query.lastProgress
        last = _batch(progress) if progress is not None else None
        if last is None or last.batch_id in self.batches:
            return
        if (last.batch_id - 1 in self.batches) or (not self.batches and last.batch_id == 0):
            self.batches[last.batch_id] = last
            return
        for progress in self.query.recentProgress:
            figure = _batch(progress)
            if figure is not None:
                self.batches.setdefault(figure.batch_id, figure)

    def alive(self) -> None:
        if not self.query.isActive:
            raise RuntimeError(f"the query stopped: {self.query.exception()}")

    def wait_for(self, count: int, timeout_s: float) -> None:
        def done() -> bool | None:
            self.poll()
            return True if len(self.batches) >= count else None

        poll_until(done, timeout_s, every_s=POLL_S, between=self.alive, timed_out=lambda: (
            TimeoutError(f"{len(self.batches)} of {count} micro-batches within {timeout_s:.0f} s")
        ))  # fmt: skip

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches.values())

    def tag(self, number: int) -> None:
        """The batches seen and not yet tagged ran in round ``number``."""
        for batch_id in self.batches:
            self.rounds.setdefault(batch_id, number)

    def figures(self) -> list[BatchFigure]:
        return [replace(self.batches[k], round=self.rounds.get(k, 0)) for k in sorted(self.batches)]


# -- the bench ----------------------------------------------------------------------------


@dataclass
class Running:
    """One mode's query in the interleaved run."""

    figure: QueryFigure
    table_id: str = ""
    files: list[Path] = field(default_factory=list)
    progress: Progress | None = None
    put: int = 0
    """Files put in its directory so far."""

    @property
    def name(self) -> str:
        return self.figure.name


def _running(modes: list[tuple[str, str | None]], rows: int, *, floor: bool) -> list[Running]:
    """The queries of an interleaved run: ``modes`` (name, mode option), then the floor."""
    from onceover_tools.bench.handoff import FORMAT

    running = [Running(QueryFigure(name, mode, expected_rows=rows)) for name, mode in modes]
    if floor:
        running.append(Running(QueryFigure(FLOOR, None, expected_rows=rows, sink=FORMAT)))
    return running


def schedule(batches: int, segment: int, modes: int) -> list[list[tuple[int, int]]]:
    """The rounds after the first batches: each a list of (mode index, files), the order
    rotated by one mode a round, until every mode has ``batches`` in all."""
    rounds: list[list[tuple[int, int]]] = []
    left = batches - 1
    while left > 0:
        files, number = min(segment, left), len(rounds) + 1
        rounds.append([((number - 1 + i) % modes, files) for i in range(modes)])
        left -= files
    return rounds


class Bench:
    """One Spark session, one local BigQuery; the modes' queries interleaved, the soak's
    after them."""

    def __init__(
        self,
        spark: SparkSession,
        *,
        client: bigquery.Client,
        project: str,
        rest_url: str,
        tree: ProcessTree,
        tmp: Path,
        rows_per_batch: int,
    ) -> None:
        self.spark = spark
        self.client = client
        self.project = project
        self.rest_url = rest_url
        self.tree = tree
        self.tmp = tmp
        self.rows_per_batch = rows_per_batch

    def fresh_table(self, name: str) -> str:
        from google.cloud import bigquery

        table_id = f"{self.project}.{DATASET}.{name}"
        self.client.delete_table(table_id, not_found_ok=True)
        from onceover_tools.chaos.runner import ORDER_SCHEMA

        self.client.create_table(bigquery.Table(table_id, schema=ORDER_SCHEMA))
        return table_id

    def streams(self, table_id: str) -> list[dict[str, Any]]:
        """Every write stream the local BigQuery ever created on ``table_id``."""
        from onceover_tools.localbq.admin import write_streams

        return write_streams(self.rest_url, table_id)

    def created(self, table_id: str) -> int:
        """The streams created on ``table_id`` (``_default`` is never created)."""
        return len(_created(self.streams(table_id)))

    def count(self, table_id: str) -> tuple[int, int]:
        query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT {KEY}) AS d FROM `{table_id}`"
        row = next(iter(self.client.query_and_wait(query)))
        return int(row["n"]), int(row["d"])

    def counted_path(self, name: str) -> Path:
        """Where the floor's commits count the rows its writers were handed."""
        return self.tmp / name / "counted.jsonl"

    def start(self, name: str, table_id: str, mode: str | None, sink: str = SINK) -> Progress:
        """The user's query on ``<tmp>/<name>/source``, started: into the sink (table
        ``table_id``, ``mode``), or into Spark's hand-off (the floor, ``sink`` its format)."""
        source = self.tmp / name / "source"
        source.mkdir(parents=True, exist_ok=True)
        frame = (
            self.spark.readStream.schema(SOURCE_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
        )
        writer = (
            frame.repartition(PARTITIONS, KEY)
            .writeStream.format(sink)
            .option("checkpointLocation", str(self.tmp / name / "checkpoint"))
            .trigger(processingTime=TRIGGER)
        )
        if sink != SINK:
            writer = writer.option("out", str(self.counted_path(name)))
        else:
            writer = writer.option("table", table_id)
        if mode is not None:
            writer = writer.option("mode", mode)
        started = os.getloadavg()[0]
        progress = Progress(writer.start())
        progress.loads = (round(started, 2), round(started, 2))
        return progress

    @staticmethod
    def stop(progress: Progress) -> None:
        """Stop the query; raises if it had failed."""
        progress.query.stop()
        assert progress.loads is not None
        progress.loads = (progress.loads[0], round(os.getloadavg()[0], 2))
        if progress.query.exception() is not None:
            raise RuntimeError(f"the query failed: {progress.query.exception()}")

    @contextmanager
    def query(self, name: str, table_id: str, mode: str | None) -> Iterator[Progress]:
        """The user's query on ``<tmp>/<name>/source``, stopped when the block ends."""
        progress = self.start(name, table_id, mode)
        try:
            yield progress
        except BaseException:
            with suppress(Exception):  # the block's own exception is the one to see
                self.stop(progress)
            raise
        self.stop(progress)

    def files(self, name: str, first_file: int, count: int) -> list[Path]:
        """``count`` files of the batch size, staged outside the query's directory."""
        from onceover_jobs.generate import write_files

        staged = self.tmp / name / "staged"
        start = first_file * self.rows_per_batch
        return write_files(staged, count * self.rows_per_batch, count, "json", start=start)

    def put(self, name: str, files: list[Path]) -> Path:
        """Move ``files`` into the query's directory (a rename: never half a file)."""
        source = self.tmp / name / "source"
        source.mkdir(parents=True, exist_ok=True)
        for path in files:
            path.replace(source / path.name)
        return source

    def settle(self, figure: QueryFigure, progress: Progress, table_id: str) -> None:
        """The batches, rows and streams of a stopped query; ``failed`` set if its rows
        are not what was read."""
        figure.batches = progress.figures()
        figure.loads = progress.loads
        if progress.rows != figure.expected_rows:
            raise RuntimeError(f"Spark read {progress.rows:,} rows, {figure.expected_rows:,} put")
        if figure.is_floor:  # nothing written: the rows its writers were handed, per batch
            from onceover_tools.bench.handoff import counted_batches

            handed = counted_batches(self.counted_path(figure.name))
            figure.counted = figure.distinct = sum(handed.values())
            figure.streams = StreamCount(0, 0, {})
            if figure.counted != figure.expected_rows:
                raise RuntimeError(
                    f"the floor's writers were handed {figure.counted:,} rows, "
                    f"{figure.expected_rows:,} were read"
                )
            return
        figure.counted, figure.distinct = self.count(table_id)
        streams = _created(self.streams(table_id))
        figure.streams.total = len(streams)
        figure.streams.types = dict(Counter(str(s["streamType"]) for s in streams))
        holds = (
            f"BigQuery holds {figure.counted:,} rows ({figure.distinct:,} distinct {KEY}), "
            f"{figure.expected_rows:,} were written"
        )
        if figure.exactly_once and not figure.exact:
            raise RuntimeError(holds)
        if not figure.exactly_once and (
            figure.distinct != figure.expected_rows or figure.counted < figure.expected_rows
        ):
            raise RuntimeError(holds)

    def run_mode(self, name: str, mode: str | None, batches: int) -> QueryFigure:
        """``batches`` micro-batches of one query alone (the warm-up)."""
        return self.run_modes([(name, mode)], batches, batches)[0]

    def run_modes(
        self,
        modes: list[tuple[str, str | None]],
        batches: int,
        segment: int,
        round_loads: list[float] | None = None,
        *,
        floor: bool = False,
    ) -> list[QueryFigure]:
        """``batches`` micro-batches of each of ``modes`` (name, mode option), interleaved:
        every query started, then their first batches one after the other, then rounds
        of ``segment`` batches each (:func:`schedule`). With ``floor``, the same query into
        Spark's hand-off runs as one more mode, its figure last. A mode that fails is
        recorded and left out of the rounds after; the others go on."""
        running = _running(modes, batches * self.rows_per_batch, floor=floor)
        loads = round_loads if round_loads is not None else []

        def attempt(run: Running, step: Callable[..., None], *args: Any) -> None:
            if run.figure.failed:
                return
            try:
                step(run, *args)
            except Exception as exc:
                run.figure.failed = f"{type(exc).__name__}: {exc}"[:600]
                say(f"FAILED: {run.name}: {run.figure.failed}")
                traceback.print_exc()

        def begin(run: Running) -> None:
            run.table_id = "" if run.figure.is_floor else self.fresh_table(run.name)
            run.files = self.files(run.name, 0, batches)
            run.progress = self.start(run.name, run.table_id, run.figure.mode, run.figure.sink)
            stack.callback(end, run)

        def end(run: Running) -> None:
            assert run.progress is not None
            try:
                self.stop(run.progress)
            except Exception as exc:
                if not run.figure.failed:
                    run.figure.failed = f"{type(exc).__name__}: {exc}"[:600]
                    say(f"FAILED: {run.name}: {run.figure.failed}")

        def turn(run: Running, files: int, number: int, timeout_s: float) -> None:
            assert run.progress is not None
            self.put(run.name, run.files[run.put : run.put + files])
            run.put += files
            run.progress.wait_for(run.put, timeout_s)
            run.progress.tag(number)

        def first(run: Running) -> None:
            turn(run, 1, 0, FIRST_BATCH_S)
            if not run.figure.is_floor:
                run.figure.streams.first_batch = self.created(run.table_id)

        def settle(run: Running) -> None:
            assert run.progress is not None
            self.settle(run.figure, run.progress, run.table_id)

        with ExitStack() as stack:
            for run in running:
                attempt(run, begin)
            loads.append(round(os.getloadavg()[0], 2))
            for run in running:
                attempt(run, first)
            rounds = schedule(batches, segment, len(running))
            for number, turns in enumerate(rounds, start=1):
                loads.append(round(os.getloadavg()[0], 2))
                if len(running) > 1:
                    say(f"  round {number} of {len(rounds)}, load {loads[-1]:.2f}")
                for index, files in turns:
                    attempt(running[index], turn, files, number, FIRST_BATCH_S + files * BATCH_S)
        for run in running:
            attempt(run, settle)
        for run in running:
            if not run.figure.failed:
                say(_figure_line(run.figure))
        return [run.figure for run in running]

    def run_soak(self, minutes: float, sample_s: float) -> Soak:
        """The query with no mode option for ``minutes``, sampled every ``sample_s``."""
        from onceover_jobs.generate import write_files

        name = "soak"
        soak = Soak(minutes, sample_s, QueryFigure(name, None))
        try:
            table_id = self.fresh_table(name)
            source = self.put(name, self.files(name, 0, 1))
            put = 1
            with self.query(name, table_id, None) as progress:
                progress.wait_for(1, FIRST_BATCH_S)
                soak.query.streams.first_batch = self.created(table_id)
                began = time.monotonic()
                soak.samples.append(self.tree.sample(0.0, soak.query.streams.first_batch, 1))
                ends, next_sample = began + minutes * 60, began + sample_s
                next_check, peak = began + 1, 0
                while (now := time.monotonic()) < ends:
                    progress.poll()
                    progress.alive()
                    if put - len(progress.batches) < BACKLOG:
                        write_files(source, self.rows_per_batch, 1, "json",
                                    start=put * self.rows_per_batch)  # fmt: skip
                        put += 1
                    if now >= next_check:
                        peak = max(peak, self.tree.connections()[0])
                        next_check += 1
                    if now >= next_sample:
                        soak.samples.append(self.tree.sample(
                            now - began, self.created(table_id), len(progress.batches), peak
                        ))  # fmt: skip
                        say(_sample_line(soak.samples[-1]))
                        next_sample, peak = next_sample + sample_s, 0
                    time.sleep(POLL_S)
                progress.wait_for(put, BATCH_S * BACKLOG + BATCH_S)
                soak.samples.append(self.tree.sample(
                    time.monotonic() - began, self.created(table_id), len(progress.batches), peak
                ))  # fmt: skip
                say(_sample_line(soak.samples[-1]))
            soak.query.expected_rows = put * self.rows_per_batch
            self.settle(soak.query, progress, table_id)
        except Exception as exc:
            soak.query.failed = f"{type(exc).__name__}: {exc}"[:600]
            say(f"FAILED: soak: {soak.query.failed}")
            traceback.print_exc()
            return soak
        say(
            f"  soak: {len(soak.query.batches)} micro-batches, {soak.query.counted:,} rows "
            f"({soak.query.distinct:,} distinct) counted in BigQuery; streams "
            f"{soak.query.streams.total} ({soak.query.streams.types})"
        )
        return soak

    def warm_up(self, batches: int) -> None:
        """A few untimed batches of ``pending`` (it alone uses every kind of worker):
        the JVM's JIT and the workers' imports are not any mode's figure."""
        if batches < 1:
            return
        started = time.perf_counter()
        figure = self.run_mode("warmup", "pending", batches)
        if figure.failed:
            raise RuntimeError(f"the warm-up query failed: {figure.failed}")
        say(f"  warm-up, untimed: {time.perf_counter() - started:.1f} s")


def _figure_line(figure: QueryFigure) -> str:
    return (
        f"  {figure.name:<10} {len(figure.batches)} micro-batches, {figure.counted:,} "
        f"rows ({figure.distinct:,} distinct) counted in BigQuery; streams "
        f"{figure.streams.total} ({figure.streams.first_batch} by the end of the first "
        f"batch); addBatch p50 {_cell(figure.add_batch(0.5), ',.0f')} ms, "
        f"p95 {_cell(figure.add_batch(0.95), ',.0f')} ms"
    )


def _sample_line(sample: Sample) -> str:
    return (
        f"  soak {sample.seconds:6.0f} s: driver {sample.driver_rss_mb:,.0f} MB "
        f"{sample.driver_threads} threads; JVM {_cell(sample.jvm_rss_mb, ',.0f')} MB "
        f"{sample.jvm_threads} threads; {sample.workers} Python workers "
        f"{sample.workers_rss_mb:,.0f} MB (PSS {sample.workers_pss_mb:,.0f}) "
        f"{sample.workers_threads} threads; "
        f"gRPC connections {sample.grpc_connections} open (most at once "
        f"{sample.grpc_connections_peak}), {sample.grpc_closed_last_minute} closed in the last "
        f"minute; {sample.streams} streams; "
        f"{sample.batches} batches; load {sample.load:.2f}"
    )


def _quiet_falling_behind(spark: SparkSession) -> None:
    """Spark warns of every batch longer than the trigger; the trigger period is a figure
    here, not a warning to print a thousand times in a soak."""
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor", log4j.Level.ERROR
    )


def measure(
    tmp: Path,
    batches: int,
    soak_minutes: float,
    *,
    rows_per_batch: int = ROWS_PER_BATCH,
    sample_s: float = SAMPLE_S,
    warmup_batches: int = WARMUP_BATCHES,
    segment: int = SEGMENT,
) -> Economy:
    """Every figure, in this process: it starts Spark, so call it in a process whose JVM
    (if any) was started with this run's local BigQuery; :func:`measure_in_child` runs it
    in a fresh one."""
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.spark import spark_session

    from onceover.bigquery import bigquery_client
    from onceover_tools.localbq import LocalBigQueryProcess

    result = Economy(batches=batches, rows_per_batch=rows_per_batch, segment=segment)
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    )
    try:
        with LocalBigQueryProcess(log_path=tmp / "local-bigquery.log") as server:
            config = server.config
            os.environ.update(config.env())  # before the session: Python workers inherit it
            client = bigquery_client(config)
            project = config.resolved_project()
            client.create_dataset(f"{project}.{DATASET}", exists_ok=True)
            assert server.child.popen is not None
            assert config.grpc_endpoint is not None
            grpc_port = int(config.grpc_endpoint.rsplit(":", 1)[1])
            tree = ProcessTree(server.child.popen.pid, grpc_port)
            rest_url = str(config.rest_endpoint)
            spark = spark_session("onceover-bench-stream-economy", MASTER)
            try:
                register(spark)
                from onceover_tools.bench import handoff

                handoff.register(spark)
                _quiet_falling_behind(spark)
                bench = Bench(
                    spark, client=client, project=project, rest_url=rest_url, tree=tree,
                    tmp=tmp, rows_per_batch=rows_per_batch,
                )  # fmt: skip
                bench.warm_up(warmup_batches)
                say(
                    f"{batches} micro-batches of {rows_per_batch} rows per mode, "
                    f"{PARTITIONS} partitions, trigger {TRIGGER}; the modes and the floor "
                    f"(Spark's hand-off) interleaved: their first batches, then "
                    f"{result.rounds} rounds of {segment} micro-batches per mode in turn"
                )
                *result.modes, result.floor = bench.run_modes(
                    [(mode, mode) for mode in MODES], batches, segment, result.round_loads,
                    floor=True,
                )  # fmt: skip
                if soak_minutes > 0:
                    say(
                        f"soak: the query with no mode option (`{default_mode()}`) for "
                        f"{soak_minutes:g} min, sampled every {sample_s:g} s"
                    )
                    result.soak = bench.run_soak(soak_minutes, sample_s)
            finally:
                spark.stop()
    except Exception as exc:
        result.failed = f"{type(exc).__name__}: {exc}"[:600]
        say(f"FAILED: {result.failed}")
        traceback.print_exc()
    return result


def measure_in_child(
    out: Path, batches: int, soak_minutes: float, say: Callable[[str], None] = say
) -> Economy:
    """:func:`measure` in a fresh Python process (its own JVM, its own local BigQuery),
    its output passed through; the figures it wrote into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "onceover_tools.bench.stream_economy", "--batches", str(batches),
            "--soak-minutes", f"{soak_minutes:g}", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, check=False)
    figures = out / JSON_NAME
    if not figures.exists():
        say(f"FAILED: stream economy: exited {done.returncode} without figures")
        return Economy(batches, ROWS_PER_BATCH, failed=f"exited {done.returncode}")
    return Economy.from_json(json.loads(figures.read_text())["figures"])


# -- the report ---------------------------------------------------------------------------


def _cell(value: float | None, fmt: str) -> str:
    return "FAILED" if value is None else format(value, fmt)


def _rows_cell(figure: QueryFigure) -> str:
    if figure.counted is None or figure.distinct is None:
        return "FAILED"
    if figure.is_floor:
        return f"none: {figure.counted:,} handed over"
    verdict = "exact" if figure.exact else "at least once" if not figure.exactly_once else "WRONG"
    return f"{figure.counted:,} / {figure.distinct:,} ({verdict})"


def _int_cell(value: int | None) -> str:
    return "FAILED" if value is None else f"{value:,}"


def table(result: Economy) -> list[str]:
    """The modes side by side (and the floor, when it ran), as Markdown."""
    modes = [*result.modes, *([result.floor] if result.floor is not None else [])]

    def each(fn: Callable[[QueryFigure], str]) -> list[str]:
        return [fn(m) for m in modes]

    def ratio(m: QueryFigure, q: float) -> str:
        if m.is_floor:
            return ""
        return "1.00" if m.name == BASELINE else _cell(result.ratio(m.name, q), ".2f")

    def over(m: QueryFigure, q: float | None) -> str:
        if m.is_floor:
            return "0"
        value = result.paired_overhead(m.name) if q is None else result.overhead(m.name, q)
        return _cell(value, "+,.0f")

    rows = [
        ["micro-batches", *each(lambda m: f"{len(m.batches)}")],
        [f"rows in BigQuery, COUNT(*) / COUNT(DISTINCT {KEY})", *each(_rows_cell)],
        ["streams created, in all", *each(lambda m: _int_cell(m.streams.total))],
        ["  by the end of the first batch", *each(lambda m: _int_cell(m.streams.first_batch))],
        ["  after it (steady state)", *each(lambda m: _int_cell(m.streams.steady))],
        ["  their types", *each(lambda m: ", ".join(
            f"{n} {t}" for t, n in sorted(m.streams.types.items())) or "none")],
        ["mean trigger period, s (consecutive batches within a round)",
         *each(lambda m: _cell(m.trigger_period_s, ".2f"))],
        ["steady state, s (the steady batches at that period)",
         *each(lambda m: _cell(m.steady_seconds, ",.1f"))],
        ["**streams created per hour, steady state**",
         *each(lambda m: _cell(m.streams_per_hour, ",.0f"))],
        ["  per partition", *each(lambda m: _cell(m.streams_per_partition_hour, ",.1f"))],
        ["sink time per batch (addBatch) p50, ms",
         *each(lambda m: _cell(m.add_batch(0.5), ",.0f"))],
        ["  p95, ms", *each(lambda m: _cell(m.add_batch(0.95), ",.0f"))],
        ["  p50 / `default`", *each(lambda m: ratio(m, 0.5))],
        ["  p95 / `default`", *each(lambda m: ratio(m, 0.95))],
        ["  paired: median over the rounds of the round's p50 / `default`'s",
         *each(lambda m: "" if m.is_floor else "1.00" if m.name == BASELINE
               else _cell(result.paired_ratio(m.name), ".2f"))],
        ["  the first batch (not in p50/p95), ms",
         *each(lambda m: _cell(m.first_batch_ms, ",.0f"))],
    ]  # fmt: skip
    if result.floor is not None:
        rows += [
            ["**overhead per micro-batch over the floor, p50, ms** (the p50 less the floor's)",
             *each(lambda m: over(m, 0.5))],
            ["  p95, ms (the p95 less the floor's)", *each(lambda m: over(m, 0.95))],
            ["  paired: median over the rounds of the round's p50 less the floor's, ms",
             *each(lambda m: over(m, None))],
        ]  # fmt: skip
    return [
        "| | " + " | ".join(f"`{m.name}`" for m in modes) + " |",
        "|---|" + "---:|" * len(modes),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def interleaving(result: Economy) -> str:
    """How the modes ran, and the machine's load while they did."""
    loads = result.round_loads
    load = (
        f"; the machine's load average (1 min) as the rounds began: min {min(loads):.2f}, "
        f"median {statistics.median(loads):.2f}, max {max(loads):.2f}"
        if loads
        else ""
    )
    floor = (
        " The floor: the same query into Spark's hand-off (a Python data source whose "
        "writers count the rows and write nothing), interleaved as one more mode: what "
        "Spark costs any Python sink per micro-batch."
        if result.floor is not None
        else ""
    )
    return (
        f"The modes interleaved: their queries ran together, one batch at a time; each "
        f"mode's first batch in turn, then {result.rounds} rounds of up to {result.segment} "
        f"micro-batches per mode in turn (the order rotated each round){load}.{floor}"
    )


def _slope(value: float | None) -> str:
    return "n/a" if value is None else format(value, "+,.1f")  # fewer than two samples


def soak_table(soak: Soak) -> list[str]:
    """First and last sample and the slopes, as Markdown."""
    if not soak.samples:
        return [f"The soak failed before its first sample: {soak.query.failed}"]
    first, last = soak.samples[0], soak.samples[-1]
    rows = []
    for name, label in SAMPLED:
        fmt = ",.1f" if name.endswith("_mb") else ".2f" if name == "load" else ",.0f"
        a, b = getattr(first, name), getattr(last, name)
        rows.append([
            label, "n/a" if a is None else format(a, fmt), "n/a" if b is None else format(b, fmt),
            _slope(slope_per_hour(soak.points(name))),
            _slope(slope_per_hour(soak.points(name, second_half=True))),
        ])  # fmt: skip
    query = soak.query
    early, late = soak.add_batch_tenths()
    return [
        f"| {len(soak.samples)} samples over {last.seconds / 60:.1f} min | first (after the "
        "first batch) | last | slope, per hour | slope over the second half, per hour |",
        "|---|---:|---:|---:|---:|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        f"Soak query: {len(query.batches):,} micro-batches, rows in BigQuery "
        f"{_rows_cell(query)}; streams {_int_cell(query.streams.total)} "
        f"({', '.join(f'{n} {t}' for t, n in sorted(query.streams.types.items())) or 'none'}), "
        f"{_int_cell(query.streams.first_batch)} by the end of the first batch: "
        f"{_cell(query.streams_per_hour, ',.1f')} streams per hour in steady state; sink time "
        f"per batch p50 {_cell(early, ',.0f')} ms over the first tenth of its batches, "
        f"{_cell(late, ',.0f')} ms over the last.",
    ]


def goals_table(result: Economy) -> list[str]:
    def shown(value: float | None, unit: str) -> str:
        if value is None:
            return "FAILED"
        return f"{value:.2f}x" if unit == "x" else f"{value:,.1f} {unit}"

    mark = {True: "met", False: "**missed**", None: "FAILED"}
    return [
        "| target | value | goal | status |",
        "|---|---:|---:|---|",
        *(f"| {g.name} | {shown(g.value, g.unit)} | ≤ {shown(g.goal, g.unit)} | {mark[g.met]} |"
          for g in goals(result)),
    ]  # fmt: skip


def markdown(result: Economy, header: dict[str, Any]) -> list[str]:
    lines = [
        "# Stream economy",
        "",
        f"`{header['command']}` on {header['generated_at']}, commit {header['commit']}; "
        f"{header['machine']}. Spark `{MASTER}`, the local BigQuery in a child process; "
        f"{result.batches} micro-batches of {result.rows_per_batch} rows per mode, "
        f'`repartition({result.partitions}, "{KEY}")`, trigger {result.trigger}.',
        "",
        *goals_table(result),
        "",
        *table(result),
        "",
        interleaving(result),
    ]
    if result.soak is not None:
        lines += ["", f"## Soak: `writeStream` with no mode option (`{default_mode()}`), "
                  f"{result.soak.minutes:g} min", "", *soak_table(result.soak)]  # fmt: skip
    if result.failed:
        lines += ["", f"FAILED: {result.failed}"]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--batches", type=int, default=BATCHES, help="micro-batches per mode")
    parser.add_argument("--segment", type=int, default=SEGMENT,
                        help="micro-batches each mode runs in its turn of a round")  # fmt: skip
    parser.add_argument("--soak-minutes", type=float, default=SOAK_MINUTES,
                        help="how long the soak runs; 0 skips it")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="write JSON and Markdown here")
    parser.add_argument("--rows-per-batch", type=int, default=ROWS_PER_BATCH)
    parser.add_argument("--sample-seconds", type=float, default=SAMPLE_S,
                        help="the soak's sampling interval")  # fmt: skip
    parser.add_argument("--warmup-batches", type=int, default=WARMUP_BATCHES,
                        help="untimed micro-batches before the modes (0: none)")  # fmt: skip
    args = parser.parse_args()
    if args.batches < 2 or args.segment < 1 or args.rows_per_batch < PARTITIONS:
        parser.error(f"--batches must be >= 2, --segment >= 1 and --rows-per-batch >= {PARTITIONS}")
    if args.soak_minutes < 0 or args.sample_seconds <= 0 or args.warmup_batches < 0:
        parser.error("--soak-minutes and --warmup-batches must be >= 0, --sample-seconds > 0")
    from onceover_tools.bench.provenance import current_commit, machine

    header = {
        "command": "python -m onceover_tools.bench.stream_economy " + " ".join(sys.argv[1:]),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": current_commit(),
        "machine": machine(),
    }
    say(f"machine: {header['machine']}")
    with tempfile.TemporaryDirectory(prefix="onceover-bench-economy-") as tmp:
        result = measure(
            Path(tmp), args.batches, args.soak_minutes, rows_per_batch=args.rows_per_batch,
            sample_s=args.sample_seconds, warmup_batches=args.warmup_batches,
            segment=args.segment,
        )  # fmt: skip
    load = os.getloadavg()
    header["load_at_end"] = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    lines = markdown(result, header)
    say("\n" + "\n".join(lines))
    say(f"\nload average at the end {header['load_at_end']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / MARKDOWN_NAME).write_text("\n".join(lines) + "\n")
        document = {**header, "figures": result.as_json()}
        (args.out / JSON_NAME).write_text(json.dumps(document, indent=2) + "\n")
        say(f"written: {args.out / MARKDOWN_NAME}, {args.out / JSON_NAME}")
    return 1 if result.any_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
