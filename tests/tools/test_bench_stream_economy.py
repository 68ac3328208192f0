"""The stream-economy bench's report and schedule, on figures made up on purpose. Its run
(every mode's query counted in BigQuery, the streams each created, the rounds, the soak's
samples) is asserted in ``tests/tools/test_bench_command.py``, on the run ``onceover bench``
makes of it."""

from __future__ import annotations

from pathlib import Path

from onceover_tools.bench.control_plane import Figures
from onceover_tools.bench.run import BenchPlan, render
from onceover_tools.bench.stream_economy import (
    PARTITIONS,
    BatchFigure,
    Economy,
    QueryFigure,
    StreamCount,
    schedule,
)
from onceover_tools.bench.writers import CONTENDERS, WriterFigure

# -- the report, on figures made up on purpose ------------------------------------------


def _query(name: str, ms: float, streams: int, failed: str | None = None) -> QueryFigure:
    """Ten batches a second apart, each taking ``ms`` in the sink."""
    batches = [BatchFigure(n, 200, ms, ms, 1_000.0 + n) for n in range(10)]
    return QueryFigure(
        name, name, expected_rows=2_000, batches=batches, counted=2_000, distinct=2_000,
        streams=StreamCount(PARTITIONS + streams, PARTITIONS, {}), failed=failed,
    )  # fmt: skip


def _line(markdown: str, name: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} |"))


def test_the_report_sets_streams_and_batch_times_against_their_targets() -> None:
    plan = BenchPlan(1_000, 1, 1_000, ("sqlite",), Path("out"), "", quick=True)
    database = Figures("sqlite", stored=1_000, ingest_seconds=0.1, posted=1_000, post_ms=[1.0])
    header = {"command": "onceover bench", "generated_at": "now", "commit": "c", "machine": "m"}
    writers = [
        WriterFigure(c.key, rows, rows * 50, [1.0]) for c in CONTENDERS for rows in (1_000, 4_000)
    ]
    economy = Economy(batches=10, rows_per_batch=200, modes=[
        _query("pending", 1_100.0, 72), _query("buffered", 1_150.0, 0),
        _query("committed", 1_500.0, 0), _query("default", 1_000.0, 0),
    ])  # fmt: skip
    failed = Economy(batches=10, rows_per_batch=200, modes=[
        _query("pending", 1_100.0, 72), _query("buffered", 1_150.0, 0),
        _query("committed", 1_500.0, 0, failed="x"), _query("default", 1_000.0, 0),
    ])  # fmt: skip

    markdown, document = render(plan, writers, [database], header, economy=economy)
    broken, _ = render(plan, writers, [database], header, economy=failed)

    committed = "streams created per hour, `committed` (8 partitions, 1 s trigger)"
    assert _line(markdown, committed).endswith("| 0.0 streams/h |  | ≤ 16.0 streams/h | met |")
    assert _line(markdown, "sink time per micro-batch p50, `pending` / `default`").endswith(
        "| 1.10x |  | ≤ 1.20x | met |"
    )
    assert _line(markdown, "sink time per micro-batch p95, `committed` / `default`").endswith(
        "| 1.50x |  | ≤ 1.20x | **missed** |"
    )
    buffered = "streams created per hour, `buffered` (8 partitions, 1 s trigger)"
    assert _line(markdown, buffered).endswith("| 0.0 streams/h |  | ≤ 16.0 streams/h | met |")
    assert _line(markdown, "sink time per micro-batch p50, `buffered` / `default`").endswith(
        "| 1.15x |  | ≤ 1.20x | met |"
    )
    assert _line(broken, committed).endswith("| FAILED |  | ≤ 16.0 streams/h | FAILED |")
    # pending: 72 streams after the first batch, over its 9 steady batches at the 1 s
    # period they kept: 28,800 an hour.
    assert _line(markdown, "**streams created per hour, steady state**") == (
        "| **streams created per hour, steady state** | 28,800 | 0 | 0 | 0 |"
    )
    assert _line(markdown, "  p50 / `default`") == (
        "|   p50 / `default` | 1.10 | 1.15 | 1.50 | 1.00 |"
    )
    assert document["stream_economy"]["ratios_to_default"]["committed"]["p50"] == 1.5
    assert document["stream_economy"]["ratios_to_default"]["buffered"]["paired_p50"] == 1.15
    assert [t["met"] for t in document["targets"]["stream_economy"]] == [
        True, True, True, True, True, True, False, False,
    ]  # fmt: skip


def test_the_modes_take_turns_in_rounds_the_order_rotated() -> None:
    # 60 batches: the first alone, then 59 in rounds of 5 (the last of 4), each mode in turn.
    rounds = schedule(60, 5, 4)
    assert len(rounds) == 12
    assert rounds[0] == [(0, 5), (1, 5), (2, 5), (3, 5)]
    assert rounds[1] == [(1, 5), (2, 5), (3, 5), (0, 5)]
    assert rounds[-1] == [(3, 4), (0, 4), (1, 4), (2, 4)]
    for mode in range(4):
        assert sum(files for turns in rounds for m, files in turns if m == mode) == 59
    assert schedule(2, 5, 4) == [[(0, 1), (1, 1), (2, 1), (3, 1)]]


def test_paired_rounds_and_the_trigger_period_within_them() -> None:
    """Batches a round apart are not consecutive: the period is taken within rounds."""

    def interleaved(name: str, ms: float) -> QueryFigure:
        batches = [BatchFigure(0, 200, ms, ms, 0.0, 0)] + [
            BatchFigure(n, 200, ms * number, ms, 100.0 * number + 1.5 * n, number)
            for number in (1, 2)
            for n in ((1, 2) if number == 1 else (3, 4))
        ]
        return QueryFigure(
            name, name, expected_rows=1_000, batches=batches, counted=1_000, distinct=1_000,
            streams=StreamCount(PARTITIONS + 8, PARTITIONS, {}),
        )  # fmt: skip

    economy = Economy(batches=5, rows_per_batch=200, segment=2, modes=[
        interleaved("pending", 600.0), interleaved("default", 500.0),
    ])  # fmt: skip
    pending = economy.mode("pending")
    assert pending is not None
    assert pending.trigger_period_s == 1.5  # not the 100 s between the rounds
    assert pending.steady_seconds == 6.0
    assert pending.streams_per_hour == 8 / 6.0 * 3_600
    assert economy.paired_ratio("pending") == 1.2
    assert economy.rounds == 2
