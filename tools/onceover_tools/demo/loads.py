"""The demo's four loads: what each one does to its table, and running its job.

Each is ``python -m onceover_jobs.load_files`` as a user runs it (pending mode, two files per
micro-batch, events to the control plane), on the same generated files, into a table
of its own so each run's page tells one story. They run side by side: a load spends
most of its minute waiting on Spark's start and its triggers, not on the CPU.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from onceover_jobs.sink.failpoints import ENV as FAILPOINTS_ENV
from onceover_jobs.sink.failpoints import SEED_ENV as FAILPOINTS_SEED_ENV
from onceover_jobs.sink.failpoints import STATE_ENV as FAILPOINTS_STATE_ENV

from onceover.bigquery import BigQueryConfig
from onceover.checkpoint_layout import run_id_path
from onceover.errors import OnceoverError
from onceover.processes import ChildProcess, job_environment, with_quick_jvm
from onceover_tools.chaos.proxy import APPEND_ROWS, FaultProxy, WireFault
from onceover_tools.demo.waiting import poll

DATASET = "onceover_demo"
FILES = 4
FILES_PER_BATCH = 2
KEY = "event_id"
JOB_TIMEOUT_S = 240.0

MIN_ROWS = 2_000
"""Enough for the faulty load's 10,000-byte requests to come to 4 or more per file: 16
or more messages, so every fault below fires whatever --rows is."""

# Counted over every AppendRows message the faulty load sends, re-sends included. The
# dropped response comes first: a refusal (unavailable) on the same call before its
# answer came back would end the call and the drop would never happen. A call holds at
# most 4 requests unanswered, so by message 10 the answer to message 2 has gone by.
FAULTS = (
    WireFault("drop_response", APPEND_ROWS, 2),  # applied, answer lost: the retry is ALREADY_EXISTS
    WireFault("gap", APPEND_ROWS, 6),  # an offset past the end: OUT_OF_RANGE, then a rewind
    WireFault("unavailable", APPEND_ROWS, 10),  # a burst: each reconnect refused again
    WireFault("unavailable", APPEND_ROWS, 11),
    WireFault("unavailable", APPEND_ROWS, 12),
    WireFault("unavailable", APPEND_ROWS, 13),
)
SMALL_REQUESTS = 10_000
"""The faulty load's request cap (the sink's smallest): more requests, more to see."""


@dataclass(frozen=True)
class Load:
    name: str
    """The table is ``orders_<name>``; the job ``orders-<name>``."""
    wire_faults: tuple[WireFault, ...] = ()
    failpoints: str = ""
    request_max_bytes: int | None = None
    files_per_batch: int = FILES_PER_BATCH

    def table(self, project: str) -> str:
        return f"{project}.{DATASET}.orders_{self.name}"


CLEAN = Load("clean")
# One file, so one task, at a time: the proxy numbers messages across every call, and two
# tasks' messages interleaved could put the gap on the call the dropped response ends,
# whose OUT_OF_RANGE answer would then never reach the sink (seen under load).
UNDER_FAULTS = Load(
    "faults", wire_faults=FAULTS, request_max_bytes=SMALL_REQUESTS, files_per_batch=1
)
CRASHED = Load("crashed", failpoints="commit.after=crash@1")
TAMPERED = Load("tampered")
LOADS = (CLEAN, UNDER_FAULTS, CRASHED, TAMPERED)


@dataclass
class LoadJob:
    """One load's job process (and its fault proxy), started in ``workdir/<name>``."""

    load: Load
    source: Path
    workdir: Path
    bigquery: BigQueryConfig
    monitor: dict[str, str]
    proxy: FaultProxy | None = None
    child: ChildProcess | None = None
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.work = (self.workdir / self.load.name).resolve()

    @property
    def table(self) -> str:
        assert self.bigquery.project is not None
        return self.load.table(self.bigquery.project)

    @property
    def log_path(self) -> Path:
        return self.work / "job.log"

    def start(self) -> None:
        config = self.bigquery
        if self.load.wire_faults:
            assert config.grpc_endpoint is not None
            self.proxy = FaultProxy(config.grpc_endpoint, self.load.wire_faults).start()
            config = BigQueryConfig(config.rest_endpoint, self.proxy.endpoint, config.project)
        argv = [
            sys.executable, "-m", "onceover_jobs.load_files",
            "--source", str(self.source.resolve()), "--format", "json",
            "--table", self.table, "--key", KEY, "--create-table", "--stamp",
            "--checkpoint", str(self.work / "checkpoint"), "--job", f"orders-{self.load.name}",
            "--max-files-per-trigger", str(self.load.files_per_batch),
        ]  # fmt: skip
        if self.load.request_max_bytes is not None:
            argv += ["--request-max-bytes", str(self.load.request_max_bytes)]
        self.child = ChildProcess(
            f"the {self.load.name} load",
            argv,
            env=self._environment(config),
            log_path=self.log_path,
        )
        self.child.start()

    def _environment(self, config: BigQueryConfig) -> dict[str, str]:
        env = job_environment(config)
        for name in (FAILPOINTS_ENV, FAILPOINTS_STATE_ENV, FAILPOINTS_SEED_ENV):
            env.pop(name, None)  # only this load's own faults, never one from the shell
        if self.load.failpoints:
            env[FAILPOINTS_ENV] = self.load.failpoints
            env[FAILPOINTS_STATE_ENV] = str(self.work / "failpoints")
        env["ONCEOVER_SPOOL_DIR"] = str(self.work / "spool")
        env["ONCEOVER_LOG_FORMAT"] = "text"
        return with_quick_jvm({**env, **self.monitor})  # a demo load lives under a minute

    def wait(self, stop: threading.Event) -> int:
        """Its exit status, once it has exited (the proxy stops with it)."""
        assert self.child is not None
        child = self.child
        try:
            return poll(f"the {self.load.name} load finishing", child.poll, JOB_TIMEOUT_S, stop)
        finally:
            self.stop()

    def run_id(self) -> str:
        """The run id the job keeps in its checkpoint (written before Spark starts)."""
        path = run_id_path(self.work / "checkpoint")
        if not path.exists():
            raise OnceoverError(
                f"the {self.load.name} load recorded no run id; see {self.log_path}"
            )
        return path.read_text().strip()

    def fired(self) -> list[str]:
        """What the fault proxy did, one line per fault."""
        if self.proxy is None:
            return []
        return [f"{f.fault.action} #{f.fault.nth}" for f in self.proxy.fired]

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
        if self.proxy is not None:
            self.proxy.stop()
