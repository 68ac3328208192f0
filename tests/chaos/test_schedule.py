"""Schedules: drawn reproducibly from a seed, every fault kind dealt, replayable from JSON."""

from __future__ import annotations

import collections
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from onceover_jobs.sink import failpoints
from onceover_tools.chaos.proxy import APPEND_ROWS, WireFault
from onceover_tools.chaos.schedule import (
    CDC_KINDS,
    DEFAULT_MODES,
    KINDS,
    MODES,
    OVERWRITE_KINDS,
    STORES,
    WORKLOAD_MODES,
    WORKLOADS,
    Fault,
    Schedule,
    Shape,
    draw_schedules,
    draw_stores,
    kinds_for,
    load_schedule,
    unary_methods,
)


def test_the_same_seed_draws_the_same_schedules_and_another_seed_others() -> None:
    first = list(draw_schedules(1, 30))
    assert first == list(draw_schedules(1, 30))
    assert first != list(draw_schedules(2, 30))
    assert [s.mode for s in first[:4]] == ["pending", "buffered", "committed", "pending"]
    assert [s.name for s in first[:2]] == ["seed1-0000", "seed1-0001"]


def test_two_hundred_schedules_arm_every_fault_kind_thirteen_times_or_more() -> None:
    # 200 schedules of 2-4 faults (about 600) over the 28 kinds, dealt evenly within each
    # mode, a kind once more for each mode drawn that cannot meet it: on seed 1, 13+ of
    # each over the three default modes (a mode's own kinds share a third of the
    # schedules: pending's nine, buffered's five)...
    assert DEFAULT_MODES == ("pending", "buffered", "committed")
    armed = collections.Counter(f.kind for s in draw_schedules(1, 200) for f in s.faults)
    # the load job passes no overwrite, and meets no fault only a CDC job's _default meets
    assert set(armed) == set(KINDS) - OVERWRITE_KINDS - CDC_KINDS
    assert min(armed.values()) >= 13, armed.most_common()[-3:]
    # ... and over pending and committed alone, 18+ as before buffered mode: those draws
    # are the ones a session of those two modes drew then (same seed, same schedules).
    two = draw_schedules(1, 200, modes=("pending", "committed"))
    armed = collections.Counter(f.kind for s in two for f in s.faults)
    assert set(armed) == set(kinds_for("pending"))
    assert min(armed.values()) >= 18, armed.most_common()[-3:]


def test_a_committed_schedule_never_arms_what_committed_streams_never_pass() -> None:
    for schedule in draw_schedules(3, 100, modes=["committed"]):
        for fault in schedule.faults:
            assert fault.kind in kinds_for("committed")
            assert fault.method in (None, "AppendRows", "CreateWriteStream"), fault
    assert "failpoint/commit.after/crash" not in kinds_for("committed")
    assert "failpoint/flush.after/drop" not in kinds_for("committed")


def test_buffered_and_pending_schedules_arm_only_the_points_their_streams_pass() -> None:
    flush = {
        k for k in KINDS if k.startswith(("failpoint/flush.between/", "failpoint/flush.after/"))
    }
    pending_only = {
        k for k in KINDS if k.split("/")[1] in ("finalize.after", "commit.before", "commit.after")
    } | {"wire/uncommitted"}
    assert len(flush) == 5  # flush.between: crash, error; flush.after: crash, error, drop
    assert flush <= set(kinds_for("buffered"))
    assert not pending_only & set(kinds_for("buffered"))
    assert not flush & set(kinds_for("pending"))
    armed: collections.Counter[tuple[str, bool]] = collections.Counter()
    for schedule in draw_schedules(3, 120, workloads=WORKLOADS):
        for fault in schedule.faults:
            assert fault.kind in kinds_for(schedule.mode, schedule.workload), (schedule.name, fault)
            armed[schedule.mode, fault.kind in flush] += 1
            if schedule.mode == "buffered" and schedule.workload != "bad_rows":
                assert fault.kind in kinds_for("buffered")
                assert fault.method in (None, "AppendRows", "CreateWriteStream", "FlushRows")
    assert armed["buffered", True] > 0
    assert armed["pending", True] == armed["committed", True] == 0
    # bad_rows finalizes and batch-commits its dead-letter streams in every mode: it
    # meets finalize.after, commit.after and those calls' wire faults, never commit.before
    for mode in ("buffered", "committed"):
        extra = set(kinds_for(mode, "bad_rows")) - set(kinds_for(mode))
        assert {k.rsplit("/", 1)[0] for k in extra} == {
            "failpoint/finalize.after", "failpoint/commit.after", "wire"
        }, extra  # fmt: skip
        assert extra >= {"wire/uncommitted", "failpoint/commit.after/crash"}
        assert set(unary_methods(mode, "bad_rows")) - set(unary_methods(mode)) == {
            "FinalizeWriteStream", "BatchCommitWriteStreams"
        }  # fmt: skip
    assert kinds_for("pending", "bad_rows") == kinds_for("pending")


