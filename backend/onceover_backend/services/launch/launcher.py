"""Starting a job process for a resume: its command, environment and log, and watching it.

The command is built from the run's stored spec and this backend's settings, never
from a request: the module must start with an allowed prefix (``jobs.`` by default)
and be importable here, the arguments go to the process as a list (no shell sees
them), and BigQuery, the monitor URL and the ingest token come from the backend's own
configuration. Which spec may be launched at all is an operator's decision
(:mod:`onceover_backend.services.launch.specs`).

The process runs in a directory of the backend's (``<launch log dir>/<run>/work``,
mode 0700), never in the directory the spec names, and with ``python -P`` and
``PYTHONSAFEPATH=1`` (for the Python workers Spark starts too), so no working directory
is put on ``sys.path``: a ``jobs`` package planted where the job was first started
cannot shadow the installed one. The child gets the backend's environment without any ``ONCEOVER_*``
variable of its own (tokens, the database URL, failpoints) except a few harmless ones.

The process runs in its own session, so it outlives a backend restart; its output
(stdout and stderr) goes to one log file per attempt.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import socket
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from onceover.argv import without_options
from onceover.bigquery import BigQueryConfig
from onceover.events import JobSpec
from onceover.job_env import ATTEMPT_ID_ENV, MONITOR_TOKEN_ENV, MONITOR_URL_ENV, SPARK_MASTER_ENV
from onceover.packaging import build_py_files
from onceover.processes import ChildProcess, job_environment
from onceover_backend.core.config import Settings
from onceover_backend.errors import LaunchFailedError, UnresumableError
from onceover_backend.services.launch.redaction import redacted_command

logger = logging.getLogger(__name__)

WORK_DIR_MODE = 0o700
PASSED_ENV = frozenset({"ONCEOVER_LOG_FORMAT", "ONCEOVER_HEARTBEAT_S", "ONCEOVER_SPOOL_DIR"})
"""The only ``ONCEOVER_*`` variables of the backend a launched job inherits."""
HOST = socket.gethostname()
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def with_py_files(args: list[str], zip_path: Path) -> list[str]:
    """``args`` with ``zip_path`` added to its ``--py-files`` (or a new one): spark-submit
    keeps only the last ``--py-files`` it is given, so ours joins the operator's."""
    merged = list(args)
    for index, arg in enumerate(merged):
        if arg == "--py-files" and index + 1 < len(merged):
            merged[index + 1] = f"{merged[index + 1]},{zip_path}"
            return merged
        if arg.startswith("--py-files="):
            merged[index] = f"{arg},{zip_path}"
            return merged
    return [*merged, "--py-files", str(zip_path)]


