"""``onceover bench`` run as a user runs it, at the smallest sizes: every writer is
timed and counted in BigQuery, the stream economy's modes and soak are counted and their
streams listed, the control plane is measured quiet and in trouble, and the report names
every ratio. The figures themselves are not asserted (a benchmark, not a timed test).

One run carries every phase's assertions: each phase run on its own again cost CI a
Spark application and a control plane more (docs/journal/test-suite.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from onceover_tools.bench.ledger_stores.api import APIS
from onceover_tools.bench.stream_economy import MODES, PARTITIONS
from onceover_tools.bench.writers import CONTENDERS, MONITORING_ROUND

from tests.helpers.processes import run_onceover

pytestmark = pytest.mark.spark

ROWS = 2_000
MICRO_BATCHES = 3  # each mode's first batch in turn, then one round of two each
LEDGER_BATCHES = 3  # the first, then one batch in each window
LEDGER_STORES = ("s3", "gcs")  # each API's counting; the disk's reference row costs a query
LEDGER_MODES = ("pending",)
EVENTS = 3_000
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
    "ingest, BigQuery hanging and /api/health flooded / quiet",
    "streams created per hour, `buffered` (8 partitions, 1 s trigger)",
    "streams created per hour, `committed` (8 partitions, 1 s trigger)",
    "sink time per micro-batch p50, `pending` / `default`",
    "sink time per micro-batch p95, `pending` / `default`",
    "sink time per micro-batch p50, `buffered` / `default`",
    "sink time per micro-batch p95, `buffered` / `default`",
    "sink time per micro-batch p50, `committed` / `default`",
    "sink time per micro-batch p95, `committed` / `default`",
    "ledger requests per micro-batch, last 1 / first 1 batches, `pending` on S3",
    "ledger requests per micro-batch, last 1 / first 1 batches, `pending` on Cloud Storage",
)


def test_the_bench_prints_and_writes_every_ratio(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    done = run_onceover(
        "bench", "--rows", str(ROWS), "--repeat", "1", "--events", str(EVENTS),
        "--micro-batches", str(MICRO_BATCHES), "--soak-minutes", "0.05",
        "--ledger-batches", str(LEDGER_BATCHES), "--ledger-stores", ",".join(LEDGER_STORES),
        "--ledger-modes", ",".join(LEDGER_MODES),
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
    assert database["events_stored"] == EVENTS
    assert database["failed"] is None
    # Each kept write was counted in BigQuery first (the bench says so per write): every
    # writer but the floor once a size, then the monitoring rounds' writes.
    rounds = document["monitoring_rounds"]
    assert (document["repeat"], rounds) == (1, 3)
    verified = [line for line in done.stdout.splitlines() if "(verified in BigQuery)" in line]
    assert len(verified) == 2 * (len(CONTENDERS) - 1 + (rounds - 1) * len(MONITORING_ROUND))
    for figure in document["writers"]:
        assert len(figure["seconds"]) == (rounds if figure["key"] in MONITORING_ROUND else 1)

    _every_phase_of_the_starvation_bench_posted_every_event(document["starvation"], done.stdout)
    _every_mode_of_the_stream_economy_is_counted_and_its_streams_listed(document["stream_economy"])
    _every_ledger_query_is_counted_and_its_requests_priced(document["ledger_stores"], markdown)


def _every_ledger_query_is_counted_and_its_requests_priced(
    ledgers: dict[str, Any], markdown: str
) -> None:
    assert ledgers["failed"] is None
    assert (ledgers["stores"], ledgers["modes"]) == (list(LEDGER_STORES), list(LEDGER_MODES))
    queries = {(q["store"], q["mode"]): q for q in ledgers["queries"]}
    assert set(queries) == {(s, m) for s in LEDGER_STORES for m in LEDGER_MODES}
    rows = ledgers["rows_per_batch"] * LEDGER_BATCHES
    for (store, _), query in queries.items():
        api = APIS[store]
        assert query["failed"] is None
        assert (query["counted"], query["distinct"], query["exact"]) == (rows, rows, True)
        assert [b["batch_id"] for b in query["batches"]] == list(range(LEDGER_BATCHES))
        # Every batch wrote its ledger through the proxy: the count is the server's.
        assert all(sum(b["counts"].values()) > 0 for b in query["batches"])
        assert set(query["per_batch"]["late_by_kind"]) == set(api.kinds)
        assert query["per_batch"]["growth"] > 0
        assert set(query["per_hour_by_tier"]) == set(api.prices.tier_names)
        assert query["dollars_per_hour"] > 0
        assert query["dollars_per_month"] == query["dollars_per_hour"] * 730
        assert all(v["p50_ms"] > 0 for v in query["latency_ms"].values())
        table = markdown.split(f"| {api.name} (", 1)[1].split("\n\n", 1)[0]
        for label in api.kinds.values():
            line = next(li for li in table.splitlines() if li.startswith(f"|   {label}, per"))
            float(line.rstrip(" |").rsplit("| ", 1)[1])  # a number per kind
        assert "| **$ per month** (730 h) | $" in table


def _every_phase_of_the_starvation_bench_posted_every_event(
    starvation: dict[str, Any], printed: str
) -> None:
    assert "a succeeded run's check is waiting on BigQuery" in printed
    assert "/api/health flood:" in printed
    assert "| ratio to quiet | 1.00 |" in printed
    phases = starvation["phases"]
    assert [p["failed"] for p in phases] == [None, None, None]
    assert all(p["ingest_events_per_s"] for p in phases)
    assert phases[2]["health_flood"]["errors"] == 0


def _every_mode_of_the_stream_economy_is_counted_and_its_streams_listed(
    economy: dict[str, Any],
) -> None:
    modes = {m["name"]: m for m in economy["modes"]}
    rows = economy["rows_per_batch"]
    assert list(modes) == list(MODES) == ["pending", "buffered", "committed", "default"]
    assert economy["batches"] == MICRO_BATCHES
    assert economy["rounds"] == 1
    assert len(economy["round_loads"]) == 2  # as the first batches began, and the round
    for mode in modes.values():
        assert mode["failed"] is None
        assert [b["batch_id"] for b in mode["batches"]] == list(range(MICRO_BATCHES))
        assert [b["round"] for b in mode["batches"]] == [0, 1, 1]
        assert mode["streams_per_hour"] is not None
        assert all(b["rows"] == rows for b in mode["batches"])
        assert mode["expected_rows"] == MICRO_BATCHES * rows
        assert mode["distinct"] == MICRO_BATCHES * rows  # every key, in every mode
        assert mode["add_batch_p50_ms"] > 0
    for name in ("pending", "buffered", "committed"):  # exactly once: none missing or twice
        assert modes[name]["counted"] == MICRO_BATCHES * rows
        assert modes[name]["exact"] is True
    assert modes["default"]["counted"] >= MICRO_BATCHES * rows  # at least once
    # The floor: the same query into Spark's hand-off, interleaved with the modes.
    floor = economy["floor"]
    assert floor["failed"] is None
    assert floor["sink"] == "onceover-handoff"
    assert [b["round"] for b in floor["batches"]] == [0, 1, 1]
    assert floor["counted"] == MICRO_BATCHES * rows  # every row handed over, nothing written
    assert floor["streams"]["total"] == 0
    for name in MODES:
        overhead = economy["overhead_over_floor_ms"][name]
        assert None not in (overhead["p50"], overhead["p95"], overhead["paired_p50"])
    for name in ("pending", "buffered", "committed"):
        ratios = economy["ratios_to_default"][name]
        assert min(ratios["p50"], ratios["p95"], ratios["paired_p50"]) > 0

    # The economy itself: pending takes a stream per partition and batch, buffered and
    # committed their partitions' streams once, default none (`_default` is never created).
    every = PARTITIONS * MICRO_BATCHES
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

    soak = economy["soak"]
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
