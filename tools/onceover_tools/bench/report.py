"""The bench's figures as one Markdown report and one JSON document, with every ratio the
product promises set against its target (a target missed is shown, never asserted)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceover_tools.bench import ledger_stores as ls
from onceover_tools.bench import starvation as st
from onceover_tools.bench import stream_economy as se
from onceover_tools.bench.control_plane import (
    NOT_REACHED,
    Figures,
    growth,
    percentile,
    slowest_read_p95,
)
from onceover_tools.bench.writers import CONTENDERS, FLOOR, MONITORED, WriterFigure

INGEST_TARGET = 20_000.0
READ_P95_TARGET_MS = 100.0
SCRAPE_P95_TARGET_MS = 100.0
"""A Prometheus scrape at 1,000,000 stored events (issue 57)."""
INGEST_GROWTH_TARGET = 0.8
"""Ingest with ten times the events stored at least this share of its rate (flat cost)."""
MONITORING_OVERHEAD_TARGET = 0.03
FLOOR_TARGET = 1.1
"""Onceover ``pending``'s wall time at most this many times Spark's own hand-off of the
same rows to Python workers (the floor under any Python data source)."""


@dataclass(frozen=True)
class Target:
    """One promise: ``value`` (``None`` when a figure it needs failed) against ``goal``."""

    name: str
    value: float | None
    goal: float
    at_least: bool
    unit: str = "x"

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value >= self.goal if self.at_least else self.value <= self.goal

    def shown(self, value: float | None) -> str:
        if value is None:
            return "FAILED"
        if self.unit == "%":
            return _percent(value)
        if self.unit == "x":
            return f"{value:.2f}x"
        return f"{value:,.0f} {self.unit}" if value >= 100 else f"{value:.1f} {self.unit}"

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "value": self.value, "goal": self.goal,
            "at_least": self.at_least, "unit": self.unit, "met": self.met,
        }  # fmt: skip


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def writer_targets(by_key: dict[str, WriterFigure]) -> list[Target]:
    """The writer promises at one size (rows/s ratios; Onceover is ``pending``, the
    default exactly-once mode)."""
    rate = {key: figure.rows_per_s for key, figure in by_key.items()}
    plain = by_key["pending"].median
    overheads = [
        Target(
            f"monitoring overhead, backend {backend} (job wall time)",
            paired_overhead(by_key[key], by_key["pending"]).median,
            MONITORING_OVERHEAD_TARGET,
            False,
            unit="%",
        )
        for key, backend in MONITORED.items()
    ]
    return [
        Target("pending / default", _ratio(rate["pending"], rate["default"]), 0.9, True),
        Target(
            "Onceover / seeds' approach (proto per row)",
            _ratio(rate["pending"], rate["seed_proto_rows"]),
            5.0,
            True,
        ),
        Target(
            "Onceover / streaming inserts",
            _ratio(rate["pending"], rate["streaming_inserts"]),
            10.0,
            True,
        ),
        Target(
            "Onceover / Arrow ceiling", _ratio(rate["pending"], rate["arrow_ceiling"]), 0.5, True
        ),
        Target(
            "Onceover time / Spark's hand-off time",
            _ratio(plain, by_key[FLOOR].median),
            FLOOR_TARGET,
            False,
        ),
        *overheads,
    ]


@dataclass(frozen=True)
class Overhead:
    """How much longer a monitored write took than the plain ``pending`` write of its own
    round, as a fraction of the plain one's wall time, over every round both finished."""

    each: tuple[float, ...]

    @property
    def median(self) -> float | None:
        return statistics.median(self.each) if self.each else None

    @property
    def middle_half(self) -> tuple[float, float] | None:
        """The lower and upper quartiles (nearest rank): where the middle half of the
        rounds fell."""
        if not self.each:
            return None
        each = list(self.each)
        return percentile(each, 0.25), percentile(each, 0.75)


def paired_overhead(monitored: WriterFigure, plain: WriterFigure) -> Overhead:
    """Round by round: the two figures' runs are in the same order, one of each a round
    (:func:`onceover_tools.bench.writers.schedule`), so a slow minute of the machine
    slows both writes it holds, and cancels out of their ratio."""
    return Overhead(tuple(
        m / p - 1 for m, p in zip(monitored.seconds, plain.seconds, strict=False)
        if m is not None and p is not None and p > 0
    ))  # fmt: skip


def control_plane_targets(figures: list[Figures]) -> list[Target]:
    targets: list[Target] = []
    for db in figures:
        targets.append(
            Target(f"ingest, {db.database}", db.ingest_rate, INGEST_TARGET, True, "events/s")
        )
        # The promise holds while ingest runs at full rate; idle reads only when the
        # bench took none under ingest.
        worst = slowest_read_p95(db.reads_under_ingest_ms or db.reads_ms)
        targets.append(
            Target(f"read p95 (slowest endpoint), {db.database}", worst, READ_P95_TARGET_MS,
                   False, "ms")
        )  # fmt: skip
        scrape = db.reads_ms.get("GET /metrics")
        targets.append(
            Target(f"GET /metrics p95 idle, {db.database}",
                   percentile(scrape, 0.95) if scrape else None, SCRAPE_P95_TARGET_MS, False, "ms")
        )  # fmt: skip
    for small, large in growth(figures):
        targets.append(Target(
            f"ingest at {large.events:,} stored / at {small.events:,}, {large.database}",
            _ratio(large.ingest_rate, small.ingest_rate), INGEST_GROWTH_TARGET, True,
        ))  # fmt: skip
    return targets


