"""The soak's faults: one every ``--crash-every`` seconds, the kinds in turn, each armed
at its moment and seen to fire (a fault that does not fire within
:data:`FIRE_DEADLINE_S` fails the soak: each is certain, not drawn).

- ``driver_kill``: the driver's process group SIGKILLed (Python driver, JVM, workers),
  then started again on the same checkpoint, as an orchestrator restarts a preempted
  or OOM-killed driver;
- ``worker_kill``: the Spark Python worker sending an append SIGKILLed while the append
  is in flight (the proxy finds it by its connection); Spark retries the task;
- ``commit_error``: the commit step fails with UNAVAILABLE after it took effect, its
  answer lost (``commit.after`` in pending mode, ``flush.after`` in buffered; committed
  and default mode have no commit call: ``ledger.after_intent``, the batch's intent
  recorded, its publication not yet);
- ``connection_drop``: an append reaches BigQuery, which applies it, then the proxy
  breaks the call: the client cannot know.

Against real BigQuery the two wire faults act on the Storage Write endpoint's CONNECT
tunnel instead (:mod:`onceover_tools.soak.tunnel`); the other two are the same.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from onceover_jobs.sink import failpoints

from onceover.modes import Publish, traits_of
from onceover_tools.chaos.proxy import APPEND_ROWS, WireFault
from onceover_tools.soak.job import SoakJob
from onceover_tools.soak.plan import FAULT_KINDS
from onceover_tools.soak.target import WireFaults

COMMIT_POINTS: dict[Publish, str] = {
    "batch_commit": "commit.after",
    "flush": "flush.after",
    "none": "ledger.after_intent",
}
"""Where ``commit_error`` fails a batch, by how its mode publishes one: after the commit
step took effect, or (a mode whose rows are visible as appended) where the batch's
intent is recorded."""
FIRE_DEADLINE_S = 120.0
QUIET_END_S = 60.0
"""No fault is armed in the soak's last minute (or last ``every_s``, if shorter): its
recovery must be seen before the query is stopped."""


@dataclass
class SoakFault:
    number: int
    kind: str
    armed_s: float
    fired_s: float | None = None
    detail: str = ""
    commits_before: int = 0
    first_commit_s: float | None = None
    """Seconds into the soak when the first micro-batch after the fault was committed."""
    missed: bool = False
    disarmed: bool = False
    """Armed, not yet fired when the soak's time was up: taken back, not a failure."""

    @property
    def recovery_s(self) -> float | None:
        """Fault to the next committed micro-batch (a driver's restart included)."""
        if self.fired_s is None or self.first_commit_s is None:
            return None
        return round(self.first_commit_s - self.fired_s, 1)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recovery_s": self.recovery_s}


class Faults:
    """Arms the faults on time and follows each until the query commits again."""

    def __init__(
        self,
        *,
        kinds: tuple[str, ...],
        every_s: float | None,
        mode: str,
        proxy: WireFaults,
        job: SoakJob,
        state: Path,
    ) -> None:
        unknown = [kind for kind in kinds if kind not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kind {unknown[0]!r}; known: {', '.join(FAULT_KINDS)}")
        self.kinds, self.every_s = kinds, every_s
        self.commit_point = COMMIT_POINTS[traits_of(mode).publish]
        self.proxy, self.job, self.state = proxy, job, state
        self.quiet_s = min(every_s or 0.0, QUIET_END_S)
        self.done: list[SoakFault] = []
        self._next_due: float | None = None
        """Set at the query's first commit: the first fault comes ``every_s`` after it."""
        self._wire: dict[int, WireFault] = {}
        self._fired_lines: dict[int, int] = {}

    @property
    def pending(self) -> SoakFault | None:
        """The fault armed and not yet fired (the next waits for it)."""
        last = self.done[-1] if self.done else None
        if last is None or last.fired_s is not None or last.missed or last.disarmed:
            return None
        return last

    def tick(self, now_s: float, commits: int, ends_s: float) -> SoakFault | None:
        """Arm a fault if one is due (none in the last stretch before ``ends_s``); follow
        those armed. The fault armed now, if any."""
        self._follow(now_s, commits)
        if self.every_s is None:
            return None
        if self._next_due is None:
            if commits > 0:
                self._next_due = now_s + self.every_s
            return None
        if now_s < self._next_due or now_s > ends_s - self.quiet_s:
            return None
        if self.pending is not None:
            return None
        self._next_due += self.every_s
        return self._arm(now_s, commits)

    def _arm(self, now_s: float, commits: int) -> SoakFault:
        kind = self.kinds[len(self.done) % len(self.kinds)]
        fault = SoakFault(len(self.done) + 1, kind, now_s, commits_before=commits)
        self.done.append(fault)
        if kind == "driver_kill":
            fault.detail = self.job.kill()
            fault.fired_s = now_s
        elif kind in ("worker_kill", "connection_drop"):
            action = "kill" if kind == "worker_kill" else "drop_response"
            self._wire[fault.number] = self.proxy.arm_next(action, APPEND_ROWS)  # type: ignore[arg-type]
        else:
            point = self.commit_point
            self._fired_lines[fault.number] = self._fired(point)
            failpoints.arm_once(self.state, point, failpoints.Action.ERROR)
            fault.detail = f"{point}=error"
        return fault

    def _fired(self, point: str) -> int:
        log = self.state / "fired.log"
        if not log.exists():
            return 0
        return sum(f"failpoint {point} fired" in line for line in log.read_text().splitlines())

    def follow(self, now_s: float, commits: int) -> None:
        """Follow the faults armed, arming none (the soak's time is up)."""
        self._follow(now_s, commits)

    def _follow(self, now_s: float, commits: int) -> None:
        for fault in self.done:
            if fault.fired_s is None and not fault.missed and not fault.disarmed:
                if self._check_fired(fault, now_s):
                    fault.commits_before = commits  # recovery counts from here
            elif (
                fault.fired_s is not None
                and fault.first_commit_s is None
                and commits > fault.commits_before
            ):
                fault.first_commit_s = now_s

    def _check_fired(self, fault: SoakFault, now_s: float) -> bool:
        wire = self._wire.get(fault.number)
        if wire is not None:
            for fired in self.proxy.fired:
                if fired.fault == wire:
                    fault.fired_s, fault.detail = now_s, fired.detail or wire.action
        elif fault.kind == "commit_error":
            point = self.commit_point
            if self._fired(point) > self._fired_lines[fault.number]:
                fault.fired_s = now_s
        if fault.fired_s is None and now_s - fault.armed_s > FIRE_DEADLINE_S:
            fault.missed = True
            fault.detail += f" (did not fire within {FIRE_DEADLINE_S:.0f} s)"
        return fault.fired_s is not None

    def disarm(self) -> None:
        """Take back a fault armed and not fired (the soak is over): none may fire later."""
        waiting = self.pending
        if waiting is not None:
            waiting.disarmed = True
            waiting.detail += " (taken back: the soak's time was up before it fired)"
        (self.state / f"{self.commit_point}{failpoints.ARM_SUFFIX}").unlink(missing_ok=True)
        armed = set(self._wire.values())
        self.proxy.plan = [f for f in self.proxy.plan if f not in armed]
