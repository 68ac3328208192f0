"""The suite's tiers: each test's derived from what it starts, its time summed per tier.

A test's tier is never declared twice: it follows from the test's ``browser`` and
``spark`` markers, the fixtures it uses and its folder (``docs/guides/testing.md`` says what
each tier covers and costs). Each tier is a marker too, so one tier runs alone:
``.venv/bin/pytest -m jobs``.

At the end of a run the time of each tier (set-up, call and tear-down of its tests: a
session fixture counts where it is first set up; under pytest-xdist, summed over the
workers) is printed, and added to the JSON in ``$ONCEOVER_TEST_TIMINGS`` when that names
a file (``.ci/run`` prints it in its summary).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

TIERS = {
    "unit": "pure Python: no server, no Spark, no child process of ours",
    "backend": "the control plane in process, on SQLite and on PostgreSQL",
    "localbq": "against the session's local BigQuery, without Spark",
    "localstores": "against the session's object-store stand-ins (S3, Cloud Storage)",
    "sink": "the sink in process, on the session's one shared Spark session",
    "cli": "the onceover command in child processes, without Spark",
    "jobs": "Spark jobs and commands that run them in child processes, each with a JVM",
    "browser": "the dashboard in a real Chromium",
}
TIMINGS_ENV = "ONCEOVER_TEST_TIMINGS"
SLOWEST = "slowest"
SLOWEST_KEPT = 15
_BACKEND = Path(__file__).parents[1] / "backend"
_LOCALSTORES = Path(__file__).parents[1] / "localstores"
_STORES = {"local_s3", "local_gcs"}


def tier_of(item: pytest.Item) -> str:  # noqa: PLR0911 - a return per tier, read as a table
    """The tier of one collected test."""
    if item.get_closest_marker("browser"):
        return "browser"
    fixtures = getattr(item, "fixturenames", ())
    if "spark" in fixtures:
        return "sink"
    if item.get_closest_marker("spark"):  # Spark, but not the shared session's
        return "jobs"
    if "subprocess_env" in fixtures:
        return "cli"
    if "local_bigquery" in fixtures:
        return "localbq"
    if _STORES.intersection(fixtures) or _LOCALSTORES in Path(item.path).parents:
        return "localstores"
    if _BACKEND in Path(item.path).parents:
        return "backend"
    return "unit"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        item.add_marker(tier)
        # Reports carry user properties: under pytest-xdist they reach the controller's
        # clock from the workers that did the collecting.
        item.user_properties.append(("tier", tier))


class TierClock:
    """Adds up the tiers' time; in the process that reports (under pytest-xdist, the
    controller, never a worker)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.tests: Counter[str] = Counter()
        self.per_test: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = str(dict(report.user_properties).get("tier", "unit"))
        self.seconds[tier] += report.duration
        self.per_test[report.nodeid] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests[tier] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.tests:
            return
        terminalreporter.section("time per tier")
        for tier in TIERS:
            if self.tests[tier]:
                terminalreporter.write_line(
                    f"{tier:<8} {self.tests[tier]:>4} tests {self.seconds[tier]:>8.1f} s"
                )
        target = os.environ.get(TIMINGS_ENV)
        if target:
            _add_to(Path(target), self.tests, self.seconds, self.per_test)


def _add_to(
    path: Path, tests: Counter[str], seconds: defaultdict[str, float], per_test: dict[str, float]
) -> None:
    """Add this run's figures to those ``path`` holds: ``make test`` runs pytest several
    times. Under ``SLOWEST`` it keeps the slowest tests of all the runs, so that the
    next cut of CI's time starts from names, not guesses."""
    try:
        figures: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        figures = {}
    for tier in TIERS:
        if tests[tier]:
            known = figures.setdefault(tier, {"tests": 0, "seconds": 0.0})
            known["tests"] += tests[tier]
            known["seconds"] = round(known["seconds"] + seconds[tier], 1)
    ordered: dict[str, Any] = {tier: figures[tier] for tier in TIERS if tier in figures}
    slowest = dict(figures.get(SLOWEST, [])) | {k: round(v, 1) for k, v in per_test.items()}
    ordered[SLOWEST] = sorted(slowest.items(), key=lambda item: -item[1])[:SLOWEST_KEPT]
    path.write_text(json.dumps(ordered, indent=2) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in TIERS.items():
        config.addinivalue_line("markers", f"{name}: tier: {meaning}")
    if not hasattr(config, "workerinput"):  # set in pytest-xdist's workers only
        config.pluginmanager.register(TierClock(), "onceover-tiers")
