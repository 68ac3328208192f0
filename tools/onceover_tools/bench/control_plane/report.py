"""The figures side by side: a column per database and size, as Markdown."""

from __future__ import annotations

from typing import NamedTuple

from onceover_tools.bench.control_plane.figures import Figures, percentile


def _ms(values: list[float], share: float) -> float | None:
    return percentile(values, share) if values else None


def _tenth(tenths: list[float], index: int) -> float | None:
    return tenths[index] if len(tenths) == 10 else None


def slowest_read_p95(reads: dict[str, list[float]]) -> float | None:
    """The p95 of the slowest endpoint (None: no read answered)."""
    return max((percentile(values, 0.95) for values in reads.values() if values), default=None)


NOT_REACHED = "not reached"
"""A read under ingest with no figure: the readers did not reach it before ingest ended."""


class _Row(NamedTuple):
    """A line of the table: a figure per result, ``missing`` where one has none."""

    name: str
    values: list[float | None]
    fmt: str
    missing: str = "FAILED"


def report(results: list[Figures], labels: list[str]) -> None:
    """A column per result; ``labels`` the read endpoints, in order."""
    fill_rows = any(r.fill_rate for r in results)
    rows: list[_Row] = [
        _Row("events stored", [float(r.stored) if r.stored else None for r in results], ",.0f"),
        _Row("database size, MB", [r.size_mb for r in results], ",.0f"),
    ]
    if fill_rows:
        rows += [
            _Row("in-process fill, events/s", [r.fill_rate for r in results], ",.0f"),
            _Row(
                "  over the first tenth filled", [_tenth(r.fill_tenths, 0) for r in results], ",.0f"
            ),
            _Row(
                "  over the last tenth filled", [_tenth(r.fill_tenths, 9) for r in results], ",.0f"
            ),
        ]
    rows += [
        _Row("ingest over HTTP, events/s", [r.ingest_rate for r in results], ",.0f"),
        _Row("  over the first tenth posted", [_tenth(r.tenths, 0) for r in results], ",.0f"),
        _Row("  over the last tenth posted", [_tenth(r.tenths, 9) for r in results], ",.0f"),
        _Row("server CPU per event posted, us", [r.server_us_per_event for r in results], ",.1f"),
        _Row("POST p50, ms", [_ms(r.post_ms, 0.5) for r in results], ",.0f"),
        _Row("POST p95, ms", [_ms(r.post_ms, 0.95) for r in results], ",.0f"),
        # None: no reader ran (--readers 0), or none finished a read before ingest did.
        _Row("slowest read p95 under ingest, ms",
         [slowest_read_p95(r.reads_under_ingest_ms) for r in results], ",.1f", "none timed"),
        _Row("slowest read p95 idle, ms", [slowest_read_p95(r.reads_ms) for r in results], ",.1f"),
    ]  # fmt: skip
    for label in labels:
        for share, name in ((0.5, "p50"), (0.95, "p95")):
            under = [_ms(r.reads_under_ingest_ms.get(label, []), share) for r in results]
            if any(value is not None for value in under):
                # A read the readers did not reach before a short ingest ended has no
                # figure; that is not a failure (a failed read raises in Readers.stop).
                rows.append(_Row(f"{label} {name} under ingest, ms", under, ",.1f", NOT_REACHED))
            idle = [_ms(r.reads_ms.get(label, []), share) for r in results]
            rows.append(_Row(f"{label} {name}, ms", idle, ",.1f"))
    sizes = sorted({r.events for r in results})
    names = [r.database if len(sizes) == 1 else f"{r.database}, {r.events:,}" for r in results]
    both = len(results) == 2 and len(sizes) == 1
    heading = "| | " + " | ".join(names) + " |"
    rule = "|---|" + "---:|" * len(results)
    if both:
        heading += f" {names[1]} / {names[0]} |"
        rule += "---:|"
    print(f"\n{heading}\n{rule}")
    for name, values, fmt, missing in rows:
        cells = [missing if v is None else format(v, fmt) for v in values]
        line = f"| {name} | " + " | ".join(cells) + " |"
        if both:
            a, b = values
            line += f" {b / a:.2f} |" if a and b else " - |"
        print(line)
    if both and results[0].ingest_rate and results[1].ingest_rate:
        print(
            f"\ningest over HTTP: {results[1].database} / {results[0].database} = "
            f"{results[1].ingest_rate / results[0].ingest_rate:.2f}"
        )
    for small, large in growth(results):
        print(
            f"\ningest over HTTP, {large.database}: at {large.events:,} stored / at "
            f"{small.events:,} = {_ratio_text(large.ingest_rate, small.ingest_rate)}; "
            f"server CPU per event "
            f"{_ratio_text(large.server_us_per_event, small.server_us_per_event)}"
        )


def growth(results: list[Figures]) -> list[tuple[Figures, Figures]]:
    """Per database measured at several sizes: (smallest, largest)."""
    pairs = []
    for name in dict.fromkeys(r.database for r in results):
        mine = sorted((r for r in results if r.database == name), key=lambda r: r.events)
        if len(mine) > 1:
            pairs.append((mine[0], mine[-1]))
    return pairs


def _ratio_text(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"
