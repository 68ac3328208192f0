"""The bench's words: the lines it prints as it runs, and a run's figures as Markdown."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from onceover_tools.bench.stream_economy.economy import Economy, default_mode, goals
from onceover_tools.bench.stream_economy.figures import (
    SAMPLED,
    QueryFigure,
    Sample,
    Soak,
    slope_per_hour,
)
from onceover_tools.bench.stream_economy.plan import BASELINE, KEY, MASTER


def say(line: str) -> None:
    print(line, flush=True)


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


def figure_line(figure: QueryFigure) -> str:
    """One mode's figures, as the run prints them when its queries stopped."""
    return (
        f"  {figure.name:<10} {len(figure.batches)} micro-batches, {figure.counted:,} "
        f"rows ({figure.distinct:,} distinct) counted in BigQuery; streams "
        f"{figure.streams.total} ({figure.streams.first_batch} by the end of the first "
        f"batch); addBatch p50 {_cell(figure.add_batch(0.5), ',.0f')} ms, "
        f"p95 {_cell(figure.add_batch(0.95), ',.0f')} ms"
    )


def sample_line(sample: Sample) -> str:
    """One of the soak's samples, as the soak prints it."""
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
