"""``onceover bench`` run as a user runs it, at the smallest sizes: every writer is
timed and counted in BigQuery, the control plane is measured, and the report names
every ratio. The figures themselves are not asserted (a benchmark, not a timed test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from onceover_tools.bench.writers import CONTENDERS

from tests.processes import run_onceover

pytestmark = pytest.mark.spark

ROWS = 2_000
TARGETS = (
    "pending / default",
    "Onceover / seeds' approach (proto per row)",
    "Onceover / streaming inserts",
    "Onceover / Arrow ceiling",
    "Onceover time / Spark's hand-off time",
    "monitoring overhead, backend healthy (job wall time)",
    "monitoring overhead, backend slow (job wall time)",
    "monitoring overhead, backend down (job wall time)",
    "ingest, sqlite",
    "read p95 (slowest endpoint), sqlite",
)


def test_the_bench_prints_and_writes_every_ratio(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    done = run_onceover(
        "bench", "--rows", str(ROWS), "--repeat", "1", "--events", "3000", "--micro-batches", "3",
        "--databases", "sqlite", "--out", str(out),
        env=subprocess_env, timeout_s=900,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "FAILED" not in done.stdout
    markdown = (out / "BENCHMARKS.md").read_text()
    assert markdown in done.stdout  # what is written is what was printed
    targets = [line for line in markdown.splitlines() if line.startswith("| ")]
    for name in TARGETS:
        row = next((line for line in targets if line.startswith(f"| {name} |")), None)
        assert row is not None, f"no row for {name!r} in:\n{markdown}"
        assert row.rstrip(" |").endswith(("met", "**missed**")), row
    for contender in CONTENDERS:
        assert f"| {contender.label} |" in markdown

    document = json.loads((out / "benchmarks.json").read_text())
    assert document["rows"] == [ROWS, 4 * ROWS]
    writers = {(w["key"], w["rows"]) for w in document["writers"] if w["median_s"]}
    assert writers == {(c.key, rows) for c in CONTENDERS for rows in (ROWS, 4 * ROWS)}
    (database,) = document["control_plane"]
    assert database["events_stored"] == 3_000
    assert database["failed"] is None
    # Each kept write was counted in BigQuery first (the bench says so per write).
    verified = [line for line in done.stdout.splitlines() if "(verified in BigQuery)" in line]
    assert len(verified) == 2 * (len(CONTENDERS) - 1)
