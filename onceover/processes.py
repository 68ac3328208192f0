"""Child processes that Onceover starts and stops: the local BigQuery, the backend, jobs."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Self, TypeVar

from onceover.bigquery import BigQueryConfig
from onceover.errors import OnceoverError
from onceover.waiting import poll_until

logger = logging.getLogger(__name__)

T = TypeVar("T")

STOP_GRACE_S = 20.0


class StartStop:
    """``with thing:`` starts ``thing`` and stops it on the way out, whatever happened."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ChildProcess:
    """A command in its own process group, stopped with SIGTERM then, if need be, SIGKILL.

    Its own process group keeps a terminal's Ctrl-C from reaching it directly, so
    the parent decides the order things stop in.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        capture_stdout: bool = False,
        cwd: str | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(os.environ if env is None else env)
        self.log_path = log_path
        self.capture_stdout = capture_stdout
        self.cwd = cwd
        self.popen: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("a", encoding="utf-8")
        output = self._log  # None: inherit the parent's stream
        self.popen = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.capture_stdout else output,
            stderr=output,
            text=True,
            start_new_session=True,
        )
        logger.debug("started %s (pid %d): %s", self.name, self.popen.pid, self.argv)
        return self.popen

    @property
    def pid(self) -> int:
        return self._popen().pid

    def poll(self) -> int | None:
        return self._popen().poll()

    def wait_until(self, what: str, probe: Callable[[], T | None], timeout_s: float) -> T:
        """Call ``probe`` until it returns a value; fail if the child dies or time runs out."""

        def still_running() -> None:
            code = self.poll()
            if code is not None:
                raise OnceoverError(
                    f"{self.name} exited with status {code} before {what}{self._see_log()}"
                )

        def timed_out() -> OnceoverError:
            self.stop()
            return OnceoverError(
                f"{self.name} did not get {what} within {timeout_s:.0f} s{self._see_log()}"
            )

        return poll_until(probe, timeout_s, timed_out=timed_out, between=still_running)

    def wait(self) -> int:
        """Wait until it exits by itself; its exit status (negative: the signal)."""
        status = self._popen().wait()
        self.stop()  # closes the log
        return status

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL; ``grace_s=0``: SIGKILL at once
        (a kill meant, as a fault's, not a stop that failed: nothing is warned). Returns
        the exit status."""
        popen = self.popen
        if popen is None:
            return None
        if popen.poll() is None and grace_s <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        elif popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.killpg(popen.pid, signal.SIGTERM)
            try:
                popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop within %g s; killing it", self.name, grace_s)
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
        if popen.stdout is not None:
            popen.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        return popen.returncode

    def _popen(self) -> subprocess.Popen[str]:
        if self.popen is None:
            raise OnceoverError(f"{self.name} has not been started")
        return self.popen

    def _see_log(self) -> str:
        return f"; see {self.log_path}" if self.log_path else "; see its output above"


QUICK_JVM = "-XX:TieredStopAtLevel=1"
"""The JIT's quick compiler only. A JVM that lives under a minute (a demo or chaos load,
a test's job) never pays back the optimising compiler's CPU: a job run takes about a
quarter less CPU without it (docs/journal/notes.md). What the sink does does not depend
on it."""


QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""A JVM that cannot use a class archive says so on standard output by default, where
``spark-class`` reads Spark's launcher's answer as the command to run."""

CLASS_ARCHIVE_ENV = "ONCEOVER_JVM_CLASS_ARCHIVE"
"""An archive of Spark's classes (:mod:`onceover_tools.jvm_archive`) for JVMs started
with :func:`with_quick_jvm` to map, when the file exists."""


def with_quick_jvm(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with :data:`QUICK_JVM` in ``JDK_JAVA_OPTIONS`` (once), which every JVM
    started with that environment reads; and the class archive ``env`` names in
    :data:`CLASS_ARCHIVE_ENV`, if it is there."""
    options = env.get("JDK_JAVA_OPTIONS", "").split()
    wanted = [QUICK_JVM]
    archive = env.get(CLASS_ARCHIVE_ENV)
    if archive and Path(archive).is_file():
        wanted += [f"-XX:SharedArchiveFile={archive}", *QUIET_CDS.split()]
    missing = [option for option in wanted if option not in options]
    if not missing:
        return dict(env)
    return {**env, "JDK_JAVA_OPTIONS": " ".join([*options, *missing])}


def job_environment(
    bigquery: BigQueryConfig,
    base: Mapping[str, str] | None = None,
    python: str = sys.executable,
) -> dict[str, str]:
    """The environment of a Spark job started from here with ``python``.

    BigQuery is exactly ``bigquery`` (an inherited ``ONCEOVER_BIGQUERY_*`` never
    leaks in). Spark starts its Python workers with ``PYSPARK_PYTHON`` (or ``python3``
    from ``PATH``), not with the interpreter that runs the driver; both are pinned to
    this interpreter so workers import the same packages.
    """
    env = bigquery.applied_to(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = python
    env["PYSPARK_DRIVER_PYTHON"] = python
    return env
