"""Named failure points that tests and the chaos harness arm from the environment.

``ONCEOVER_FAILPOINTS="name=action[@n][%p];..."``, read by the driver and by every
executor, e.g. ``commit.after=crash@1;append.response=drop%0.2``:

- ``crash``: the process exits at once, no cleanup. At a driver point the Spark
  driver itself dies (its JVM is killed, which takes the Python driver with it),
  because the sink's driver-side commit runs in a Python worker of that JVM and
  killing only the worker is a different fault. At an executor point the Python
  worker exits and Spark sees the task fail.
- ``error``: raise UNAVAILABLE at that point, outside the sink's own retry loop, so
  the operation (task or commit) fails as it would after an outage.
- ``drop``: the response of an operation that took effect is lost; the sink must
  treat the outcome as unknown. Only points that have a response accept it.

``@n`` fires on the n-th hit only; ``%p`` fires each (eligible) hit with
probability p, drawn from ``ONCEOVER_FAILPOINTS_SEED`` so a schedule replays the
same way. Hits are counted per process, or across the processes of a job when
``ONCEOVER_FAILPOINTS_STATE`` names a directory (counters kept in files there).

A harness that wants a fault at a moment of its choosing, not at a hit it must guess
ahead (``onceover soak``: one every few minutes of an hour-long query), arms a point
while the job runs with :func:`arm_once`: a file ``<name>.arm`` in the state directory,
which the next process to pass the point takes (one rename: exactly one of them fires)
and acts on once. Unset, every ``hit`` is a dictionary lookup on an empty dict.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import re
import signal
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from onceover_jobs.sink.driver import java_ancestor
from onceover_jobs.sink.errors import SinkOptionError

logger = logging.getLogger(__name__)

ENV = "ONCEOVER_FAILPOINTS"
SEED_ENV = "ONCEOVER_FAILPOINTS_SEED"
STATE_ENV = "ONCEOVER_FAILPOINTS_STATE"

CRASH_EXIT_CODE = 86
"""What a crashed process exits with, so a log shows it was a failpoint."""


class Action(StrEnum):
    CRASH = "crash"
    ERROR = "error"
    DROP = "drop"


@dataclass(frozen=True)
class Point:
    name: str
    on_driver: bool
    has_response: bool
    description: str


POINTS: dict[str, Point] = {
    point.name: point
    for point in (
        Point("append.before", False, True, "before an append request is sent"),
        Point("append.response", False, True, "the server applied an append; its response"),
        Point("finalize.after", False, True, "FinalizeWriteStream succeeded"),
        Point("ledger.after_intent", True, False, "the batch's intent is in the ledger"),
        Point("commit.before", True, False, "just before BatchCommitWriteStreams"),
        Point("commit.after", True, True, "BatchCommit succeeded, ledger not yet marked"),
        Point("flush.between", True, False, "a buffered batch's first stream is flushed"),
        Point("flush.after", True, True, "FlushRows succeeded (buffered mode)"),
        Point("overwrite.after_staged", True, False, "an overwrite's rows are staged"),
        Point("overwrite.before_swap", True, False, "the swap is in the ledger, not asked for"),
        Point("overwrite.after_swap", True, False, "the swap's job is done, not yet marked"),
    )
}

_SPEC_RE = re.compile(
    r"^(?P<name>[a-z_.]+)=(?P<action>[a-z]+)(?:@(?P<nth>\d+))?(?:%(?P<p>[0-9.]+))?$"
)


@dataclass(frozen=True)
class Arming:
    point: str
    action: Action
    nth: int | None = None
    probability: float | None = None


def parse(spec: str) -> dict[str, Arming]:
    """Parse a failpoint specification; a bad one raises naming the part at fault."""
    armed: dict[str, Arming] = {}
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        match = _SPEC_RE.match(part)
        if not match:
            raise SinkOptionError(ENV, f"{part!r} is not name=action[@n][%p]")
        name, action_text = match["name"], match["action"]
        if name not in POINTS:
            raise SinkOptionError(ENV, f"unknown failpoint {name!r}; known: {', '.join(POINTS)}")
        try:
            action = Action(action_text)
        except ValueError:
            raise SinkOptionError(ENV, f"{part!r}: action must be crash, error or drop") from None
        if action is Action.DROP and not POINTS[name].has_response:
            raise SinkOptionError(ENV, f"{part!r}: {name} has no response to drop")
        nth = int(match["nth"]) if match["nth"] else None
        if nth == 0:
            raise SinkOptionError(ENV, f"{part!r}: @n counts from 1")
        probability = float(match["p"]) if match["p"] else None
        if probability is not None and not 0 <= probability <= 1:
            raise SinkOptionError(ENV, f"{part!r}: %p must be between 0 and 1")
        armed[name] = Arming(name, action, nth, probability)
    return armed


class _Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, Arming] | None = None
        self._hits: dict[str, int] = {}
        self.fired: list[tuple[str, Action, int]] = []

    def armed(self) -> dict[str, Arming]:
        if self._armed is None:
            self._armed = parse(os.environ.get(ENV, ""))
        return self._armed

    def reset(self) -> None:
        with self._lock:
            self._armed = None
            self._hits.clear()
            self.fired.clear()

    def count(self, name: str) -> int:
        state_dir = os.environ.get(STATE_ENV)
        if state_dir:
            return _count_in_file(Path(state_dir) / f"{name}.hits")
        with self._lock:
            self._hits[name] = self._hits.get(name, 0) + 1
            return self._hits[name]


_registry = _Registry()


def _count_in_file(path: Path) -> int:
    """Add one to the counter in ``path`` and return it, safe against SIGKILL mid-update.

    A chaos schedule kills processes at any instruction, including inside this function.
    Rewriting the counter in place (truncate, then write) left an empty file when the
    kill fell between the two, the count restarted from zero and an ``@n`` fired twice.
    So the new value goes to a temporary file that replaces the counter in one rename:
    a reader sees the old value or the new one, never neither. A separate lock file
    serialises writers, since the counter file itself is swapped under them.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            hits = int(path.read_text().strip() or 0) + 1
        except FileNotFoundError:
            hits = 1
        staged = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        staged.write_text(str(hits))
        os.replace(staged, path)
        return hits