def test_nth_is_drawn_within_what_one_clean_run_hits() -> None:
    shape = Shape.of(3_000, 6, 2, 10_000)
    assert (shape.batches, shape.tasks, shape.appends) == (3, 6, 24)
    for mode in ("buffered", "committed"):
        for schedule in draw_schedules(5, 100, modes=[mode], workloads=["load_files"]):
            for fault in schedule.faults:
                if fault.method == "CreateWriteStream":  # a stream per partition, once
                    assert 1 <= fault.nth <= 2, fault
    # Buffered: what a clean load of 3,000 rows made, counted (every failpoint armed
    # past reach, the proxy's calls): 2 streams, 6 flushes, 3 with a second stream.
    buffered = Shape.for_schedule(Schedule(seed=5, index=0, mode="buffered", faults=()))
    assert buffered.hits("failpoint/ledger.after_intent/crash") == 3
    assert buffered.hits("failpoint/flush.between/crash") == 3
    assert buffered.hits("failpoint/flush.after/drop") == 6
    assert buffered.hits("wire/unavailable", "FlushRows") == 6
    assert buffered.hits("wire/unavailable", "CreateWriteStream") == 2
    for schedule in draw_schedules(5, 100):
        for fault in schedule.faults:
            if fault.kind == "backend/outage":
                assert 1 <= fault.at_s <= 12
                assert 2 <= fault.for_s <= 8
            else:
                hits = Shape.for_schedule(schedule).hits(fault.kind, fault.method)
                assert 1 <= fault.nth <= hits <= shape.hits(fault.kind, fault.method), fault


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


def test_cis_share_of_the_curated_set_still_arms_every_kind_on_every_job() -> None:
    from onceover_tools.chaos.curated import CI_LEFT_OUT, curated_schedules

    every = curated_schedules()
    share = curated_schedules("ci")
    assert len(share) == len(every) - len(CI_LEFT_OUT)
    assert [s.name for s in share] == [s.name for s in every if s in share]  # names kept
    assert {f.kind for s in share for f in s.faults} == set(KINDS)
    # the load job in both modes whose points it arms, a second driver racing it, and
    # a user's nightly overwrite, plain and dynamic (the only ones to pass its steps)
    assert {s.workload for s in share} == {
        "load_files",
        "racing_drivers",
        "overwrite",
        "overwrite_dynamic",
        "cdc",
    }
    assert {s.mode for s in share if s.workload == "load_files"} == {"pending", "buffered"}
    assert {s.workload for s in every} == set(WORKLOADS)  # the rest run beyond CI
    assert {(s.workload, s.mode) for s in every} >= CI_LEFT_OUT  # nothing left out by typo
    with pytest.raises(ValueError, match="share"):
        curated_schedules("most")


