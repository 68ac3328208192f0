"""The chaos report's summaries: by workload and mode, by store, by fault kind, in the
JSON and the Markdown, from results made up here (no Spark, no BigQuery)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from onceover_tools.chaos.report import (
    Session,
    kind_totals,
    now,
    report_json,
    report_markdown,
    write_report,
)
from onceover_tools.chaos.runner import FaultOutcome, JobRun, RacerRun, ScheduleResult
from onceover_tools.chaos.schedule import KINDS, Fault, Schedule

WORK = Path("/tmp/chaos-work")
CRASH = Fault("failpoint/commit.after/crash", nth=2)
CUT = Fault("wire/cut", nth=4, method="google.cloud.bigquery.storage.v1.BigQueryWrite/AppendRows")
OUTAGE = Fault("backend/outage", at_s=3.0, for_s=4.0)


def _result(
    index: int,
    workload: str,
    mode: str,
    store: str,
    faults: tuple[tuple[Fault, int], ...],
    *,
    restarts: int = 0,
    violation: bool = False,
    hung: bool = False,
    racer_hung: bool = False,
) -> ScheduleResult:
    schedule = Schedule(
        seed=9, index=index, mode=mode, faults=tuple(f for f, _ in faults), workload=workload,
        store=store, racer_at_s=5.0 if workload == "racing_drivers" else None,
    )  # fmt: skip
    runs = [JobRun(1, 2.0) for _ in range(restarts)] + [JobRun(None if hung else 0, 3.0, hung)]
    if racer_hung:
        runs[0] = replace(runs[0], racer=RacerRun(None, 5.0, hung=True))
    return ScheduleResult(
        schedule=schedule,
        runs=runs,
        faults=[FaultOutcome(f, fired=n) for f, n in faults],
        violations=["the job hung"] if violation else [],
        seconds=5.0,
        bigquery={"rows": 3000},
        control_plane={},
        work_dir=WORK / schedule.name,
    )


RESULTS = [
    _result(0, "load_files", "pending", "posix", ((CRASH, 1), (CUT, 1)), restarts=1),
    _result(1, "load_files", "pending", "s3", ((CUT, 0),), restarts=2, violation=True),
    _result(2, "load_files", "buffered", "posix", ((OUTAGE, 1),)),
    _result(3, "foreach_batch", "pending", "gcs", ((CRASH, 1), (OUTAGE, 1)), restarts=1),
    _result(
        4, "racing_drivers", "committed", "posix", ((CUT, 1),), racer_hung=True, violation=True
    ),
    _result(5, "load_files", "pending", "posix", ((CUT, 1), (CUT, 0)), hung=True, violation=True),
]


def _report() -> dict[str, object]:
    session = Session(9, 6, ["pending", "buffered", "committed"], 3000)
    return report_json(session, RESULTS, now(), 30.0)


def test_the_report_counts_each_workload_and_mode() -> None:
    report = _report()
    assert report["by_workload_mode"] == [
        {"workload": "load_files", "mode": "pending", "schedules": 3, "passed": 1,
         "violations": 2, "restarts": 3, "hung": 1},
        {"workload": "load_files", "mode": "buffered", "schedules": 1, "passed": 1,
         "violations": 0, "restarts": 0, "hung": 0},
        {"workload": "foreach_batch", "mode": "pending", "schedules": 1, "passed": 1,
         "violations": 0, "restarts": 1, "hung": 0},
        {"workload": "racing_drivers", "mode": "committed", "schedules": 1, "passed": 0,
         "violations": 1, "restarts": 0, "hung": 1},
    ]  # fmt: skip
    assert report["by_store"] == [
        {"store": "posix", "schedules": 4, "passed": 2, "violations": 2, "restarts": 1,
         "hung": 2},
        {"store": "s3", "schedules": 1, "passed": 0, "violations": 1, "restarts": 2, "hung": 0},
        {"store": "gcs", "schedules": 1, "passed": 1, "violations": 0, "restarts": 1, "hung": 0},
    ]  # fmt: skip
    assert (report["schedules"], report["passed"], report["violations"]) == (6, 3, 3)
    assert (report["restarts"], report["hung"]) == (4, 2)


def test_the_report_counts_each_fault_kind_and_the_violations_among_its_schedules() -> None:
    kinds = kind_totals(RESULTS)
    assert list(kinds) == list(KINDS)  # every kind, those armed nowhere with zeros
    assert kinds["wire/cut"] == {"armed": 5, "fired": 3, "schedules": 4, "violations": 3}
    assert kinds["failpoint/commit.after/crash"] == {
        "armed": 2, "fired": 2, "schedules": 2, "violations": 0,
    }  # fmt: skip
    assert kinds["backend/outage"] == {"armed": 2, "fired": 2, "schedules": 2, "violations": 0}
    assert kinds["spark/kill_task"] == {"armed": 0, "fired": 0, "schedules": 0, "violations": 0}
    assert _report()["kinds"] == kinds


def test_the_markdown_has_a_table_per_summary(tmp_path: Path) -> None:
    session = Session(9, 6, ["pending", "buffered", "committed"], 3000)
    json_path, markdown_path = write_report(
        tmp_path, session, RESULTS, now(), 30.0,
        sittings=[{"started_at": "x", "seconds": 10.0, "judged": 2},
                  {"started_at": "y", "seconds": 20.0, "judged": 4}],
    )  # fmt: skip
    markdown = markdown_path.read_text()
    assert markdown == report_markdown(json.loads(json_path.read_text()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chaos-report.json", "chaos-report.md"]
    assert "**3 violations** in 6 schedules (4 restarts in all)." in markdown
    assert "30 s over 2 sittings." in markdown
    workloads = _table(markdown, "## Workloads and modes")
    assert workloads[0] == "| workload | mode | schedules | passed | violations | restarts | hung |"
    assert "| load_files | pending | 3 | 1 | 2 | 3 | 1 |" in workloads
    assert "| racing_drivers | committed | 1 | 0 | 1 | 0 | 1 |" in workloads
    assert len(workloads) == 2 + 4
    stores = _table(markdown, "## Stores")
    assert stores[2:] == [
        "| posix | 4 | 2 | 2 | 1 | 2 |",
        "| s3 | 1 | 0 | 1 | 2 | 0 |",
        "| gcs | 1 | 1 | 0 | 1 | 0 |",
    ]
    kinds = _table(markdown, "## Fault kinds")
    assert kinds[0] == "| kind | schedules | armed | fired | violations |"
    assert "| `wire/cut` | 4 | 5 | 3 | 3 |" in kinds
    assert "| `spark/kill_task` | 0 | 0 | 0 | 0 |" in kinds
    assert len(kinds) == 2 + len(KINDS)
    assert "--stores posix,s3,gcs" in markdown  # the command that draws it again


def _table(markdown: str, heading: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(heading) + 2
    end = lines.index("", start)
    return lines[start:end]