def check_environment() -> None:
    """Parse ``ONCEOVER_FAILPOINTS`` now, so a typo fails on the driver before any write."""
    _registry.reset()
    _registry.armed()


def fired() -> list[tuple[str, Action, int]]:
    """What fired in this process so far: (name, action, hit)."""
    return list(_registry.fired)


def reset() -> None:
    """Forget hits and re-read the environment (tests that arm points in process)."""
    _registry.reset()


ARM_SUFFIX = ".arm"


def arm_once(state_dir: Path, name: str, action: Action) -> Path:
    """Arm ``name`` to do ``action`` at its next hit in any process of the job whose
    ``ONCEOVER_FAILPOINTS_STATE`` is ``state_dir``; the file it leaves until then."""
    point = POINTS.get(name)
    if point is None:
        raise SinkOptionError(STATE_ENV, f"unknown failpoint {name!r}; known: {', '.join(POINTS)}")
    if action is Action.DROP and not point.has_response:
        raise SinkOptionError(STATE_ENV, f"{name} has no response to drop")
    state_dir.mkdir(parents=True, exist_ok=True)
    target = state_dir / f"{name}{ARM_SUFFIX}"
    staged = state_dir / f"{name}{ARM_SUFFIX}.{os.getpid()}.tmp"
    staged.write_text(action.value)
    os.replace(staged, target)  # a process passing the point sees all of it or nothing
    return target


def _take_arming(state_dir: str, name: str) -> Action | None:
    """The action a harness armed ``name`` with, taken so that no other process fires it."""
    armed = Path(state_dir) / f"{name}{ARM_SUFFIX}"
    taken = armed.with_name(f"{armed.name}.taken.{os.getpid()}.{threading.get_ident()}")
    try:
        os.rename(armed, taken)  # atomic: of the processes racing here, one wins
    except FileNotFoundError:
        return None
    try:
        return Action(taken.read_text().strip())
    finally:
        taken.unlink(missing_ok=True)


def hit(name: str) -> bool:
    """Pass failpoint ``name``. Crashes or raises when armed so; True means "drop it"."""
    armed = _registry.armed()
    state_dir = os.environ.get(STATE_ENV)
    if not armed and not state_dir:
        return False
    if state_dir and (action := _take_arming(state_dir, name)) is not None:
        return _fire(Arming(name, action), None)
    arming = armed.get(name)
    if arming is None:
        return False
    hits = _registry.count(name)
    if arming.nth is not None and hits != arming.nth:
        return False
    if arming.probability is not None:
        draw = random.Random(f"{os.environ.get(SEED_ENV, '0')}:{name}:{hits}").random()  # noqa: S311
        if draw >= arming.probability:
            return False
    return _fire(arming, hits)


def _fire(arming: Arming, hits: int | None) -> bool:
    name = arming.point
    _registry.fired.append((name, arming.action, hits or 0))
    # Straight to stderr as well: Spark workers often have no log handler, and a
    # crash must leave its mark before the process is gone.
    when = f"hit {hits}" if hits is not None else "armed by the harness"
    line = f"onceover: failpoint {name} fired: {arming.action} ({when})\n"
    os.write(2, line.encode())
    state_dir = os.environ.get(STATE_ENV)
    if state_dir:  # the record a harness reads: what fired, even if the process dies
        with open(Path(state_dir) / "fired.log", "a") as log:
            log.write(line)
            log.flush()
            os.fsync(log.fileno())
    logger.debug("failpoint %s fired: %s (%s)", name, arming.action, when)
    if arming.action is Action.CRASH:
        _crash(POINTS[name])
    if arming.action is Action.ERROR:
        from google.api_core.exceptions import ServiceUnavailable

        raise ServiceUnavailable(f"failpoint {name} fired (injected UNAVAILABLE)")
    return True


def _crash(point: Point) -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    if point.on_driver:
        jvm = java_ancestor()
        if jvm is not None:
            # The JVM relays this worker's stderr; give it a moment to pass the line on.
            time.sleep(0.3)
            os.kill(jvm, signal.SIGKILL)
    os._exit(CRASH_EXIT_CODE)