def test_the_curated_set_arms_every_kind_within_the_hits_a_clean_run_makes() -> None:
    from onceover_tools.chaos.curated import curated_schedules

    schedules = curated_schedules()
    assert {f.kind for s in schedules for f in s.faults} == set(KINDS)
    assert {s.mode for s in schedules} == {"pending", "buffered", "committed", "default"}
    # The load job in each exactly-once mode; the users' jobs in pending and buffered
    # (committed asks the same of the input whoever wrote it: the load job's and the
    # cluster's); the racing driver in buffered only (what it races for, the driver's
    # claim, does not depend on the mode), the cluster in committed only (where a task
    # retried on another worker meets visible rows); draws take the others.
    # Bad rows in buffered and committed mode, where the dead-letter commit is the
    # batch's only BatchCommitWriteStreams (pending mode commits the same way, twice).
    assert {(s.workload, s.mode) for s in schedules} == {
        *(("load_files", m) for m in ("pending", "buffered", "committed")),
        *((w, m) for w in ("foreach_batch", "two_tables") for m in ("pending", "buffered")),
        ("racing_drivers", "buffered"),
        ("cluster", "committed"),
        ("bad_rows", "buffered"),
        ("bad_rows", "committed"),
        ("overwrite", "pending"),
        ("overwrite_dynamic", "pending"),
        ("cdc", "default"),  # its only mode
    }
    assert set(WORKLOADS) == {s.workload for s in schedules}
    assert len({s.name for s in schedules}) == len(schedules)
    for schedule in schedules:
        shape = Shape.for_schedule(schedule)
        for fault in schedule.faults:
            assert fault.kind in kinds_for(schedule.mode, schedule.workload), (schedule.name, fault)
            if fault.kind == "backend/outage":
                continue
            if fault.method is not None:
                takes = unary_methods(schedule.mode, schedule.workload)
                assert fault.method in (APPEND_ROWS, *takes), fault
            hits = (
                shape.appends
                if fault.kind == "spark/kill_task"
                else shape.hits(fault.kind, fault.method)
            )
            # within one clean run's hits, so it fires however the restarts fall
            assert 1 <= fault.nth <= hits, (schedule.name, fault, hits)
    # each mode meets every wire method it calls (bad_rows the dead-letter calls, too)
    for mode in DEFAULT_MODES:  # the exactly-once modes: default calls no unary method
        unary = unary_methods(mode)
        methods = {f.method for s in schedules if s.mode == mode for f in s.faults if f.method}
        assert methods >= {APPEND_ROWS, *unary}, mode
        assert methods <= {APPEND_ROWS, *unary_methods(mode, "bad_rows")}, mode


def test_draws_take_each_workload_in_turn_and_replay_from_json(tmp_path: Path) -> None:
    two = ("pending", "committed")
    expected = [(w, m) for w in WORKLOADS for m in two if m in WORKLOAD_MODES[w]]
    pairs = len(expected)
    drawn = list(draw_schedules(5, pairs + 2, workloads=WORKLOADS, modes=two))
    assert [(s.workload, s.mode) for s in drawn[:pairs]] == expected
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
    # default mode is the load job's baseline and the CDC job's only mode; a workload no
    # one knows is refused
    assert {s.workload for s in draw_schedules(5, 6, workloads=WORKLOADS, modes=("default",))} == {
        "load_files",
        "cdc",
    }
    with pytest.raises(
        ValueError, match="foreach_batch runs in pending, buffered or committed mode"
    ):
        Schedule(seed=1, index=0, mode="default", faults=(), workload="foreach_batch")
    # every workload in each exactly-once mode, in turn
    each = [(w, m) for w in WORKLOADS for m in DEFAULT_MODES if m in WORKLOAD_MODES[w]]
    three = list(draw_schedules(5, len(each), workloads=WORKLOADS))
    assert [(s.workload, s.mode) for s in three] == each
    assert {s.workload for s in three if s.mode == "buffered"} == set(WORKLOADS) - {
        "overwrite",
        "overwrite_dynamic",  # staged in pending mode only
        "cdc",  # default mode only
    }
    with pytest.raises(ValueError, match="overwrite runs in pending mode"):
        Schedule(seed=1, index=0, mode="buffered", faults=(), workload="overwrite")
    with pytest.raises(ValueError, match="two_tables runs in pending, buffered or committed"):
        Schedule(seed=1, index=0, mode="default", faults=(), workload="two_tables")
    with pytest.raises(ValueError, match="cluster runs in pending, buffered or committed mode"):
        Schedule(seed=1, index=0, mode="default", faults=(), workload="cluster")
    with pytest.raises(ValueError, match="workload must be one of"):
        Schedule(seed=1, index=0, mode="pending", faults=(), workload="spark_sql")
    with pytest.raises(ValueError, match="racer_at_s is set for racing_drivers, and only"):
        Schedule(seed=1, index=0, mode="pending", faults=(), workload="racing_drivers")
    with pytest.raises(ValueError, match="racer_at_s is set for racing_drivers, and only"):
        Schedule(seed=1, index=0, mode="pending", faults=(), racer_at_s=3.0)


