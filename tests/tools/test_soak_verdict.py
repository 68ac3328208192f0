"""The soak's judgements on made-up samples: Beam's shapes, flatness (the last quarter
against the second), the streams' budget by mode."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from onceover_tools.soak.job import JobRun
from onceover_tools.soak.rejudge import RejudgeError, rejudge
from onceover_tools.soak.report import SoakReport, write_report
from onceover_tools.soak.sampler import Sample
from onceover_tools.soak.shapes import BEAM_SHAPES, shape_of
from onceover_tools.soak.verdict import Verdict, judge_flatness, judge_streams

BASE = Sample(
    seconds=0.0, rows_appended=0, rows_committed=0, batches_committed=0,
    driver_rss_mb=100.0, driver_threads=10, jvm_rss_mb=800.0, jvm_threads=290, workers=4,
    workers_pss_mb=900.0, workers_threads=35, grpc_connections=3, append_calls_open=1,
    streams_created=2, ledger_files=100, ledger_bytes=50_000, spool_files=0,
    control_plane_lag_s=0.1, bigquery_rss_mb=2_000.0, bigquery_disk_mb=0.0, load=2.0,
)  # fmt: skip
MINUTES_30 = 1_800.0


def _samples(every_s: float = 5.0, **growth: float) -> list[Sample]:
    """A 30-minute soak's samples; each named figure grows by its rate per second."""
    samples = []
    t = 0.0
    while t <= MINUTES_30:
        changes = {name: getattr(BASE, name) + rate * t for name, rate in growth.items()}
        samples.append(replace(BASE, seconds=t, batches_committed=int(t), **changes))
        t += every_s
    return samples


def test_beams_large_shape_is_its_eighteen_million_rows_of_a_thousand_bytes() -> None:
    large = BEAM_SHAPES["large"]
    assert (large.rows, large.row_bytes, large.rows_per_second) == (18_000_000, 1_000, 10_000)
    assert shape_of("large") is large
    custom = shape_of("large", minutes=1)
    assert (custom.name, custom.rows) == ("custom (from large)", 600_000)
    with pytest.raises(ValueError, match="known: local, small, medium, large"):
        shape_of("huge")


def test_flat_figures_pass_and_a_growing_one_is_named() -> None:
    flat = Verdict(source_rows=0)
    judge_flatness(flat, _samples(), MINUTES_30)
    assert flat.problems == []
    assert all(f.flat for f in flat.flatness)

    leaking = Verdict(source_rows=0)
    judge_flatness(leaking, _samples(jvm_rss_mb=0.2, grpc_connections=0.002), MINUTES_30)
    named = {f.figure for f in leaking.flatness if f.flat is False}
    assert named == {"jvm_rss_mb", "grpc_connections"}  # 800 -> ~1,100 MB; 3 -> ~6
    assert any("jvm_rss_mb is not flat" in p for p in leaking.problems)


def test_a_count_may_move_by_one_and_samples_while_the_driver_is_down_are_left_out() -> None:
    samples = _samples()
    moved = [replace(s, grpc_connections=4) if s.seconds > 1_400 else s for s in samples]
    down = [replace(s, jvm_threads=0, jvm_rss_mb=0.0) if 1_500 < s.seconds < 1_600 else s
            for s in moved]  # fmt: skip
    verdict = Verdict(source_rows=0)
    judge_flatness(verdict, down, MINUTES_30)
    assert verdict.problems == []


def test_a_short_soak_is_not_judged_flat() -> None:
    verdict = Verdict(source_rows=0)
    judge_flatness(verdict, [s for s in _samples(jvm_rss_mb=1.0) if s.seconds <= 120], 120)
    assert verdict.problems == []
    assert {f.flat for f in verdict.flatness} == {None}


