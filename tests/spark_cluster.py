"""A standalone Spark cluster on this machine: one master and one worker, started from
PySpark's own scripts (``spark-class ...deploy.master.Master`` / ``...worker.Worker``),
as a cluster's are, so a job submitted to ``spark://`` runs its executors in another
JVM that only knows what ``spark-submit`` ships it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pyspark

from onceover.preflight import free_port
from tests.waiting import wait_until

START_S = 120.0


@dataclass
class SparkCluster:
    work: Path
    master_port: int = 0
    master_ui_port: int = 0

    def __post_init__(self) -> None:
        self.master_port = self.master_port or free_port()
        self.master_ui_port = self.master_ui_port or free_port()
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, name: str, *args: str) -> None:
        home = Path(pyspark.__file__).parent
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_WORKER_DIR": str(self.work / "worker"),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        command = [str(home / "bin" / "spark-class"), *args]
        with (self.work / f"{name}.log").open("wb") as log:  # the daemon keeps its own copy
            process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._processes.append(process)

    def state(self) -> dict[str, Any]:
        """The master's own account of itself (its web UI's JSON)."""
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            state: dict[str, Any] = json.load(answer)
        return state

    def _worker_alive(self) -> bool:
        try:
            return any(w.get("state") == "ALIVE" for w in self.state().get("workers", []))
        except OSError:
            return False

    def __enter__(self) -> Self:
        self.work.mkdir(parents=True, exist_ok=True)
        master = "org.apache.spark.deploy.master.Master"
        worker = "org.apache.spark.deploy.worker.Worker"
        self._start("master", master, "--host", "127.0.0.1", "--port", str(self.master_port),
                    "--webui-port", str(self.master_ui_port))  # fmt: skip
        self._start("worker", worker, "--cores", "1", "--memory", "1g",
                    "--webui-port", str(free_port()), self.url)  # fmt: skip

        def daemons_alive() -> None:
            for process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited; see {self.work}/*.log")

        # the JVMs start on their own time
        wait_until("a worker registering with the master", lambda: self._worker_alive() or None,
                   START_S, every_s=0.5, between=daemons_alive,
                   seen=lambda: f"logs in {self.work}")  # fmt: skip
        return self

    def __exit__(self, *_exc: object) -> None:
        for process in reversed(self._processes):
            process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