def starvation_targets(result: st.Starvation | None) -> list[Target]:
    """Ingest keeps its pace while BigQuery hangs and /api/health is flooded."""
    if result is None:
        return []
    name = "ingest, BigQuery hanging and /api/health flooded / quiet"
    return [Target(name, result.flooded_ratio, st.RATIO_TARGET, True)]


def starvation_section(result: st.Starvation) -> list[str]:
    return [
        f"### Control plane in trouble: {result.events:,} events posted per phase", "",
        *st.table(result), "",
        "One backend process on SQLite with its default settings, a fresh database per "
        "phase. BigQuery hanging: listeners that accept and never answer, every run that "
        "succeeds reconciled (two checks wait out their deadline, the rest queue or are "
        f"stored as not made). Flooded: {result.flood} anonymous callers from one address "
        "calling `GET /api/health` without a pause, from a process of their own.",
    ]  # fmt: skip


def stream_economy_targets(result: se.Economy | None) -> list[Target]:
    """Streams per hour of the modes that keep their streams, and each exactly-once
    mode's time per micro-batch against ``default``."""
    if result is None:
        return []
    return [Target(g.name, g.value, g.goal, False, g.unit) for g in se.goals(result)]


def ledger_store_targets(result: ls.LedgerStores | None) -> list[Target]:
    """Each mode's ledger requests per micro-batch flat in the batches stored, per store."""
    if result is None:
        return []
    return [Target(g.name, g.value, g.goal, False, g.unit) for g in ls.goals(result)]


def stream_economy_section(result: se.Economy) -> list[str]:
    lines = [
        f"### Stream economy: a streaming query, {result.partitions} partitions, trigger "
        f"{result.trigger}, {result.batches} micro-batches of {result.rows_per_batch} rows per "
        "mode", "",
        *se.table(result), "",
        "A user's query (JSON files, one per micro-batch, `repartition(8, \"event_id\")`) "
        "in a process of its own, with a local BigQuery of its own. "
        f"{se.interleaving(result)} Streams: those "
        "`/admin/streams` lists for the table, `_default` aside (never created); those "
        "after each mode's first batch are extrapolated to an hour at the trigger period "
        "it kept. Sink time: Spark's `addBatch` per batch "
        "(the batch's plan runs into the sink; its rows are visible when it returns), "
        "the first batch left out, pooled over the rounds. Overhead over the floor: a "
        "mode's p50 (p95) less the floor's, the same query into Spark's hand-off to "
        "Python writers that write nothing.",
    ]  # fmt: skip
    if result.soak is not None:
        lines += [
            "", f"Soak: `writeStream` with no mode option (so `{se.default_mode()}`), "
            f"{result.soak.minutes:g} min, sampled every {result.soak.sample_s:g} s:", "",
            *se.soak_table(result.soak),
        ]  # fmt: skip
    if result.failed:
        lines += ["", f"FAILED: {result.failed}"]
    return lines


def _cell(value: float | None, fmt: str) -> str:
    return "FAILED" if value is None else format(value, fmt)


def _mark(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "FAILED"}[met]


