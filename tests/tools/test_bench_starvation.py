"""The starvation bench's report: the flooded phase set against quiet with its target.
Its run (every phase stored every event, the flood answered) is asserted in
``tests/tools/test_bench_command.py``, on the run ``onceover bench`` makes of it."""

from __future__ import annotations

from pathlib import Path

from onceover_tools.bench.control_plane import Figures
from onceover_tools.bench.run import BenchPlan, render
from onceover_tools.bench.starvation import Phase, Starvation
from onceover_tools.bench.writers import CONTENDERS, WriterFigure

TARGET = "ingest, BigQuery hanging and /api/health flooded / quiet"


def _starvation(*rates: float | None) -> Starvation:
    result = Starvation(events=1_000, flood=32)
    for name, rate in zip(("quiet", "hanging", "flooded"), rates, strict=True):
        result.phases.append(Phase(name, rate=rate, post_ms=[10.0], failed=None if rate else "x"))
    result.phases[-1].health = {"answers_per_s": 7.0, "p50_ms": 1.0, "p95_ms": 2.0, "errors": 0.0}
    return result


def _line(markdown: str, name: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} |"))


def test_the_report_sets_the_flooded_phase_against_quiet() -> None:
    plan = BenchPlan(1_000, 1, 1_000, ("sqlite",), Path("out"), "", quick=True)
    database = Figures("sqlite", stored=1_000, ingest_seconds=0.1, posted=1_000, post_ms=[1.0])
    header = {"command": "onceover bench", "generated_at": "now", "commit": "c", "machine": "m"}

    writers = [
        WriterFigure(c.key, rows, rows * 50, [1.0]) for c in CONTENDERS for rows in (1_000, 4_000)
    ]

    met, document = render(plan, writers, [database], header, _starvation(1e3, 950.0, 900.0))
    missed, _ = render(plan, writers, [database], header, _starvation(1e3, 950.0, 500.0))
    failed, _ = render(plan, writers, [database], header, _starvation(None, 950.0, 900.0))

    assert _line(met, TARGET).endswith("| 0.90x |  | ≥ 0.80x | met |")
    assert _line(missed, TARGET).endswith("| 0.50x |  | ≥ 0.80x | **missed** |")
    assert _line(failed, TARGET).endswith("| FAILED |  | ≥ 0.80x | FAILED |")
    assert _line(met, "ratio to quiet") == "| ratio to quiet | 1.00 | 0.95 | 0.90 |"
    assert document["starvation"]["phases"][2]["ratio_to_quiet"] == 0.9
