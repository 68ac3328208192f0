"""The chaos report: JSON for machines, Markdown for people, both from the same results."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onceover_tools.chaos.runner import RacerRun, ScheduleResult
from onceover_tools.chaos.schedule import KINDS


@dataclass(frozen=True)
class Session:
    """What a chaos session was asked to do."""

    seed: int | None
    schedules: int
    modes: Sequence[str]
    rows: int | None
    replay: str | None = None
    curated: str | None = None
    """The curated share run ("all" or "ci"), or None for draws and replays."""
    workloads: Sequence[str] = ("load_files",)

    def command(self) -> str:
        if self.replay:
            return f"onceover chaos --replay {self.replay}"
        if self.curated:
            return "onceover chaos --curated" + (
                "" if self.curated == "all" else f" {self.curated}"
            )
        rows = f" --rows {self.rows}" if self.rows else ""
        return (
            f"onceover chaos --schedules {self.schedules} --seed {self.seed}"
            f" --modes {','.join(self.modes)} --workloads {','.join(self.workloads)}{rows}"
        )


def replay_command(result: ScheduleResult) -> str:
    return f"onceover chaos --replay {result.work_dir / 'schedule.json'}"


def _racer_json(racer: RacerRun) -> dict[str, Any]:
    return {
        "exit_code": racer.exit_code,
        "started_at_s": racer.started_at_s,
        "refused": racer.refused,
        "hung": racer.hung,
    }


def result_json(result: ScheduleResult) -> dict[str, Any]:
    return {
        "schedule": result.schedule.to_json(),
        "verdict": "ok" if result.ok else "violation",
        "violations": result.violations,
        "restarts": result.restarts,
        "runs": [
            {
                "exit_code": r.exit_code,
                "seconds": round(r.seconds, 1),
                "hung": r.hung,
                **({"racer": _racer_json(r.racer)} if r.racer is not None else {}),
            }
            for r in result.runs
        ],
        "faults": [
            {
                "kind": o.fault.kind,
                "armed": o.fault.describe,
                "fired": o.fired,
                "details": o.details,
            }
            for o in result.faults
        ],
        "seconds": round(result.seconds, 1),
        "bigquery": result.bigquery,
        "control_plane": result.control_plane,
        **({"cluster": result.cluster} if result.cluster else {}),
        "ledger": result.ledger,
        "work_dir": str(result.work_dir),
        "replay": replay_command(result),
    }


def kind_totals(results: Sequence[ScheduleResult]) -> dict[str, dict[str, int]]:
    """Per fault kind: schedules that armed it, and how many times it fired."""
    totals = {kind: {"armed": 0, "fired": 0} for kind in KINDS}
    for result in results:
        for outcome in result.faults:
            totals[outcome.fault.kind]["armed"] += 1
            totals[outcome.fault.kind]["fired"] += outcome.fired
    return totals


def report_json(
    session: Session, results: Sequence[ScheduleResult], started: datetime, seconds: float
) -> dict[str, Any]:
    return {
        "command": session.command(),
        "seed": session.seed,
        "modes": list(session.modes),
        "workloads": list(session.workloads),
        "started_at": started.isoformat(),
        "seconds": round(seconds, 1),
        "schedules": len(results),
        "violations": sum(1 for r in results if not r.ok),
        "restarts": sum(r.restarts for r in results),
        "kinds": kind_totals(results),
        "results": [result_json(r) for r in results],
    }


def report_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Chaos report",
        "",
        f"`{report['command']}`, started {report['started_at']}, {report['seconds']:.0f} s.",
        "",
        f"**{report['violations']} violations** in {report['schedules']} schedules "
        f"({report['restarts']} restarts in all).",
        "",
        "## Fault kinds",
        "",
        "| kind | armed in | fired |",
        "|---|---:|---:|",
    ]
    for kind, counts in report["kinds"].items():
        lines.append(f"| `{kind}` | {counts['armed']} | {counts['fired']} |")
    lines += [
        "",
        "## Schedules",
        "",
        "| schedule | workload | mode | store | faults (fired) | restarts | verdict | seconds |",
        "|---|---|---|---|---|---:|---|---:|",
    ]
    for result in report["results"]:
        schedule = result["schedule"]
        faults = "<br>".join(f"{f['armed']} ({f['fired']})" for f in result["faults"]) or "none"
        verdict = "ok" if result["verdict"] == "ok" else "**VIOLATION**"
        lines.append(
            f"| {schedule['name']} | {schedule.get('workload', 'load_files')} "
            f"| {schedule['mode']} | {schedule.get('store', 'posix')} | {faults} "
            f"| {result['restarts']} "
            f"| {verdict} | {result['seconds']:.0f} |"
        )
    violations = [r for r in report["results"] if r["verdict"] != "ok"]
    if violations:
        lines += ["", "## Violations", ""]
        for result in violations:
            schedule = result["schedule"]
            lines += [
                f"### {schedule['name']} (seed {schedule['seed']}, {schedule['mode']})",
                "",
                *(f"- {v}" for v in result["violations"]),
                "",
                f"Replay: `{result['replay']}`; logs in `{result['work_dir']}`.",
                "",
                "```json",
                json.dumps(schedule, indent=2),
                "```",
                "",
            ]
    return "\n".join(lines) + "\n"


def write_report(
    directory: Path,
    session: Session,
    results: Sequence[ScheduleResult],
    started: datetime,
    seconds: float,
) -> tuple[Path, Path]:
    """Write ``chaos-report.json`` and ``chaos-report.md`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    report = report_json(session, results, started, seconds)
    json_path = directory / "chaos-report.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    markdown_path = directory / "chaos-report.md"
    markdown_path.write_text(report_markdown(report))
    return json_path, markdown_path


def now() -> datetime:
    return datetime.now(UTC)
