"""The thousand-schedule session (issue 58) is kept in ``docs/chaos/seed1/``: its report
resumes on any machine, so each sitting runs only what no earlier one judged. Pinned
here: today's draws still resume it (a change to them would orphan every schedule
judged), and the chaos guide quotes its figures as the report has them."""

from __future__ import annotations

import json
import re
from typing import Any

from onceover_tools.chaos.report import REPORT_JSON, Session, judged_before
from onceover_tools.chaos.schedule import (
    DEFAULT_MODES,
    ROWS,
    STORES,
    WORKLOADS,
    draw_schedules,
)

from tests.conftest import REPO_ROOT

KEPT = REPO_ROOT / "docs" / "chaos" / "seed1"
THOUSAND = 1_000
GUIDE = REPO_ROOT / "docs" / "guides" / "chaos.md"


def _report() -> dict[str, Any]:
    report: dict[str, Any] = json.loads((KEPT / REPORT_JSON).read_text())
    return report


def test_the_kept_report_resumes_with_todays_draws() -> None:
    # As `onceover chaos --schedules 1000 --seed 1 --report docs/chaos/seed1` draws them.
    session = Session(
        1, THOUSAND, list(DEFAULT_MODES), ROWS, workloads=list(WORKLOADS), stores=list(STORES)
    )
    schedules = list(draw_schedules(1, THOUSAND, workloads=WORKLOADS))
    judged = judged_before(KEPT, session, schedules)  # refused if any schedule differs
    report = _report()
    assert len(judged.results) == report["schedules"] > 0
    assert {s.workload for s in schedules} == set(WORKLOADS)  # every workload is drawn


def test_the_chaos_guide_quotes_the_kept_reports_figures() -> None:
    report = _report()
    guide = GUIDE.read_text()
    section = guide[guide.index("## A thousand schedules") :]
    section = section[: section.index("\n## ", 3)]
    figures = re.search(
        r"\*\*(?P<judged>[\d,]+) of the 1,000 judged, (?P<violations>\d+) violations\*\*",
        section,
    )
    assert figures, "the guide's thousand-schedules section states no figures"
    assert int(figures["judged"].replace(",", "")) == report["schedules"]
    assert int(figures["violations"]) == report["violations"]