def _table(heading: list[str], rows: list[list[str]], numeric: bool) -> list[str]:
    """A Markdown table; the first column is a name, the others right-aligned if
    ``numeric``."""
    align = "---:" if numeric else "---"
    return [
        "| " + " | ".join(heading) + " |",
        "|---|" + "|".join(align for _ in heading[1:]) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def writers_section(figures: list[WriterFigure], sizes: list[int]) -> list[str]:
    small, large = sizes[0], sizes[-1]
    at = {(f.key, f.rows): f for f in figures}
    lines = [
        f"### Writers: {small:,} rows (N) and {large:,} rows ({large // small}N)", "",
    ]  # fmt: skip
    rows: list[list[str]] = []
    for contender in CONTENDERS:
        a, b = at[(contender.key, small)], at[(contender.key, large)]
        growth = (
            b.median / (a.median * large / small) if a.median and b.median else None
        )  # 1.00 = linear; above it, each row costs more at the larger size
        rows.append([
            contender.label, _cell(a.median, ".2f"), _cell(a.rows_per_s, ",.0f"),
            _cell(a.mb_per_s, ".1f"), _cell(b.median, ".2f"), _cell(b.rows_per_s, ",.0f"),
            _cell(b.mb_per_s, ".1f"), _cell(growth, ".2f"),
        ])  # fmt: skip
    lines += _table(
        ["writer", "N: s", "N: rows/s", "N: MB/s", f"{large // small}N: s",
         f"{large // small}N: rows/s", f"{large // small}N: MB/s", "time per row, 4N / N"],
        rows, numeric=True,
    )  # fmt: skip
    lines += ["", "What each writer is:", ""]
    lines += [f"- **{c.label}**: {c.description}." for c in CONTENDERS]
    return lines


def monitoring_section(figures: list[WriterFigure], sizes: list[int]) -> list[str]:
    """Each monitored write against the plain ``pending`` write of its own round."""
    at = {(f.key, f.rows): f for f in figures}
    rows: list[list[str]] = []
    for key, backend in MONITORED.items():
        row = [f"backend {backend}"]
        for size in sizes:
            overhead = paired_overhead(at[(key, size)], at[("pending", size)])
            half = overhead.middle_half
            row += [
                str(len(overhead.each)),
                _percent(overhead.median),
                f"{_percent(half[0])} to {_percent(half[1])}" if half else "",
                f"{_percent(min(overhead.each))} to {_percent(max(overhead.each))}"
                if overhead.each
                else "",
            ]
        rows.append(row)
    heading = ["monitored write"]
    for size in sizes:
        heading += [f"{size:,}: rounds", "median", "middle half", "all rounds"]
    return [
        "### Monitoring overhead, paired by round",
        "",
        *_table(heading, rows, numeric=True),
        "",
        "A round is plain `pending` and the three monitored writes back to back, in an "
        "order that rotates each round; each monitored write is set against the plain one "
        "of its round, and the target is the median over the rounds. Single writes vary by "
        f"several times the {MONITORING_OVERHEAD_TARGET:.0%} held to, so only the median of "
        "many rounds resolves it.",
    ]


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value * 100:+.1f}%"


def targets_section(by_size: dict[int, list[Target]], shared: list[Target]) -> list[str]:
    sizes = sorted(by_size)
    heading = ["ratio", *(f"at {size:,} rows" for size in sizes), "target", "status"]
    rows: list[list[str]] = []
    for index, target in enumerate(by_size[sizes[0]]):
        per_size = [by_size[size][index] for size in sizes]
        goal = ("≥ " if target.at_least else "≤ ") + target.shown(target.goal).lstrip("+")
        # The promise holds only if it holds at every size.
        statuses = {t.met for t in per_size}
        status = None if None in statuses else all(statuses)
        rows.append([target.name, *(t.shown(t.value) for t in per_size), goal, _mark(status)])
    for target in shared:
        goal = ("≥ " if target.at_least else "≤ ") + target.shown(target.goal).lstrip("+")
        rows.append(
            [target.name, target.shown(target.value), *([""] * (len(sizes) - 1)), goal,
             _mark(target.met)]
        )  # fmt: skip
    return _table(heading, rows, numeric=False)


def control_plane_section(figures: list[Figures], events: int) -> list[str]:
    def each(fn: Callable[[Figures], float | None], fmt: str) -> list[str]:
        return [_cell(fn(db), fmt) for db in figures]

    def tenth(db: Figures, index: int) -> str:
        if len(db.tenths) == 10:
            return format(db.tenths[index], ",.0f")
        return "FAILED" if db.failed else "n/a"  # fewer than ten POSTs: no tenths to show

    rows = [
        ["events stored", *each(lambda db: float(db.stored) if db.stored else None, ",.0f")],
        ["ingest over HTTP, events/s", *each(lambda db: db.ingest_rate, ",.0f")],
        ["  over the first tenth posted", *(tenth(db, 0) for db in figures)],
        ["  over the last tenth posted", *(tenth(db, 9) for db in figures)],
        ["server CPU per event posted, µs", *each(lambda db: db.server_us_per_event, ",.1f")],
        ["POST p95, ms", *each(lambda db: percentile(db.post_ms, 0.95) if db.post_ms else None,
                               ",.0f")],
    ]  # fmt: skip
    under = any(db.reads_under_ingest_ms for db in figures)
    for label in read_endpoints_labels(figures):
        if under:
            rows.append(
                [f"{label} p95 under ingest, ms", *(_under_ingest(db, label) for db in figures)]
            )
        rows.append([f"{label} p95, ms", *each(
            lambda db, label=label: percentile(db.reads_ms[label], 0.95)  # type: ignore[misc]
            if db.reads_ms.get(label) else None, ",.1f",
        )])  # fmt: skip
    return [
        f"### Control plane: {events:,} events stored", "",
        *_table(["", *(db.database for db in figures)], rows, numeric=True),
    ]  # fmt: skip


def _under_ingest(db: Figures, label: str) -> str:
    """A read's p95 while ingest ran. A read the readers did not reach before a short
    ingest ended has no figure, which is not a failure (a read that failed fails the
    database: ``db.failed``)."""
    timings = db.reads_under_ingest_ms.get(label)
    if timings:
        return format(percentile(timings, 0.95), ",.1f")
    return "FAILED" if db.failed else NOT_REACHED


def read_endpoints_labels(figures: list[Figures]) -> list[str]:
    for db in figures:
        if db.reads_ms:
            return list(db.reads_ms)
    return []
