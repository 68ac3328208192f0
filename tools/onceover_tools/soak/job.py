"""The soak's query: ``onceover_jobs.examples.rate_stream`` in a process group of its own,
started, SIGKILLed (the driver and everything under it, as a preempted or OOM-killed
driver goes), restarted on the same checkpoint, stopped, then drained."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from onceover.checkpoint_layout import ledger_root
from onceover.processes import ChildProcess
from onceover_tools.soak.shapes import Shape

STOP_TIMEOUT_S = 120.0
"""A query told to stop that is still running after this is killed."""


@dataclass
class JobRun:
    number: int
    started_s: float
    """Seconds into the soak."""
    ended_s: float | None = None
    exit_code: int | None = None
    ended_by: str = ""
    """``killed`` (by the soak), ``failed`` (by itself), ``stopped``, ``drained``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class SoakJob:
    """One query's runs on one checkpoint."""

    def __init__(
        self,
        *,
        shape: Shape,
        mode: str | None,
        table: str,
        work: Path,
        env: dict[str, str],
        partitions: int,
        request_max_bytes: int | None,
        sink_options: dict[str, str] | None = None,
        origin: float,
    ) -> None:
        self.shape, self.mode, self.table, self.work = shape, mode, table, work
        self.sink_options = dict(sink_options or {})
        """More sink options, as they are (real BigQuery's connection options)."""
        self.env, self.partitions, self.request_max_bytes = env, partitions, request_max_bytes
        self.origin = origin
        self.checkpoint = work / "checkpoint"
        self.stop_file = work / "stop"
        self.runs: list[JobRun] = []
        self._child: ChildProcess | None = None

    @property
    def ledger(self) -> Path:
        return Path(ledger_root(self.checkpoint))

    def argv(self, *, drain: bool = False) -> list[str]:
        argv = [
            sys.executable, "-m", "onceover_jobs.examples.rate_stream",
            "--table", self.table,
            "--checkpoint", str(self.checkpoint),
            "--rows-per-second", str(self.shape.rows_per_second),
            "--fields", str(self.shape.fields),
            "--bytes-per-field", str(self.shape.bytes_per_field),
            "--partitions", str(self.partitions),
        ]  # fmt: skip
        if self.mode is not None:
            argv += ["--mode", self.mode]
        if self.request_max_bytes is not None:
            argv += ["--request-max-bytes", str(self.request_max_bytes)]
        if self.sink_options:  # in a file: a secret on a command line is anyone's to read
            path = self.work / "sink-options.json"
            path.touch(mode=0o600)
            path.write_text(json.dumps(self.sink_options))
            argv += ["--options-file", str(path)]
        return argv + (["--drain"] if drain else ["--stop-file", str(self.stop_file)])

    def _seconds(self) -> float:
        return round(time.monotonic() - self.origin, 1)

    def start(self, *, drain: bool = False) -> JobRun:
        number = len(self.runs) + 1
        name = f"run {number}" + (" (drain)" if drain else "")
        self._child = ChildProcess(
            name, self.argv(drain=drain), env=self.env, log_path=self.work / f"run-{number}.log"
        )
        self._child.start()
        run = JobRun(number, self._seconds())
        self.runs.append(run)
        return run

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    def ended(self) -> bool:
        """Whether the last run has ended (killed, or by itself: then recorded)."""
        if self._child is None:
            return bool(self.runs)
        code = self._child.poll()
        if code is not None:
            self._ended(code, "failed" if code != 0 else "stopped")
        return code is not None

    def _ended(self, code: int | None, how: str) -> None:
        run = self.runs[-1]
        run.ended_s, run.exit_code, run.ended_by = self._seconds(), code, how
        if self._child is not None:
            self._child.stop(grace_s=0)  # closes the log
        self._child = None

    def kill(self) -> str:
        """SIGKILL the driver's whole process group: the Python driver, its JVM, the JVM's
        Python workers, at once."""
        child = self._child
        if child is None or child.poll() is not None:
            return "the driver had already exited"
        pid = child.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        code = child.popen.wait(30) if child.popen is not None else None
        self._ended(code, "killed")
        return f"SIGKILLed the driver (pid {pid}) and its JVM and workers"

    def stop(self) -> None:
        """Ask the query to stop (the stop file), wait, kill it if it will not."""
        if self._child is None:
            return
        self.stop_file.touch()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.ended():
                return
            time.sleep(0.5)
        if self._child is not None:
            self.kill()

    def drain(self, timeout_s: float) -> JobRun:
        """Run the query once more to the source's present, to the end; its run."""
        self.stop_file.unlink(missing_ok=True)
        run = self.start(drain=True)
        assert self._child is not None
        assert self._child.popen is not None
        try:
            code: int | None = self._child.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            run.ended_by = "killed: the drain did not end"
            return run
        self._ended(code, "drained" if code == 0 else "failed")
        return run

    def close(self) -> None:
        if self._child is not None:
            self.kill()
