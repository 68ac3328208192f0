"""The demo's console: one numbered line per step, and a failure that names its step."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from onceover.errors import OnceoverError


class DemoStepError(OnceoverError):
    """A step went wrong; the message names it and where the logs are."""


class Step:
    """What a running step will say when it ends."""

    def __init__(self) -> None:
        self.outcome = "done"

    def done(self, outcome: str) -> None:
        """What the step's line ends with once it has finished."""
        self.outcome = outcome


class Steps:
    """``[n/total] Title ... outcome``: the title as the step starts, the outcome after."""

    def __init__(self, total: int, logs: Path, out: TextIO = sys.stdout) -> None:
        self.total = total
        self.logs = logs
        self.out = out
        self.number = 0

    @contextmanager
    def step(self, title: str) -> Iterator[Step]:
        self.number += 1
        where = f"[{self.number}/{self.total}]"
        print(f"{where} {title} ...", end=" ", file=self.out, flush=True)
        step = Step()
        try:
            yield step
        except KeyboardInterrupt:
            print("interrupted", file=self.out, flush=True)
            raise
        except Exception as exc:
            print("failed", file=self.out, flush=True)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DemoStepError(
                f"demo step {self.number}/{self.total} ({title}) failed: {first} "
                f"(logs in {self.logs})"
            ) from exc
        print(step.outcome, file=self.out, flush=True)