def pid_alive(pid: int | None) -> bool:
    """Whether a process of this id exists on this host (and is not a zombie)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] != "Z"
    return True


class Launcher:
    """Builds and starts job processes; keeps the ones it started until they exit."""

    def __init__(self, settings: Settings, bigquery: BigQueryConfig) -> None:
        self.settings = settings
        self.bigquery = bigquery
        self._children: dict[str, ChildProcess] = {}
        self._watchers: list[threading.Thread] = []
        self._lock = threading.Lock()

    # -- what would run ---------------------------------------------------------------

    def module_file(self, spec: JobSpec) -> str:
        """The file of ``spec``'s module, once it is known to be allowed and installed."""
        prefixes = self.settings.launch_modules
        if not any(spec.module.startswith(prefix) for prefix in prefixes):
            raise UnresumableError(
                f"the run's job module {spec.module!r} is not one this backend launches "
                f"(ONCEOVER_LAUNCH_MODULES: {', '.join(prefixes) or 'none'})"
            )
        try:
            found = importlib.util.find_spec(spec.module)
        except (ImportError, ValueError):
            found = None
        if found is None or found.origin is None:
            raise UnresumableError(f"the job module {spec.module!r} is not installed here")
        if found.submodule_search_locations is not None:
            # A package (python -m runs its __main__): spark-submit is given that file.
            main = Path(found.origin).with_name("__main__.py")
            if not main.is_file():
                raise UnresumableError(f"the job package {spec.module!r} has no __main__")
            return str(main)
        return found.origin

    def command(self, spec: JobSpec) -> list[str]:
        """The argument list that resumes ``spec``'s job."""
        module_file = self.module_file(spec)
        if any("\x00" in arg for arg in spec.args):
            raise UnresumableError("the run's stored arguments contain a NUL character")
        master = self.settings.spark_master
        args = without_options(spec.args, ["--master"]) if master else list(spec.args)
        if self.settings.launch_with == "python":
            return [self.settings.launch_python, "-P", "-m", spec.module, *args]
        submit = [self._spark_submit()]
        if master:
            submit += ["--master", master]
        extra = with_py_files(self.settings.spark_submit_args, self.py_files())
        return [*submit, *extra, module_file, *args]

    def shown(self, argv: list[str]) -> list[str]:
        """``argv`` as it is stored and shown: secrets and the deployer's values masked."""
        return redacted_command(argv, self.settings.spark_submit_args)

    @staticmethod
    def relative_paths(spec: JobSpec) -> list[str]:
        """The spec's arguments that name a path relative to where the job was started:
        they meant something there, and launches run in a directory of their own."""
        if spec.cwd is None:
            return []
        return [
            arg
            for arg in spec.args
            if arg and not arg.startswith("-") and not Path(arg).is_absolute()
            and (Path(spec.cwd) / arg).exists()
        ]  # fmt: skip

    def py_files(self) -> Path:
        """The zip of this project's code that executors import (built when it changed)."""
        try:
            # Absolute: the job runs in a directory of its own, not the backend's.
            return build_py_files((self.settings.data_dir / "py-files").resolve())
        except OSError as exc:
            raise LaunchFailedError(f"could not build the executors' code zip: {exc}") from exc

    def _spark_submit(self) -> str:
        if self.settings.spark_submit:
            return self.settings.spark_submit
        on_path = shutil.which("spark-submit")
        if on_path:
            return on_path
        found = importlib.util.find_spec("pyspark")
        if found is not None and found.origin is not None:
            shipped = Path(found.origin).parent / "bin" / "spark-submit"
            if shipped.is_file():
                return str(shipped)
        raise LaunchFailedError(
            "launch_with is spark-submit but none was found: set ONCEOVER_SPARK_SUBMIT"
        )

    def _run_dir(self, run_id: str) -> Path:
        name = _UNSAFE.sub("_", run_id)
        if name != run_id:  # two ids that differ only in unsafe characters stay apart
            name += "-" + hashlib.sha256(run_id.encode()).hexdigest()[:8]
        return self.settings.attempt_log_dir().resolve() / name

    def work_dir(self, run_id: str) -> Path:
        """Where the run's launched attempts run: the backend's, not the spec's ``cwd``."""
        return self._run_dir(run_id) / "work"

    def log_path(self, run_id: str, number: int, kind: str = "attempt") -> Path:
        """Launch ``number`` of ``kind`` (an attempt, a re-drive): one log each."""
        return self._run_dir(run_id) / f"{kind}-{number}.log"

    def monitor(self) -> tuple[str, str]:
        """Where launched jobs post events, and with which token; refused if unset."""
        url = self.settings.launch_monitor_url
        token = self.settings.launch_token()
        if not url:
            raise LaunchFailedError(
                "this backend does not know the URL launched jobs should post events to: "
                "set ONCEOVER_LAUNCH_MONITOR_URL (onceover serve sets it to its own address)"
            )
        if not token:
            raise LaunchFailedError(
                "no ingest token for launched jobs: set ONCEOVER_LAUNCH_INGEST_TOKEN, or "
                "give ONCEOVER_TOKENS an ingest:TOKEN pair"
            )
        return url, token

    def environment(self, attempt_id: str) -> dict[str, str]:
        url, token = self.monitor()
        inherited = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("ONCEOVER_") or name in PASSED_ENV
        }
        env = job_environment(self.bigquery, inherited, self.settings.launch_python)
        env[MONITOR_URL_ENV] = url
        env[MONITOR_TOKEN_ENV] = token
        env[ATTEMPT_ID_ENV] = attempt_id
        env["PYTHONSAFEPATH"] = "1"  # Spark's Python workers (python -m) too
        if self.settings.spark_master:
            env[SPARK_MASTER_ENV] = self.settings.spark_master
        return env

    # -- running it -------------------------------------------------------------------

    def start(
        self,
        *,
        key: str,
        argv: list[str],
        cwd: Path,
        attempt_id: str,
        log_path: Path,
        header: str,
        on_exit: Callable[[int], None],
    ) -> int:
        """Start the process; ``on_exit(status)`` runs on a thread of its own when it ends.

        Returns its pid. Raises :class:`LaunchFailedError` when it could not start.
        """
        env = self.environment(attempt_id)
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            cwd.mkdir(mode=WORK_DIR_MODE, parents=True, exist_ok=True)
            cwd.chmod(WORK_DIR_MODE)  # mkdir's mode is masked by the umask
            with log_path.open("a", encoding="utf-8") as log:
                log.write(header.rstrip("\n") + "\n")
            child = ChildProcess(f"attempt {key}", argv, env=env, log_path=log_path, cwd=str(cwd))
            popen = child.start()
        except OSError as exc:
            raise LaunchFailedError(f"could not start {argv[0]}: {exc}") from exc
        watcher = threading.Thread(
            target=self._watch, args=(key, child, on_exit), name=f"watch-{key}", daemon=True
        )
        with self._lock:
            self._children[key] = child
            self._watchers = [w for w in self._watchers if w.is_alive()] + [watcher]
        watcher.start()
        return popen.pid

    def _watch(self, key: str, child: ChildProcess, on_exit: Callable[[int], None]) -> None:
        status = child.wait()
        with self._lock:
            self._children.pop(key, None)
        try:
            on_exit(status)
        except Exception:  # the thread has no caller to tell; the stall sweep is the backstop
            logger.exception("could not record the exit (status %d) of %s", status, child.name)

    def running(self) -> list[str]:
        with self._lock:
            return list(self._children)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """Stop every process this launcher started and still runs, and wait until each
        exit is recorded (tests, not shutdown: a backend restart leaves jobs running)."""
        with self._lock:
            children = list(self._children.values())
            watchers = list(self._watchers)
        for child in children:
            child.stop(grace_s)
        for watcher in watchers:
            watcher.join(grace_s + 30)


def log_header(
    run_id: str, number: int, *, actor: str, approval: str, when: datetime, shown: list[str]
) -> str:
    """The log's first line; ``shown`` is the command with its secrets redacted."""
    return (
        f"# onceover: attempt {number} of run {run_id}, launched by {actor} at "
        f"{when.isoformat()} on {HOST} ({approval}): {' '.join(shown)}"
    )
