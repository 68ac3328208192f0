"""The chaos report: JSON for machines, Markdown for people, both from the same results."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onceover_tools.chaos.runner import FaultOutcome, JobRun, RacerRun, ScheduleResult
from onceover_tools.chaos.schedule import KINDS, MODES, STORES, WORKLOADS, Schedule


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
    stores: Sequence[str] = STORES

    @property
    def drawn(self) -> bool:
        """Whether the schedules are drawn from the seed (not curated, not a replay)."""
        return self.seed is not None and not self.replay and not self.curated

    def drawing(self) -> dict[str, Any]:
        """What decides the draws (:data:`DRAWING`), as the report records it."""
        return {
            "seed": self.seed,
            "modes": list(self.modes),
            "workloads": list(self.workloads),
            "stores": list(self.stores),
            "rows": self.rows,
        }

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
            f" --modes {','.join(self.modes)} --workloads {','.join(self.workloads)}"
            f" --stores {','.join(self.stores)}{rows}"
        )


DRAWING = ("seed", "modes", "workloads", "stores", "rows")
"""The arguments that decide a session's draws: a report is resumed only with the same."""


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


def portable(entry: dict[str, Any], directory: Path) -> dict[str, Any]:
    """A result's entry with the paths under the report's ``directory`` (its logs, a
    ledger on disk) written relative to it, so a report kept in a repository reads the
    same on every machine; its replay command as run from where ``directory`` was named.
    :func:`result_from_json` reads them back against the report's directory."""
    root = directory.resolve()

    def relative(text: str) -> str:
        if "://" in text:  # a bucket's URL
            return text
        path = Path(text).resolve()
        return str(path.relative_to(root)) if path.is_relative_to(root) else text

    work = relative(entry["work_dir"])
    entry = {**entry, "work_dir": work}
    if isinstance(entry.get("ledger"), dict) and "where" in entry["ledger"]:
        entry["ledger"] = {**entry["ledger"], "where": relative(entry["ledger"]["where"])}
    if not Path(work).is_absolute():
        entry["replay"] = f"onceover chaos --replay {directory / work / 'schedule.json'}"
    return entry


def result_from_json(data: Mapping[str, Any], directory: Path | None = None) -> ScheduleResult:
    """A result back from its report entry (:func:`result_json`): a resumed session keeps
    it. Paths written relative (:func:`portable`) are taken as under ``directory``."""
    schedule = Schedule.from_json(data["schedule"])
    faults = data.get("faults", ())
    if [f["kind"] for f in faults] != [f.kind for f in schedule.faults]:
        raise ValueError(f"{schedule.name}: its faults are not its schedule's")
    return ScheduleResult(
        schedule=schedule,
        runs=[
            JobRun(
                exit_code=r["exit_code"],
                seconds=r["seconds"],
                hung=r.get("hung", False),
                racer=RacerRun(
                    r["racer"]["exit_code"], r["racer"]["started_at_s"], r["racer"]["hung"]
                )
                if "racer" in r
                else None,
            )
            for r in data["runs"]
        ],
        faults=[
            FaultOutcome(fault, fired=f["fired"], details=list(f.get("details", ())))
            for fault, f in zip(schedule.faults, faults, strict=True)
        ],
        violations=list(data["violations"]),
        seconds=data["seconds"],
        bigquery=dict(data.get("bigquery", {})),
        control_plane=dict(data.get("control_plane", {})),
        work_dir=(directory or Path()) / data["work_dir"],
        cluster=dict(data.get("cluster", {})),
        ledger=dict(data.get("ledger", {})),
    )


def hung(result: ScheduleResult) -> bool:
    """Whether a run of the schedule, or its racing driver, hung (killed at the time limit)."""
    return any(r.hung or (r.racer is not None and r.racer.hung) for r in result.runs)


def kind_totals(results: Sequence[ScheduleResult]) -> dict[str, dict[str, int]]:
    """Per fault kind: times armed, times fired, schedules that armed it and how many of
    those violated (a violation is the schedule's, whichever of its faults led to it)."""
    totals = {kind: {"armed": 0, "fired": 0, "schedules": 0, "violations": 0} for kind in KINDS}
    for result in results:
        for outcome in result.faults:
            totals[outcome.fault.kind]["armed"] += 1
            totals[outcome.fault.kind]["fired"] += outcome.fired
        for kind in dict.fromkeys(outcome.fault.kind for outcome in result.faults):
            totals[kind]["schedules"] += 1
            totals[kind]["violations"] += not result.ok
    return totals


def _outcomes(results: Sequence[ScheduleResult]) -> dict[str, int]:
    return {
        "schedules": len(results),
        "passed": sum(1 for r in results if r.ok),
        "violations": sum(1 for r in results if not r.ok),
        "restarts": sum(r.restarts for r in results),
        "hung": sum(1 for r in results if hung(r)),
    }


