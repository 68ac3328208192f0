"""The report ``onceover bench`` prints: every ratio set against its target, a missed one
shown as missed, a failed figure shown as FAILED. The figures here are made up on
purpose: what is tested is the arithmetic and the verdicts, not the machine (the bench
itself takes the real figures; it has no timed assertions)."""

from __future__ import annotations

from pathlib import Path

from onceover_tools.bench.control_plane import Figures
from onceover_tools.bench.run import BenchPlan, render
from onceover_tools.bench.writers import CONTENDERS, MONITORING_ROUND, WriterFigure, schedule

N = 1_000
HEADER = {"command": "onceover bench", "generated_at": "now", "commit": "abc", "machine": "m"}
SECONDS = {  # at N; at 4N each takes 4 times as long (linear) except the ceiling (2 times)
    "pending": 1.0, "committed": 1.2, "default": 1.05, "pending_monitored": 1.1,
    "pending_slow": 1.02, "pending_down": 1.04, "seed_proto_rows": 4.0, "streaming_inserts": 20.0,
    "arrow_ceiling": 0.4, "spark_floor": 0.3,
}  # fmt: skip


def _plan() -> BenchPlan:
    return BenchPlan(N, 1, 5_000, ("sqlite",), Path("out"), "", quick=True)


def _writers(failed: str | None = None) -> list[WriterFigure]:
    figures = []
    for contender in CONTENDERS:
        for rows, factor in ((N, 1), (4 * N, 2 if contender.key == "arrow_ceiling" else 4)):
            seconds = None if contender.key == failed else SECONDS[contender.key] * factor
            figures.append(WriterFigure(contender.key, rows, rows * 50, [seconds]))
    return figures


def _database() -> Figures:
    return Figures(
        "sqlite", stored=5_000, ingest_seconds=0.2, posted=5_000,
        post_ms=[5.0] * 10, reads_ms={"GET /api/runs": [10.0] * 19 + [150.0] * 1},
    )  # fmt: skip


def _target_line(markdown: str, name: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} |"))


def test_every_ratio_is_set_against_its_target_at_both_sizes() -> None:
    markdown, document = render(_plan(), _writers(), [_database()], HEADER)

    assert _target_line(markdown, "pending / default") == (
        "| pending / default | 1.05x | 1.05x | ≥ 0.90x | met |"
    )
    assert "| 4.00x | 4.00x | ≥ 5.00x | **missed** |" in _target_line(
        markdown, "Onceover / seeds' approach (proto per row)"
    )
    assert "| 20.00x | 20.00x | ≥ 10.00x | met |" in _target_line(
        markdown, "Onceover / streaming inserts"
    )
    # The ceiling got faster per row at 4N: the ratio halves and the promise breaks there.
    assert "| 0.40x | 0.20x | ≥ 0.50x | **missed** |" in _target_line(
        markdown, "Onceover / Arrow ceiling"
    )
    assert "| 3.33x | 3.33x | ≤ 1.10x | **missed** |" in _target_line(
        markdown, "Onceover time / Spark's hand-off time"
    )
    assert "| +10.0% | +10.0% | ≤ 3.0% | **missed** |" in _target_line(
        markdown, "monitoring overhead, backend healthy (job wall time)"
    )
    assert "| +2.0% | +2.0% | ≤ 3.0% | met |" in _target_line(
        markdown, "monitoring overhead, backend slow (job wall time)"
    )
    assert "| +4.0% | +4.0% | ≤ 3.0% | **missed** |" in _target_line(
        markdown, "monitoring overhead, backend down (job wall time)"
    )
    assert "| 25,000 events/s |  | ≥ 20,000 events/s | met |" in _target_line(
        markdown, "ingest, sqlite"
    )
    # 20 reads: the p95 (nearest rank) is the 19th, still 10 ms; one slow read is not p95.
    assert "| 10.0 ms |  | ≤ 100 ms | met |" in _target_line(
        markdown, "read p95 (slowest endpoint), sqlite"
    )
    assert _target_line(markdown, "Onceover `pending`").endswith("| 1.00 |")  # linear
    assert _target_line(markdown, "Arrow ceiling").endswith("| 0.50 |")
    assert _target_line(markdown, "Onceover `pending`, backend slow").startswith(
        "| Onceover `pending`, backend slow | 1.02 |"
    )
    assert _target_line(markdown, "Onceover `pending`, backend down").startswith(
        "| Onceover `pending`, backend down | 1.04 |"
    )
    targets = {t["name"]: t for t in document["targets"][str(N)]}
    assert targets["Onceover / seeds' approach (proto per row)"]["met"] is False
    assert targets["pending / default"]["value"] == 1.05


def test_each_monitoring_overhead_fails_with_its_own_writer_alone() -> None:
    markdown, _ = render(_plan(), _writers(failed="pending_down"), [_database()], HEADER)

    assert _target_line(markdown, "monitoring overhead, backend down (job wall time)").endswith(
        "| FAILED | FAILED | ≤ 3.0% | FAILED |"
    )
    assert _target_line(markdown, "monitoring overhead, backend slow (job wall time)").endswith(
        "| met |"
    )


