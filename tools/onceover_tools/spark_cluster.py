"""A standalone Spark cluster on this machine: a master and its workers, started from
PySpark's own scripts (``spark-class ...deploy.master.Master`` / ``...worker.Worker``)
as a cluster's are, so a job submitted to ``spark://`` runs its executors in other JVMs
that know only what ``spark-submit`` ships them.

Each worker has a working directory of its own (``worker-<n>/``, its executors' under
``worker-<n>/work/<app id>/<executor id>``), as two machines would: a path that means
something only in the driver's working directory means nothing to an executor, and
an executor's relative path lands somewhere the other worker never sees. What must be
shared (a ledger, a checkpoint) is shared only when it is named absolutely.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceover.errors import OnceoverError
from onceover.preflight import free_port
from onceover.processes import ChildProcess, StartStop, with_quick_jvm
from onceover.waiting import poll_until

START_S = 120.0
"""How long the master and workers may take to start and register (JVMs, on 2 cores)."""
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def pyspark_home() -> Path:
    """The Spark distribution PySpark ships (its ``bin/`` and jars)."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_submit() -> Path:
    """PySpark's own ``spark-submit``: the same Spark as the cluster it starts."""
    return pyspark_home() / "bin" / "spark-submit"


@dataclass
class SparkCluster(StartStop):
    """``with SparkCluster(work, workers=2) as cluster:`` submit to ``cluster.url``."""

    work: Path
    workers: int = 1
    cores: int = 1
    """Cores each worker offers (the machine's are shared; these are slots)."""
    memory: str = "1g"
    """Memory each worker offers its executors."""
    master_port: int = 0
    master_ui_port: int = 0
    _processes: list[ChildProcess] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.work = self.work.resolve()
        self.master_port = self.master_port or free_port()
        self.master_ui_port = self.master_ui_port or free_port()

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def worker_dir(self, number: int) -> Path:
        """Worker ``number``'s working directory (from 0)."""
        return self.work / f"worker-{number}"

    def state(self) -> dict[str, Any]:
        """The master's own account of itself (its web UI's JSON): workers and apps."""
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            state: dict[str, Any] = json.load(answer)
        return state

    def apps_named(self, name: str) -> list[dict[str, Any]]:
        """Applications called ``name`` the master runs or ran, oldest first."""
        state = self.state()
        apps = [*state.get("completedapps", []), *state.get("activeapps", [])]
        return sorted((a for a in apps if a.get("name") == name), key=lambda a: a["starttime"])

    def workers_that_ran(self, app_id: str) -> list[int]:
        """The workers (by number) that started an executor of ``app_id``: each keeps
        one folder per application in its own working directory."""
        return [n for n in range(self.workers) if (self.worker_dir(n) / "work" / app_id).is_dir()]

    def _start(self, name: str, cwd: Path, *args: str) -> None:
        home = pyspark_home()
        cwd.mkdir(parents=True, exist_ok=True)
        env = with_quick_jvm({
            **os.environ,
            "SPARK_HOME": str(home),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_WORKER_DIR": str(cwd / "work"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(cwd / "logs"),
        })  # fmt: skip
        daemon = ChildProcess(
            name, [str(home / "bin" / "spark-class"), *args],
            env=env, log_path=self.work / f"{name}.log", cwd=str(cwd),
        )  # fmt: skip
        self._processes.append(daemon)
        daemon.start()

    def _registered(self) -> bool | None:
        try:
            alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
        except (OSError, ValueError):
            # Not up, or up but not set up: between binding its port and attaching the
            # JSON page the master's UI answered /json/ with an HTML page (seen in CI).
            return None
        return True if len(alive) == self.workers else None

    def _daemons_alive(self) -> None:
        for daemon in self._processes:
            if daemon.poll() is not None:
                raise OnceoverError(f"Spark's {daemon.name} exited; see {self.work}/*.log")

    def start(self) -> SparkCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start("master", self.work / "master", MASTER, "--host", "127.0.0.1",
                    "--port", str(self.master_port),
                    "--webui-port", str(self.master_ui_port))  # fmt: skip
        for number in range(self.workers):
            self._start(f"worker-{number}", self.worker_dir(number), WORKER,
                        "--cores", str(self.cores), "--memory", self.memory,
                        "--webui-port", str(free_port()), self.url)  # fmt: skip

        def timed_out() -> OnceoverError:
            self.stop()
            return OnceoverError(
                f"{self.workers} Spark worker(s) did not register with the master within "
                f"{START_S:.0f} s; see {self.work}/*.log"
            )

        try:
            # the JVMs start on their own time
            poll_until(self._registered, START_S, timed_out=timed_out, every_s=0.5,
                       between=self._daemons_alive)  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for daemon in reversed(self._processes):
            daemon.stop(grace_s=30)
        self._processes.clear()
