"""The stream-economy bench: a streaming query's write streams in each mode, each mode's
time per micro-batch (the modes interleaved in rounds), and a soak of ``writeStream``'s
default. Its timings are not asserted (a benchmark, not a timed test); what is: every
mode's query ran and its rows were counted in BigQuery, exactly for the exactly-once
modes; the streams each mode created; the rounds each batch ran in; the soak's samples;
and the report sets each figure against its target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from onceover_tools.bench.control_plane import Figures
from onceover_tools.bench.run import BenchPlan, render
from onceover_tools.bench.stream_economy import (
    JSON_NAME,
    MARKDOWN_NAME,
    MODES,
    PARTITIONS,
    BatchFigure,
    Economy,
    QueryFigure,
    StreamCount,
    schedule,
)
from onceover_tools.bench.writers import CONTENDERS, WriterFigure

BATCHES = 2  # each mode's first batch in turn, then one round of one batch each
ROWS = 100  # per micro-batch: every one of the 8 partitions gets rows
TARGETS = (
    "streams created per hour, `buffered` (8 partitions, 1 s trigger)",
    "streams created per hour, `committed` (8 partitions, 1 s trigger)",
    "streams created per hour, `writeStream`'s default (`buffered`), 0.05 min soak",
    "sink time per micro-batch p50, `pending` / `default`",
    "sink time per micro-batch p95, `pending` / `default`",
    "sink time per micro-batch p50, `buffered` / `default`",
    "sink time per micro-batch p95, `buffered` / `default`",
    "sink time per micro-batch p50, `committed` / `default`",
    "sink time per micro-batch p95, `committed` / `default`",
)


@pytest.mark.spark
def test_every_mode_is_counted_and_its_streams_listed(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "economy"
    done = subprocess.run(
        [sys.executable, "-m", "onceover_tools.bench.stream_economy", "--batches", str(BATCHES),
         "--rows-per-batch", str(ROWS), "--warmup-batches", "0", "--soak-minutes", "0.05",
         "--sample-seconds", "1", "--out", str(out)],
        env=subprocess_env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "FAILED" not in done.stdout
    markdown = (out / MARKDOWN_NAME).read_text()
    assert markdown.strip() in done.stdout  # what is written is what was printed
    for name in TARGETS:
        row = next((line for line in markdown.splitlines() if line.startswith(f"| {name} |")), "")
        assert row.endswith(("| met |", "| **missed** |")), f"{name!r} in:\n{markdown}"

    figures = json.loads((out / JSON_NAME).read_text())["figures"]
    modes = {m["name"]: m for m in figures["modes"]}
    assert list(modes) == list(MODES) == ["pending", "buffered", "committed", "default"]
    assert figures["rounds"] == 1
    assert len(figures["round_loads"]) == 2  # as the first batches began, and the round
    for mode in modes.values():
        assert mode["failed"] is None
        assert [b["batch_id"] for b in mode["batches"]] == list(range(BATCHES))
        assert [b["round"] for b in mode["batches"]] == [0, 1]
        assert mode["streams_per_hour"] is not None
        assert all(b["rows"] == ROWS for b in mode["batches"])
        assert mode["expected_rows"] == BATCHES * ROWS
        assert mode["distinct"] == BATCHES * ROWS  # every key, in every mode
        assert mode["add_batch_p50_ms"] > 0
    for name in ("pending", "buffered", "committed"):  # exactly once: none missing or twice
        assert modes[name]["counted"] == BATCHES * ROWS
        assert modes[name]["exact"] is True
    assert modes["default"]["counted"] >= BATCHES * ROWS  # at least once
    # The floor: the same query into Spark's hand-off, interleaved with the modes.
    floor = figures["floor"]
    assert floor["failed"] is None
    assert floor["sink"] == "onceover-handoff"
    assert [b["round"] for b in floor["batches"]] == [0, 1]
    assert floor["counted"] == BATCHES * ROWS  # every row handed over, nothing written
    assert floor["streams"]["total"] == 0
    for name in MODES:
        overhead = figures["overhead_over_floor_ms"][name]
        assert None not in (overhead["p50"], overhead["p95"], overhead["paired_p50"])
    assert "| **overhead per micro-batch over the floor, p50, ms**" in markdown
    for name in ("pending", "buffered", "committed"):
        ratios = figures["ratios_to_default"][name]
        assert min(ratios["p50"], ratios["p95"], ratios["paired_p50"]) > 0

    # The economy itself: pending takes a stream per partition and batch, buffered and
    # committed their partitions' streams once, default none (`_default` is never created).
    every = PARTITIONS * BATCHES
    assert modes["pending"]["streams"] == {
        "total": every, "first_batch": PARTITIONS, "types": {"PENDING": every},
    }  # fmt: skip
    assert modes["pending"]["streams_per_hour"] > 0
    for name, kind in (("buffered", "BUFFERED"), ("committed", "COMMITTED")):
        assert modes[name]["streams"] == {
            "total": PARTITIONS, "first_batch": PARTITIONS, "types": {kind: PARTITIONS},
        }  # fmt: skip
        assert modes[name]["streams_per_hour"] == 0
    assert modes["default"]["streams"]["total"] == 0

    soak = figures["soak"]
    assert soak["query"]["failed"] is None
    assert soak["query"]["mode"] is None  # the query gave no mode: writeStream's default
    assert soak["query"]["exact"] is True
    assert soak["query"]["streams"]["types"] == {"BUFFERED": PARTITIONS}
    assert len(soak["samples"]) >= 2
    for sample in soak["samples"]:
        assert sample["jvm_rss_mb"] > 0
        assert sample["driver_threads"] > 0
        assert sample["workers"] >= 1
        assert sample["streams"] == PARTITIONS
    assert set(soak["slopes_per_hour"]) >= {"driver_rss_mb", "jvm_rss_mb", "grpc_connections"}


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