def test_a_writer_that_failed_is_shown_failed_not_left_out() -> None:
    markdown, document = render(_plan(), _writers(failed="default"), [_database()], HEADER)

    assert _target_line(markdown, "pending / default").endswith(
        "| FAILED | FAILED | ≥ 0.90x | FAILED |"
    )
    assert "| FAILED |" in _target_line(markdown, "Onceover `default`")
    assert document["targets"][str(N)][0]["met"] is None


def test_a_read_not_reached_while_a_short_ingest_ran_is_not_shown_failed() -> None:
    database = _database()
    database.reads_ms["GET /api/alerts"] = [12.0] * 20
    database.reads_under_ingest_ms = {"GET /api/runs": [40.0] * 20}  # alerts never reached

    markdown, _ = render(_plan(), _writers(), [database], HEADER)

    assert _target_line(markdown, "GET /api/runs p95 under ingest, ms").endswith("| 40.0 |")
    assert _target_line(markdown, "GET /api/alerts p95 under ingest, ms").endswith(
        "| not reached |"
    )
    under_ingest = [line for line in markdown.splitlines() if "under ingest" in line]
    assert not [line for line in under_ingest if "FAILED" in line]

    database.failed = "POST /api/events answered 500"
    markdown, _ = render(_plan(), _writers(), [database], HEADER)
    assert _target_line(markdown, "GET /api/alerts p95 under ingest, ms").endswith("| FAILED |")


def test_the_per_row_baselines_run_after_every_other_write_at_every_size() -> None:
    """After minutes of per-row requests every write against the local BigQuery was slower
    for minutes (docs/journal/profiling.md): a monitored write timed in that shadow showed +114%.
    So no Onceover writer, the floor or the ceiling may follow a per-row baseline."""
    per_row = {c.key for c in CONTENDERS if c.per_row}
    assert per_row == {"seed_proto_rows", "streaming_inserts"}
    passes = schedule([N, 4 * N], 3)
    writes = [(p.rows, attempt, c.key) for p in passes for attempt, c in p.writes]
    keys = [key for _, _, key in writes]
    first_per_row = min(i for i, key in enumerate(keys) if key in per_row)
    assert not per_row & set(keys[:first_per_row])
    assert set(keys[first_per_row:]) == per_row
    # Everyone at every size, three times, once each.
    assert sorted(writes) == sorted(
        (rows, attempt, c.key) for rows in (N, 4 * N) for attempt in (1, 2, 3) for c in CONTENDERS
    )
    # Still rotated: every other writer leads some attempt, so none always pays for another.
    others = [p for p in passes if not per_row & {c.key for _, c in p.writes}]
    leaders = {c.key for p in others for attempt, c in p.writes[:: len(CONTENDERS) - 2]}
    assert len(leaders) == 3


def test_monitoring_rounds_follow_the_attempts_of_everyone_and_pair_each_write() -> None:
    passes = schedule([N, 4 * N], 3, CONTENDERS, monitoring_rounds=7)
    per_row = {c.key for c in CONTENDERS if c.per_row}
    for run in passes:
        attempts: dict[int, list[str]] = {}
        for attempt, contender in run.writes:
            attempts.setdefault(attempt, []).append(contender.key)
        if per_row & set(attempts[1]):  # the per-row baselines: three attempts, as before
            assert sorted(attempts) == [1, 2, 3]
            continue
        assert sorted(attempts) == list(range(1, 8))
        assert all(len(keys) == len(CONTENDERS) - 2 for n, keys in attempts.items() if n <= 3)
        # After them, rounds of plain pending and each monitored write, once each, rotated.
        rounds = [attempts[n] for n in range(4, 8)]
        assert all(sorted(keys) == sorted(MONITORING_ROUND) for keys in rounds)
        assert len({keys[0] for keys in rounds}) == 4


def test_the_monitoring_overhead_is_the_median_over_rounds_of_each_write_against_its_own() -> None:
    """A round the machine was slow for is slow for both its writes: set against each
    other, it cancels. Against the plain write's median, the monitored one's median
    here would be +10%, a miss that is the machine's."""
    figures = _writers()
    at = {(f.key, f.rows): f for f in figures}
    for rows in (N, 4 * N):
        at[("pending", rows)].seconds = [1.0, 2.0, 1.0]
        at[("pending_monitored", rows)].seconds = [1.1, 2.0, 0.98]

    markdown, document = render(_plan(), figures, [_database()], HEADER)

    assert "| +0.0% | +0.0% | ≤ 3.0% | met |" in _target_line(
        markdown, "monitoring overhead, backend healthy (job wall time)"
    )
    assert _target_line(markdown, "backend healthy").startswith(
        "| backend healthy | 3 | +0.0% | -2.0% to +10.0% | -2.0% to +10.0% | 3 |"
    )
    targets = {t["name"]: t for t in document["targets"][str(N)]}
    assert targets["monitoring overhead, backend healthy (job wall time)"]["value"] == 0.0