def test_each_workload_runs_in_the_modes_its_job_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from onceover_jobs import load_files
    from onceover_jobs.examples.daily_tables import parser_for

    def takes(parse: Callable[[list[str]], object]) -> tuple[str, ...]:
        """The --mode choices, as the job's own parser lists them when refusing one."""
        with pytest.raises(SystemExit):
            parse(["--mode", "none"])
        refused = capsys.readouterr().err
        assert "argument --mode: invalid choice" in refused, refused
        return tuple(re.findall(r"[a-z]+", refused.split("choose from", 1)[1]))

    assert takes(load_files.parse_args) == MODES == WORKLOAD_MODES["load_files"]
    for workload in ("racing_drivers", "cluster", "bad_rows"):  # the load job, exactly once
        assert WORKLOAD_MODES[workload] == tuple(m for m in MODES if m != "default")
    for workload in ("foreach_batch", "two_tables"):  # onceover_jobs.examples: one --mode for both
        examples = parser_for(f"onceover_jobs.examples.{workload}").parse_args
        assert takes(examples) == WORKLOAD_MODES[workload], (
            f"{workload}: its job's --mode changed; update WORKLOAD_MODES and the curated set"
        )


def test_the_store_is_a_draw_of_its_own_that_leaves_every_other_draw_as_it_was(
    tmp_path: Path,
) -> None:
    drawn = list(draw_schedules(1, 200, workloads=WORKLOADS))
    stores = collections.Counter(s.store for s in drawn)
    assert set(stores) == set(STORES)
    assert stores["posix"] > stores["s3"] > 0, stores  # posix most often (half)
    assert stores["posix"] > stores["gcs"] > 0, stores
    assert drawn == list(draw_schedules(1, 200, workloads=WORKLOADS))  # the same seed
    assert [s.store for s in drawn] != [s.store for s in draw_schedules(2, 200)]
    # The seed's faults, modes, workloads and racers are the ones it drew before stores:
    # a session on disk alone draws them again, every schedule on posix.
    on_disk = list(draw_schedules(1, 200, workloads=WORKLOADS, stores=["posix"]))
    assert {s.store for s in on_disk} == {"posix"}
    assert on_disk == [replace(s, store="posix") for s in drawn]
    assert [s.store for s in draw_schedules(1, 30)] == list(
        itertools.islice(draw_stores(1), 30)
    )  # the workloads and modes asked for do not move the stores either
    assert {s.store for s in draw_schedules(1, 40, stores=["s3", "gcs"])} == {"s3", "gcs"}
    with pytest.raises(ValueError, match="stores: give some of posix, s3, gcs"):
        next(iter(draw_schedules(1, 1, stores=["hdfs"])))
    # serialised and parsed with the rest; a schedule from before stores is on disk
    in_a_bucket = next(s for s in drawn if s.store == "gcs")
    path = in_a_bucket.save(tmp_path / "schedule.json")
    assert json.loads(path.read_text())["store"] == "gcs"
    assert load_schedule(path) == in_a_bucket
    old = {k: v for k, v in in_a_bucket.to_json().items() if k != "store"}
    path.write_text(json.dumps(old))
    assert load_schedule(path) == replace(in_a_bucket, store="posix")
    with pytest.raises(ValueError, match="store must be one of posix, s3, gcs, not 'hdfs'"):
        Schedule.from_json({**in_a_bucket.to_json(), "store": "hdfs"})


def test_the_curated_set_keeps_a_ledger_on_each_object_store_in_cis_share() -> None:
    from onceover_tools.chaos.curated import IN_A_BUCKET, curated_schedules

    every = curated_schedules()
    assert set(IN_A_BUCKET) <= {s.name for s in every}  # no name left behind by a typo
    assert {s.name: s.store for s in every if s.store != "posix"} == IN_A_BUCKET
    share = curated_schedules("ci")
    assert {s.store for s in share} == set(STORES)
    # on each object store, a driver SIGKILLed (a crash at a driver failpoint kills its
    # JVM) whose restart finds its intents in the bucket
    driver_points = ("ledger.after_intent", "commit.before", "commit.after", "flush.after")
    for store in ("s3", "gcs"):
        crashes = {
            f.kind
            for s in share
            if s.store == store
            for f in s.faults
            if f.kind.endswith("/crash") and f.kind.split("/")[1] in driver_points
        }
        assert crashes, store
