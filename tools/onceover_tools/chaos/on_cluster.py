"""The ``cluster`` workload: the load job submitted to a standalone Spark cluster.

``spark-submit`` runs the driver here (client mode, in a working directory of its
own) and the executors in two workers' JVMs, each worker in its own working
directory (:mod:`onceover_tools.spark_cluster`). What that changes for the sink, and
what the workload is there to prove:

- a failed task is retried by Spark, up to ``spark.task.maxFailures`` (4) times, in the
  same run and maybe on the other worker, where on a local master it fails the job:
  the retry must find the first attempt's ledger records (shared, named absolutely)
  and, in committed mode, rows that match them;
- the executors import the project from the ``--py-files`` zip, and know only the
  environment the submit gives them (``spark.executorEnv.*``; with the ledger in a
  bucket, the variables that reach it);
- each restart of the driver is a new application, with new executors.

One cluster serves a session: every lane's applications share its workers, which
offer more cores than an application takes, so a lane never waits for another's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from onceover_jobs.outbox import SPOOL_DIR_ENV
from onceover_jobs.sink.failpoints import ENV as FAILPOINTS_ENV
from onceover_jobs.sink.failpoints import SEED_ENV as FAILPOINTS_SEED_ENV
from onceover_jobs.sink.failpoints import STATE_ENV as FAILPOINTS_STATE_ENV

from onceover.packaging import build_py_files, package_dir
from onceover.processes import QUICK_JVM
from onceover_tools.spark_cluster import SparkCluster, spark_submit

WORKERS = 2
CORES_PER_WORKER = 4
"""Slots, not the machine's cores: two lanes' applications (2 each) with room for a
killed driver's executors the master has not yet let go of."""
APP_CORES = 2
"""One executor of one core on each worker (the master spreads an app's executors)."""
EXECUTOR_MEMORY = "512m"
EXECUTOR_ENV = (FAILPOINTS_ENV, FAILPOINTS_STATE_ENV, FAILPOINTS_SEED_ENV, SPOOL_DIR_ENV)
"""What the executors must see of the driver's environment: the armed failpoints and
where their hits are counted across processes, and where events are spooled."""


def start_cluster(work: Path) -> SparkCluster:
    """The session's cluster: a master and two workers, each in its own directory."""
    cluster = SparkCluster(work, workers=WORKERS, cores=CORES_PER_WORKER, memory="2g")
    return cluster.start()


def submit_argv(
    cluster: SparkCluster,
    module_argv: Sequence[str],
    env: Mapping[str, str],
    work: Path,
    *,
    executor_env: Iterable[str] = (),
) -> list[str]:
    """``module_argv`` (``python -m MODULE ARGS``) as a client-mode ``spark-submit`` to
    ``cluster``, shipping the project's code and the executors' share of ``env``
    (:data:`EXECUTOR_ENV`, and ``executor_env``: what reaches a ledger in a bucket)."""
    _python, dash_m, module, *args = module_argv
    assert dash_m == "-m", module_argv
    module_file = package_dir(module.split(".")[0]).joinpath(*module.split(".")[1:])
    confs = {
        "spark.driver.host": "127.0.0.1",
        "spark.cores.max": str(APP_CORES),
        "spark.executor.cores": "1",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.extraJavaOptions": QUICK_JVM,  # short-lived, as the driver's
        **{
            f"spark.executorEnv.{name}": env[name]
            for name in (*EXECUTOR_ENV, *executor_env)
            if name in env
        },
    }
    submit = [str(spark_submit()), "--master", cluster.url, "--deploy-mode", "client"]
    for name, value in confs.items():
        submit += ["--conf", f"{name}={value}"]
    py_files = build_py_files(work.parent / "py-files")  # one zip for the session's code
    return [*submit, "--py-files", str(py_files), f"{module_file}.py", *args]


def cluster_outcome(cluster: SparkCluster, app_name: str) -> tuple[dict[str, Any], list[str]]:
    """What the cluster ran of one schedule (its applications, the workers their
    executors ran on), and the problems: a schedule that never reached the cluster, or
    left a worker out, did not test what this workload is for."""
    apps = cluster.apps_named(app_name)
    workers = sorted({n for app in apps for n in cluster.workers_that_ran(app["id"])})
    outcome = {"apps": [app["id"] for app in apps], "workers": workers}
    problems = []
    if not apps:
        problems.append(f"no application named {app_name} ran on the cluster")
    elif len(workers) < cluster.workers:
        problems.append(
            f"executors of {app_name} ran on worker(s) {workers} only, of {cluster.workers}"
        )
    return outcome, problems


def driver_dir(work: Path) -> Path:
    """The driver's working directory: neither the session's nor a worker's."""
    path = work / "driver"
    path.mkdir(parents=True, exist_ok=True)
    return path
