"""The stream-economy bench: a streaming query's write streams in each mode, each mode's
time per micro-batch, and a soak of ``writeStream``'s default. Its timings are not
asserted (a benchmark, not a timed test); what is: every mode's query ran and its rows
were counted in BigQuery, exactly for the exactly-once modes; the streams each mode
created; the soak's samples; and the report sets each figure against its target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onceover.bench.control_plane import Figures
from onceover.bench.run import BenchPlan, render
from onceover.bench.stream_economy import (
    JSON_NAME,
    MARKDOWN_NAME,
    MODES,
    PARTITIONS,
    BatchFigure,
    Economy,
    QueryFigure,
    StreamCount,
)
from onceover.bench.writers import CONTENDERS, WriterFigure

BATCHES = 3
ROWS = 100  # per micro-batch: every one of the 8 partitions gets rows
TARGETS = (
    "streams created per hour, `committed` (8 partitions, 1 s trigger)",
    "streams created per hour, `writeStream`'s default, 0.1 min soak",
    "sink time per micro-batch p50, `pending` / `default`",
    "sink time per micro-batch p95, `pending` / `default`",
    "sink time per micro-batch p50, `committed` / `default`",
    "sink time per micro-batch p95, `committed` / `default`",
)


@pytest.mark.spark
def test_every_mode_is_counted_and_its_streams_listed(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "economy"
    done = subprocess.run(
        [sys.executable, "-m", "onceover.bench.stream_economy", "--batches", str(BATCHES),
         "--rows-per-batch", str(ROWS), "--warmup-batches", "0", "--soak-minutes", "0.1",
         "--sample-seconds", "3", "--out", str(out)],
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
    assert list(modes) == list(MODES)
    for mode in modes.values():
        assert mode["failed"] is None
        assert [b["batch_id"] for b in mode["batches"]] == list(range(BATCHES))
        assert all(b["rows"] == ROWS for b in mode["batches"])
        assert mode["expected_rows"] == BATCHES * ROWS
        assert mode["distinct"] == BATCHES * ROWS  # every key, in every mode
        assert mode["add_batch_p50_ms"] > 0
    for name in ("pending", "committed"):  # exactly once: no row missing, none twice
        assert modes[name]["counted"] == BATCHES * ROWS
        assert modes[name]["exact"] is True
    assert modes["default"]["counted"] >= BATCHES * ROWS  # at least once

    # The economy itself: pending takes a stream per partition and batch, committed its
    # partitions' streams once, default none (its `_default` is never created).
    every = PARTITIONS * BATCHES
    assert modes["pending"]["streams"] == {
        "total": every, "first_batch": PARTITIONS, "types": {"PENDING": every},
    }  # fmt: skip
    assert modes["committed"]["streams"] == {
        "total": PARTITIONS, "first_batch": PARTITIONS, "types": {"COMMITTED": PARTITIONS},
    }  # fmt: skip
    assert modes["committed"]["streams_per_hour"] == 0
    assert modes["default"]["streams"]["total"] == 0

    soak = figures["soak"]
    assert soak["query"]["failed"] is None
    assert soak["query"]["mode"] is None  # the query gave no mode: writeStream's default
    assert soak["query"]["exact"] is True
    assert soak["query"]["streams"]["types"] == {"COMMITTED": PARTITIONS}
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
        _query("pending", 1_100.0, 72), _query("committed", 1_500.0, 0),
        _query("default", 1_000.0, 0),
    ])  # fmt: skip
    failed = Economy(batches=10, rows_per_batch=200, modes=[
        _query("pending", 1_100.0, 72), _query("committed", 1_500.0, 0, failed="x"),
        _query("default", 1_000.0, 0),
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
    assert _line(broken, committed).endswith("| FAILED |  | ≤ 16.0 streams/h | FAILED |")
    # pending: 72 streams after the first batch, over 9.1 s (the second batch's start to
    # the last one's end): 28,484 an hour.
    assert _line(markdown, "**streams created per hour, steady state**") == (
        "| **streams created per hour, steady state** | 28,484 | 0 | 0 |"
    )
    assert _line(markdown, "  p50 / `default`") == "|   p50 / `default` | 1.10 | 1.50 | 1.00 |"
    assert document["stream_economy"]["ratios_to_default"]["committed"]["p50"] == 1.5
    assert [t["met"] for t in document["targets"]["stream_economy"]] == [
        True, True, True, False, False,
    ]  # fmt: skip
