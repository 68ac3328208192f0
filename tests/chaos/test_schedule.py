"""Schedules: drawn reproducibly from a seed, every fault kind dealt, replayable from JSON."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from jobs.sink import failpoints
from onceover.chaos.proxy import APPEND_ROWS, WireFault
from onceover.chaos.schedule import (
    KINDS,
    WORKLOADS,
    Fault,
    Schedule,
    Shape,
    draw_schedules,
    kinds_for,
    load_schedule,
)


def test_the_same_seed_draws_the_same_schedules_and_another_seed_others() -> None:
    first = list(draw_schedules(1, 30))
    assert first == list(draw_schedules(1, 30))
    assert first != list(draw_schedules(2, 30))
    assert [s.mode for s in first[:4]] == ["pending", "committed", "pending", "committed"]
    assert [s.name for s in first[:2]] == ["seed1-0000", "seed1-0001"]


def test_two_hundred_schedules_arm_every_fault_kind_eighteen_times_or_more() -> None:
    # 200 schedules of 2-4 faults over the kinds, dealt evenly: 18+ of each on seed 1.
    armed = collections.Counter(f.kind for s in draw_schedules(1, 200) for f in s.faults)
    assert set(armed) == set(KINDS)
    assert min(armed.values()) >= 18, armed.most_common()[-3:]


def test_a_committed_schedule_never_arms_what_committed_streams_never_pass() -> None:
    for schedule in draw_schedules(3, 100, modes=["committed"]):
        for fault in schedule.faults:
            assert fault.kind in kinds_for("committed")
            assert fault.method in (None, "AppendRows", "CreateWriteStream"), fault
    assert "failpoint/commit.after/crash" not in kinds_for("committed")


def test_nth_is_drawn_within_what_one_clean_run_hits() -> None:
    shape = Shape.of(3_000, 6, 2, 10_000)
    assert (shape.batches, shape.tasks, shape.appends) == (3, 6, 24)
    for schedule in draw_schedules(5, 100, modes=["committed"], workloads=["load_files"]):
        for fault in schedule.faults:
            if fault.method == "CreateWriteStream":  # a stream per partition, once
                assert 1 <= fault.nth <= 2, fault
    for schedule in draw_schedules(5, 100):
        for fault in schedule.faults:
            if fault.kind == "backend/outage":
                assert 1 <= fault.at_s <= 12
                assert 2 <= fault.for_s <= 8
            else:
                assert 1 <= fault.nth <= shape.hits(fault.kind, fault.method), fault


def test_failpoints_become_a_spec_the_sink_accepts_and_wire_faults_a_proxy_plan() -> None:
    schedule = Schedule(
        seed=9,
        index=0,
        mode="pending",
        faults=(
            Fault("failpoint/commit.after/crash", nth=2),
            Fault("failpoint/append.response/drop", nth=5),
            Fault("wire/cut", nth=7, method="AppendRows"),
            Fault("spark/kill_task", nth=3),
            Fault("backend/outage", at_s=2.0, for_s=3.0),
        ),
    )
    spec = schedule.failpoint_spec()
    assert spec == "commit.after=crash@2;append.response=drop@5"
    armed = failpoints.parse(spec)
    assert armed["commit.after"].nth == 2
    assert armed["append.response"].action == "drop"
    assert schedule.wire_faults() == [
        WireFault("cut", "AppendRows", 7),
        WireFault("kill", "AppendRows", 3),
    ]
    assert [f.for_s for f in schedule.outages()] == [3.0]


def test_a_schedule_replays_from_its_json_file(tmp_path: Path) -> None:
    schedule = next(iter(draw_schedules(11, 1)))
    path = schedule.save(tmp_path / "schedule.json")
    assert load_schedule(path) == schedule
    entry = tmp_path / "entry.json"  # one result cut from a report
    entry.write_text(json.dumps({"schedule": schedule.to_json(), "verdict": "ok"}))
    assert load_schedule(entry) == schedule


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "exactly"}, "mode must be one of"),
        ({"faults": [{"kind": "failpoint/nowhere/crash"}]}, "unknown fault kind"),
        ({"faults": [{"kind": "wire/delay", "nth": 1}]}, "names its method"),
        ({"faults": [{"kind": "wire/cut", "nth": 0, "method": "AppendRows"}]}, "counts from 1"),
        (
            {
                "faults": [
                    {"kind": "failpoint/commit.after/crash", "nth": 1},
                    {"kind": "failpoint/commit.after/error", "nth": 2},
                ]
            },
            "armed once per schedule",
        ),
        ({"version": 99}, "version 99"),
    ],
)
def test_a_bad_schedule_is_refused_saying_what_is_wrong(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    data = {**next(iter(draw_schedules(1, 1))).to_json(), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_schedule(path)


def test_the_curated_set_arms_every_kind_within_the_hits_a_clean_run_makes() -> None:
    from onceover.chaos.curated import curated_schedules
    from onceover.chaos.schedule import _UNARY_BY_MODE

    schedules = curated_schedules()
    assert {f.kind for s in schedules for f in s.faults} == set(KINDS)
    assert {s.mode for s in schedules} == {"pending", "committed"}
    # Every workload in both exactly-once modes; the racing driver in pending only (what
    # it races for, the driver's claim, does not depend on the mode), the cluster in
    # committed only (where a task retried on another worker meets visible rows); draws
    # take both.
    one_mode = {("racing_drivers", "pending"), ("cluster", "committed")}
    assert {(s.workload, s.mode) for s in schedules} == {
        (w, m)
        for w in WORKLOADS
        for m in ("pending", "committed")
        if w not in {workload for workload, _ in one_mode}
    } | one_mode
    assert len({s.name for s in schedules}) == len(schedules)
    for schedule in schedules:
        shape = Shape.for_schedule(schedule)
        for fault in schedule.faults:
            assert fault.kind in kinds_for(schedule.mode), (schedule.name, fault)
            if fault.kind == "backend/outage":
                continue
            if fault.method is not None:
                assert fault.method in (APPEND_ROWS, *_UNARY_BY_MODE[schedule.mode]), fault
            hits = (
                shape.appends
                if fault.kind == "spark/kill_task"
                else shape.hits(fault.kind, fault.method)
            )
            # within one clean run's hits, so it fires however the restarts fall
            assert 1 <= fault.nth <= hits, (schedule.name, fault, hits)
    # each mode meets every wire method it calls
    for mode, unary in _UNARY_BY_MODE.items():
        if mode == "default":
            continue
        methods = {f.method for s in schedules if s.mode == mode for f in s.faults if f.method}
        assert methods == {APPEND_ROWS, *unary}, mode


def test_draws_take_each_workload_in_turn_and_replay_from_json(tmp_path: Path) -> None:
    drawn = list(draw_schedules(5, 12, workloads=WORKLOADS, modes=("pending", "committed")))
    assert [(s.workload, s.mode) for s in drawn[:10]] == [
        (w, m) for w in WORKLOADS for m in ("pending", "committed")
    ]
    racers = [s.racer_at_s for s in drawn if s.workload == "racing_drivers"]
    assert racers
    assert all(r is not None and 2.0 <= r <= 20.0 for r in racers), racers
    assert all(s.racer_at_s is None for s in drawn if s.workload != "racing_drivers")
    for schedule in drawn:
        shape = Shape.for_schedule(schedule)
        for fault in schedule.faults:
            if fault.kind.startswith("failpoint/"):
                assert 1 <= fault.nth <= shape.hits(fault.kind), (schedule.name, fault)
        assert load_schedule(schedule.save(tmp_path / f"{schedule.name}.json")) == schedule
    # default mode is the load job's baseline only; a workload no one knows is refused
    assert {s.workload for s in draw_schedules(5, 6, workloads=WORKLOADS, modes=("default",))} == {
        "load_files"
    }
    with pytest.raises(ValueError, match="foreach_batch runs in pending or committed mode"):
        Schedule(seed=1, index=0, mode="default", faults=(), workload="foreach_batch")
    with pytest.raises(ValueError, match="workload must be one of"):
        Schedule(seed=1, index=0, mode="pending", faults=(), workload="spark_sql")
    with pytest.raises(ValueError, match="racer_at_s is set for racing_drivers, and only"):
        Schedule(seed=1, index=0, mode="pending", faults=(), workload="racing_drivers")
    with pytest.raises(ValueError, match="racer_at_s is set for racing_drivers, and only"):
        Schedule(seed=1, index=0, mode="pending", faults=(), racer_at_s=3.0)