@pytest.mark.parametrize(
    ("mode", "new_streams", "faults", "ok"),
    [
        ("buffered", 0, 0, True),  # kept from batch to batch: none after warm-up
        ("buffered", 4, 2, True),  # two faults, two partitions: four new
        ("committed", 5, 2, False),  # one more than the faults can explain
        ("pending", 2 * 1_350, 0, True),  # a stream per partition per micro-batch
        ("pending", 2 * 1_350 + 1, 0, False),
        ("default", 1, 0, False),  # _default is never created
    ],
)
def test_the_streams_budget_is_one_per_partition_per_stream_lifetime(
    mode: str, new_streams: int, faults: int, ok: bool
) -> None:
    """Warm-up ends at 450 s; 1,350 micro-batches (one a second) follow it."""
    samples = [
        replace(s, streams_created=2 + round(new_streams * max(0.0, s.seconds - 450) / 1_350))
        for s in _samples()
    ]
    verdict = Verdict(source_rows=0)
    judge_streams(verdict, samples, 450.0, MINUTES_30, mode, 2, faults)
    assert verdict.ok is ok, verdict.problems


def test_a_driver_restarted_late_is_not_read_as_growth_but_growth_across_drivers_is() -> None:
    """Flatness compares drivers past their warm-up: a fresh one in the last quarter (its
    workers' PSS higher while young) is left out, a warm one that holds more is caught."""
    restart_s = 1_500.0  # five minutes before the end, as a driver kill every 300 s lands
    young = [
        replace(s, workers_pss_mb=1_100.0) if restart_s <= s.seconds < restart_s + 300 else s
        for s in _samples()
    ]
    verdict = Verdict(source_rows=0)
    judge_flatness(verdict, young, MINUTES_30, starts=[0.0, restart_s])
    assert verdict.problems == []
    pss = next(f for f in verdict.flatness if f.figure == "workers_pss_mb")
    assert (pss.second_quarter, pss.last_quarter, pss.flat) == (900.0, 900.0, True)
    assert (pss.last_quarter_all or 0) > 990  # shown, not judged

    # The same restart ten minutes before the end: its driver is warm in the last quarter.
    earlier_s = 1_200.0
    grown = [replace(s, jvm_rss_mb=1_000.0) if s.seconds >= earlier_s else s for s in _samples()]
    verdict = Verdict(source_rows=0)
    judge_flatness(verdict, grown, MINUTES_30, starts=[0.0, earlier_s])
    assert [f.figure for f in verdict.flatness if f.flat is False] == ["jvm_rss_mb"]
    assert "past their first 5 minutes" in verdict.problems[0]


def test_a_kept_report_is_judged_again_from_its_samples(tmp_path: Path) -> None:
    young = [replace(s, workers_pss_mb=1_100.0) if s.seconds >= 1_500 else s for s in _samples()]
    report = SoakReport(
        command="onceover soak", shape=BEAM_SHAPES["large"], mode="buffered", mode_option=None,
        crash_every_s=300.0, partitions=2, started_at="2026-12-06T00:00:00+00:00",
        seconds=MINUTES_30, runs=[JobRun(1, 0.0, 1_500.0, -9, "killed"), JobRun(2, 1_500.0)],
        samples=young,
        verdict=Verdict(source_rows=10, rows=10, distinct_keys=10, problems=[
            "workers_pss_mb is not flat: median 900 in the second quarter, 1100 in the last"
        ]),
    )  # fmt: skip
    write_report(report, tmp_path)
    judged = rejudge(tmp_path)
    assert judged.verdict is not None
    assert judged.verdict.ok
    assert judged.first_commit_s == 0.0  # from the first sample with a commit
    again = json.loads((tmp_path / "soak-report.json").read_text())
    assert again["ok"] is True
    assert again["verdict"]["rows"] == 10  # what BigQuery held, as counted
    assert len(again["samples"]) == len(young)
    assert "past their first 5 minutes (judged)" in (tmp_path / "soak-report.md").read_text()

    (tmp_path / "soak-report.json").write_text("{}")
    with pytest.raises(RejudgeError, match="is not a soak report"):
        rejudge(tmp_path)