def workload_totals(results: Sequence[ScheduleResult]) -> list[dict[str, Any]]:
    """Per workload and mode run (in :data:`WORKLOADS` and :data:`MODES` order): schedules,
    passed, violations (schedules with one), restarts, schedules with a run that hung."""
    groups: dict[tuple[str, str], list[ScheduleResult]] = {}
    for result in results:
        groups.setdefault((result.schedule.workload, result.schedule.mode), []).append(result)
    order = sorted(groups, key=lambda pair: (WORKLOADS.index(pair[0]), MODES.index(pair[1])))
    return [{"workload": w, "mode": m, **_outcomes(groups[w, m])} for w, m in order]


def store_totals(results: Sequence[ScheduleResult]) -> list[dict[str, Any]]:
    """Per store a ledger was on (in :data:`STORES` order): as :func:`workload_totals`."""
    groups: dict[str, list[ScheduleResult]] = {}
    for result in results:
        groups.setdefault(result.schedule.store, []).append(result)
    return [{"store": s, **_outcomes(groups[s])} for s in STORES if s in groups]


def report_json(
    session: Session,
    results: Sequence[ScheduleResult],
    started: datetime,
    seconds: float,
    *,
    sittings: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report; ``started`` and ``seconds`` over every sitting of a resumed session."""
    return {
        "command": session.command(),
        **session.drawing(),
        "started_at": started.isoformat(),
        "seconds": round(seconds, 1),
        "sittings": list(sittings),
        "asked": session.schedules,
        **_outcomes(results),
        "by_workload_mode": workload_totals(results),
        "by_store": store_totals(results),
        "kinds": kind_totals(results),
        "results": [result_json(r) for r in results],
    }


_OUTCOME_HEADER = "schedules | passed | violations | restarts | hung |"
_OUTCOME_RULE = "---:|---:|---:|---:|---:|"


def _outcome_cells(row: Mapping[str, Any]) -> str:
    return (
        f"{row['schedules']} | {row['passed']} | {row['violations']} | {row['restarts']} "
        f"| {row['hung']} |"
    )


def _of_asked(report: Mapping[str, Any]) -> str:
    """How many of the schedules asked for are not judged yet, when some are not."""
    asked = report.get("asked", report["schedules"])
    return (
        f"; {asked - report['schedules']} of the {asked} asked for not judged yet"
        if asked > report["schedules"]
        else ""
    )


def report_markdown(report: dict[str, Any]) -> str:
    sittings = len(report.get("sittings", ())) or 1
    over = f" over {sittings} sittings" if sittings > 1 else ""
    lines = [
        "# Chaos report",
        "",
        f"`{report['command']}`, started {report['started_at']}, {report['seconds']:.0f} s{over}.",
        "",
        f"**{report['violations']} violations** in {report['schedules']} schedules "
        f"({report['restarts']} restarts in all){_of_asked(report)}.",
        "",
        "## Workloads and modes",
        "",
        f"| workload | mode | {_OUTCOME_HEADER}",
        f"|---|---|{_OUTCOME_RULE}",
        *(
            f"| {row['workload']} | {row['mode']} | {_outcome_cells(row)}"
            for row in report["by_workload_mode"]
        ),
        "",
        "## Stores",
        "",
        f"| store | {_OUTCOME_HEADER}",
        f"|---|{_OUTCOME_RULE}",
        *(f"| {row['store']} | {_outcome_cells(row)}" for row in report["by_store"]),
        "",
        "## Fault kinds",
        "",
        "| kind | schedules | armed | fired | violations |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, counts in report["kinds"].items():
        lines.append(
            f"| `{kind}` | {counts['schedules']} | {counts['armed']} | {counts['fired']} "
            f"| {counts['violations']} |"
        )
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
    *,
    sittings: Sequence[Mapping[str, Any]] = (),
) -> tuple[Path, Path]:
    """Write ``chaos-report.json`` and ``chaos-report.md`` into ``directory``, each
    replaced whole (a session killed while writing leaves the report before)."""
    directory.mkdir(parents=True, exist_ok=True)
    report = report_json(session, results, started, seconds, sittings=sittings)
    report["results"] = [portable(entry, directory) for entry in report["results"]]
    json_path = directory / REPORT_JSON
    _replace(json_path, json.dumps(report, indent=2) + "\n")
    markdown_path = directory / REPORT_MARKDOWN
    _replace(markdown_path, report_markdown(report))
    return json_path, markdown_path


def _replace(path: Path, text: str) -> None:
    partial = _partial(path)
    partial.write_text(text)
    partial.replace(path)


def _partial(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


REPORT_JSON = "chaos-report.json"
REPORT_MARKDOWN = "chaos-report.md"


class ReportMismatchError(ValueError):
    """The report in the directory is not of this session: resuming it would mix two."""


@dataclass(frozen=True)
class Judged:
    """What the report already in a session's directory holds: the schedules judged."""

    results: dict[int, ScheduleResult]
    """By the schedule's number in the session (its index + 1)."""
    started: datetime
    """When the session's first sitting started."""
    seconds: float
    """The sittings' time so far."""
    sittings: list[dict[str, Any]]
    """Each earlier sitting: when it started, its seconds, the schedules it judged."""


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def judged_before(directory: Path, session: Session, schedules: Sequence[Schedule]) -> Judged:
    """The results a drawn ``session`` judged already, from the report in ``directory``
    (none if there is none), for it to resume: each of them one of ``schedules``.

    Refused (:class:`ReportMismatchError`) when the report was drawn with other arguments
    (:data:`DRAWING`, naming the first that differs), holds more schedules than asked
    for, or holds a schedule the same arguments no longer draw at its place.
    """
    path = directory / REPORT_JSON
    empty = Judged({}, now(), 0.0, [])
    if not path.exists():
        return empty
    how = f"give another --report directory, or --fresh to discard {path}"
    try:
        report = json.loads(path.read_text())
        if not isinstance(report, dict) or not isinstance(report.get("results"), list):
            raise ValueError("no results")
    except (OSError, ValueError) as exc:
        raise ReportMismatchError(f"{path} is not a chaos report ({exc}): {how}") from None
    if report.get("seed") is None:
        raise ReportMismatchError(
            f"{path} is the report of `{report.get('command')}`, not of a drawn session: {how}"
        )
    asked = session.drawing()
    # A report written before sessions resumed records no stores or rows: its schedules,
    # each compared with the one drawn at its place (below), tell.
    for name in DRAWING:
        if name in report and report[name] != asked[name]:
            raise ReportMismatchError(
                f"{path} was drawn with --{name} {_shown(report[name])}, not "
                f"--{name} {_shown(asked[name])}: run it again with --{name} "
                f"{_shown(report[name])} to resume it, or {how}"
            )
    try:
        earlier = [result_from_json(entry, path.parent) for entry in report["results"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportMismatchError(f"{path}: a result is not readable ({exc}): {how}") from None
    results: dict[int, ScheduleResult] = {}
    for result in earlier:
        schedule = result.schedule
        index = schedule.index
        if index >= len(schedules):
            raise ReportMismatchError(
                f"{path} judged {len(earlier)} schedules, {schedule.name} among them, more "
                f"than --schedules {len(schedules)}: ask for {_judged_count(earlier)} or more "
                f"to resume it, or {how}"
            )
        drawn = schedules[index]
        if schedule != drawn:
            now_drawn = drawn.to_json()
            differ = [k for k, v in schedule.to_json().items() if now_drawn.get(k) != v]
            verb = "differs" if len(differ) == 1 else "differ"
            raise ReportMismatchError(
                f"{path}: {schedule.name} there is not the schedule these arguments draw "
                f"at its place ({', '.join(differ)} {verb}): it was drawn with other "
                f"arguments or by another version of the draws; {how}"
            )
        if index + 1 in results:
            raise ReportMismatchError(f"{path} judged {schedule.name} twice: {how}")
        results[index + 1] = result
    try:
        started = datetime.fromisoformat(report["started_at"])
        seconds = float(report["seconds"])
    except (KeyError, TypeError, ValueError):
        started, seconds = now(), 0.0
    sittings = report.get("sittings") or [
        {"started_at": started.isoformat(), "seconds": seconds, "judged": len(results)}
    ]
    return Judged(results, started, seconds, list(sittings))


def refuse_drawn_report(directory: Path, session: Session) -> None:
    """Refuse to replace a drawn session's report with ``session``'s (curated, a replay):
    it would lose what that session judged, which it resumes from."""
    path = directory / REPORT_JSON
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # none, or nothing to resume from
    if isinstance(report, dict) and report.get("seed") is not None:
        raise ReportMismatchError(
            f"{path} is the report of `{report.get('command')}`, which resumes from it: "
            f"give `{session.command()}` another --report directory, or --fresh to "
            f"discard {path}"
        )


def _judged_count(results: Sequence[ScheduleResult]) -> int:
    return max(r.schedule.index for r in results) + 1


def discard_report(directory: Path) -> None:
    """``--fresh``: remove the report in ``directory`` and its schedules' work."""
    for name in (REPORT_JSON, REPORT_MARKDOWN):
        (directory / name).unlink(missing_ok=True)
        _partial(directory / name).unlink(missing_ok=True)
    shutil.rmtree(directory / "work", ignore_errors=True)


def now() -> datetime:
    return datetime.now(UTC)
