"""The cluster workload's command: what a driver in a directory of its own, and
executors in the workers' own directories, need to find (onceover_tools/chaos/on_cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from onceover_jobs.sink.failpoints import ENV as FAILPOINTS_ENV
from onceover_jobs.sink.failpoints import STATE_ENV as FAILPOINTS_STATE_ENV
from onceover_tools.chaos.on_cluster import submit_argv
from onceover_tools.chaos.runner import ChaosStack, job_argv
from onceover_tools.chaos.schedule import Schedule
from onceover_tools.spark_cluster import SparkCluster

from onceover.bigquery import BigQueryConfig


def test_the_submit_names_every_path_absolutely_and_ships_the_failpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # A session's report directory given relatively (make chaos's default) once sent
    # the driver, which runs in <schedule>/driver, looking for ".onceover/..." there.
    stack = ChaosStack(BigQueryConfig(), Path(".onceover/chaos/seed1/work"), tokens={})
    assert stack.work_root.is_absolute()
    schedule = Schedule(seed=1, index=8, mode="pending", faults=(), workload="cluster")
    work = stack.work_root / schedule.name
    env = {FAILPOINTS_ENV: "commit.after=crash@2;append.before=error@3",
           FAILPOINTS_STATE_ENV: str(work / "failpoints"), "UNRELATED": "x"}  # fmt: skip

    argv = submit_argv(
        SparkCluster(tmp_path / "cluster"), job_argv(schedule, "p.d.t", work), env, work
    )

    assert argv[argv.index("--master") + 1].startswith("spark://127.0.0.1:")
    assert Path(argv[0]).name == "spark-submit"
    confs = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")
    assert confs[f"spark.executorEnv.{FAILPOINTS_ENV}"] == env[FAILPOINTS_ENV]
    assert confs[f"spark.executorEnv.{FAILPOINTS_STATE_ENV}"] == env[FAILPOINTS_STATE_ENV]
    assert "spark.executorEnv.UNRELATED" not in confs
    shipped = Path(argv[argv.index("--py-files") + 1])
    assert shipped.is_file()
    assert shipped.name.startswith("onceover-py-files-")
    script = Path(argv[argv.index("--py-files") + 2])
    assert script.parts[-2:] == ("onceover_jobs", "load_files.py")
    assert script.is_file()
    for option in ("--source", "--checkpoint"):
        assert Path(argv[argv.index(option) + 1]).is_absolute(), option
