"""``onceover chaos`` end to end: real jobs, real faults, a verdict from BigQuery.

The curated test is the CI's share of the proof (``--curated ci``): the nine schedules
that between them arm every fault kind, on the load job in pending and buffered mode,
with a second driver racing it on its checkpoint, on a user's nightly overwrite
(plain and dynamic) and on a user's streaming CDC (its table the source's final state,
key by key), a ledger on each object store, each fault asked to have fired
(``onceover chaos --curated`` adds the committed load, users' own jobs, the load job
on a standalone cluster and bad rows set aside; ``make chaos`` runs those and 200
random ones). The replay test shows the harness is able to
fail: the at-least-once ``default`` mode under a lost append response duplicates rows,
and the verifier says so, with the seed and the schedule, and exits non-zero."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from onceover_tools.chaos.curated import curated_schedules
from onceover_tools.chaos.overwrite import old_keys
from onceover_tools.chaos.schedule import KINDS, Fault, Schedule

pytestmark = pytest.mark.spark


def _chaos(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onceover_tools", "chaos", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=2_400,
        check=False,
    )


@pytest.mark.timeout(2_400)  # 5-10 minutes on two cores; the default 600 s is too tight
def test_the_curated_schedules_fire_every_fault_kind_without_a_violation(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    schedules = curated_schedules("ci")  # CI's share: every kind (curated.py)
    started = time.monotonic()
    done = _chaos(
        "--curated", "ci", "--report", str(tmp_path), "--parallel", "2", env=subprocess_env
    )
    seconds = time.monotonic() - started
    print(f"{len(schedules)} curated chaos schedules in {seconds:.0f} s")  # the figure CI keeps
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"0 violations in {len(schedules)} schedules" in done.stdout

    report = json.loads((tmp_path / "chaos-report.json").read_text())
    assert report["command"] == "onceover chaos --curated ci"
    assert report["schedules"] == len(schedules)
    assert report["violations"] == 0
    results = report["results"]
    assert [r["schedule"]["name"] for r in results] == [s.name for s in schedules]
    for result in results:
        schedule = Schedule.from_json(result["schedule"])
        bad = len(schedule.bad_keys())  # bad_rows: refused by BigQuery, set aside
        rows = schedule.rows - bad
        if schedule.workload == "overwrite_dynamic":  # the old rows of another day stay
            rows += len(old_keys(dynamic=True)[1])
        assert result["verdict"] == "ok", result
        if schedule.workload == "cdc":  # the source's final state: the keys it leaves
            rows = result["bigquery"]["expected_keys"]
            assert rows > 0
        assert result["bigquery"]["rows"] == result["bigquery"]["distinct_keys"] == rows
        if schedule.workload == "bad_rows":
            assert bad > 0
            assert result["bigquery"]["dead_letter_rows"] == bad, result["bigquery"]
            assert result["bigquery"]["dead_letter_distinct_keys"] == bad
            assert result["bigquery"]["dead_letter_other_rows"] == 0
        if schedule.workload in ("load_files", "racing_drivers", "cluster", "bad_rows"):
            # they report to the control plane (a refused second driver leaves the run
            # to the first: not failed)
            assert result["control_plane"]["status"] == "succeeded"
            assert result["control_plane"]["rows_committed"] == rows
        if result["schedule"]["workload"] == "racing_drivers":
            racers = [run["racer"] for run in result["runs"] if "racer" in run]
            assert racers, result["runs"]  # a second driver did start beside the first
            assert not any(racer["hung"] for racer in racers), racers
        if result["schedule"]["workload"] == "cluster":
            # a new application per driver start, and executors on both workers
            assert len(result["cluster"]["apps"]) == len(result["runs"]), result["cluster"]
            assert result["cluster"]["workers"] == [0, 1], result["cluster"]
        assert result["runs"][-1]["exit_code"] == 0
        # every fault the schedule armed happened, not only the ones chance reached
        assert all(fault["fired"] >= 1 for fault in result["faults"]), result["faults"]
    assert {kind for kind, counts in report["kinds"].items() if counts["fired"]} == set(KINDS)
    assert sum(r["restarts"] for r in results) >= 1  # crashes happened and were survived
    markdown = (tmp_path / "chaos-report.md").read_text()
    assert f"**0 violations** in {len(schedules)} schedules" in markdown
    assert "| `spark/kill_task` |" in markdown


def test_the_at_least_once_baseline_is_caught_and_replayable(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    schedule = Schedule(
        seed=77,
        index=0,
        mode="default",
        rows=600,
        faults=(Fault("failpoint/append.response/drop", nth=2),),
    )
    path = schedule.save(tmp_path / "baseline.json")
    done = _chaos("--replay", str(path), "--report", str(tmp_path / "report"), env=subprocess_env)

    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "VIOLATION in seed77-0000 (seed 77, mode default)" in out
    held = re.search(r"BigQuery holds ([\d,]+) rows, expected 600", out)
    assert held is not None, out
    assert int(held[1].replace(",", "")) > 600  # a re-sent request, duplicated
    assert '"failpoint/append.response/drop"' in out  # the schedule, printed whole
    assert "replay:   onceover chaos --replay" in out
    report = json.loads((tmp_path / "report" / "chaos-report.json").read_text())
    (result,) = report["results"]
    assert result["verdict"] == "violation"
    assert result["faults"][0]["fired"] == 1
    assert result["bigquery"]["rows"] > 600
    assert result["bigquery"]["distinct_keys"] == 600
