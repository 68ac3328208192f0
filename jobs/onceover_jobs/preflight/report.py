"""What a check says: its verdict, why, and what to do about it.

``ok`` means the job can go ahead as far as this check sees; ``warn`` that it can, but
something is close to a limit or could not be checked; ``fail`` that the job would fail
(or break a limit) and must not start. A report of checks fails when one of them does.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

Verdict = Literal["ok", "warn", "fail"]
VERDICTS: tuple[Verdict, ...] = ("ok", "warn", "fail")


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``name`` as the report and errors call it."""

    name: str
    verdict: Verdict
    reason: str
    fix: str | None = None
    """What to do; None when there is nothing to do (``ok``)."""


def ok(name: str, reason: str) -> Check:
    return Check(name, "ok", reason)


def warn(name: str, reason: str, fix: str | None = None) -> Check:
    return Check(name, "warn", reason, fix)


def fail(name: str, reason: str, fix: str) -> Check:
    return Check(name, "fail", reason, fix)


@dataclass(frozen=True)
class Report:
    """Every check of one run, in the order they ran."""

    target: str
    """The table checked, ``project.dataset.table``."""
    checks: tuple[Check, ...]

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.verdict == "fail")

    @property
    def exit_code(self) -> int:
        """0 when nothing fails (a warning is fine), 1 otherwise."""
        return 1 if self.failed else 0

    def to_json(self) -> str:
        """The report for machines: the table, the checks, and whether it passed."""
        return json.dumps(
            {
                "table": self.target,
                "passed": not self.failed,
                "checks": [asdict(check) for check in self.checks],
            },
            indent=2,
        )

    def to_text(self) -> str:
        """The report for people: one line per check, its fix under it."""
        width = max((len(check.name) for check in self.checks), default=0)
        lines = [f"onceover check {self.target}"]
        for check in self.checks:
            lines.append(f"  {check.verdict.upper():<4}  {check.name:<{width}}  {check.reason}")
            if check.fix:
                lines.append(f"        {'':<{width}}  fix: {check.fix}")
        counts = {v: sum(c.verdict == v for c in self.checks) for v in VERDICTS}
        summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
        lines.append(f"{summary}: {'FAILED' if self.failed else 'ready to run'}")
        return "\n".join(lines)
