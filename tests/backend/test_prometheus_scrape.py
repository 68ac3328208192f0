"""A real Prometheus scrapes the control plane: its query API answers each table's figures
as /api/overview shows them; the shipped alert rules load, evaluate and fire on what the
control plane holds; every query of the shipped Grafana board is one Prometheus runs and,
for the tables, answers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from onceover_backend.services.ingest.transaction import ingest_events
from sqlalchemy import Engine

from tests.backend import factory as f
from tests.backend.conftest import VIEWER, bearer
from tests.backend.live import serving
from tests.backend.test_overview import FRESH, NEVER, STALE, _build, _moved
from tests.conftest import REPO_ROOT
from tests.helpers.prometheus_server import Prometheus, binary, prometheus
from tests.helpers.waiting import wait_until

RULES = REPO_ROOT / "docker" / "prometheus" / "alerts.yml"
BOARD = REPO_ROOT / "docker" / "grafana" / "dashboards" / "onceover.json"


@pytest.fixture
def database_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    """SQLite alone: what is checked here is Prometheus's reading, the same on either."""
    path = tmp_path / "onceover.db"
    source, copy = sqlite3.connect(migrated_sqlite), sqlite3.connect(path)
    with closing(source), closing(copy):
        source.backup(copy)
    return f"sqlite:///{path}"


@pytest.fixture
def scraped(app: FastAPI, engine: Engine, tmp_path: Path) -> Iterator[tuple[str, Prometheus]]:
    """_build's tables, one of them loaded just now too, served and scraped."""
    _build(engine)
    ingest_events(engine, _moved(f.full_run("today"), by=datetime.now(UTC) - f.T0))
    with (
        serving(app) as url,
        prometheus(
            tmp_path / "prometheus", url.removeprefix("http://"), bearer=VIEWER, rule_files=[RULES]
        ) as server,
    ):
        wait_until(
            "a first scrape with the tables",
            lambda: server.query("onceover_table_fresh") or None,
            60,
            every_s=0.2,
            seen=lambda: server.get("/api/v1/targets"),
        )
        yield url, server


def _by_table(vector: list[dict[str, Any]], **labels: str) -> dict[str, float]:
    return {
        sample["metric"]["table"]: float(sample["value"][1])
        for sample in vector
        if all(sample["metric"].get(k) == v for k, v in labels.items())
    }


def test_prometheus_answers_each_tables_figures_as_the_overview_shows_them(
    scraped: tuple[str, Prometheus],
) -> None:
    url, server = scraped
    [up] = server.query('up{job="onceover"}')
    assert up["value"][1] == "1"

    def agree() -> dict[str, Any] | None:
        overview = httpx.get(f"{url}/api/overview", headers=bearer(VIEWER), timeout=10).json()
        rows = {row["table"]: row for row in overview["tables"]}
        shown = {
            "rows today": {t: r["rows_committed_today"] for t, r in rows.items()},
            "requests": {t: r["requests"] for t, r in rows.items()},
            "ALREADY_EXISTS": {t: r["already_exists"] for t, r in rows.items()},
            "OUT_OF_RANGE": {t: r["out_of_range"] for t, r in rows.items()},
            "set aside": {t: r["rows_dead_lettered"] for t, r in rows.items()},
            "fresh": {t: int(r["freshness"] == "fresh") for t, r in rows.items()},
            "newest check": {
                t: r["reconciliation"]["status"] for t, r in rows.items() if r["reconciliation"]
            },
        }
        window = server.query("onceover_table_append_requests_24h")
        checks = server.query("onceover_table_reconciliation == 1")
        answered = {
            "rows today": _by_table(server.query("onceover_table_rows_committed_today")),
            "requests": _by_table(window, code="all"),
            "ALREADY_EXISTS": _by_table(window, code="ALREADY_EXISTS"),
            "OUT_OF_RANGE": _by_table(window, code="OUT_OF_RANGE"),
            "set aside": _by_table(server.query("onceover_table_rows_dead_lettered_24h")),
            "fresh": _by_table(server.query("onceover_table_fresh")),
            "newest check": {s["metric"]["table"]: s["metric"]["status"] for s in checks},
        }
        # A scrape a second old may predate the hour's turn: asked again until it agrees.
        return shown if answered == shown else None

    shown = wait_until("Prometheus's answers agreeing with /api/overview", agree, 30, every_s=0.5)
    assert set(shown["rows today"]) == {FRESH, STALE, NEVER}
    assert shown["rows today"][FRESH] == 100  # the run loaded just now
    assert shown["fresh"] == {FRESH: 1, STALE: 0, NEVER: 0}
    assert shown["newest check"] == {FRESH: "ok", STALE: "mismatch"}


def test_the_shipped_alert_rules_load_evaluate_and_fire(scraped: tuple[str, Prometheus]) -> None:
    _, server = scraped

    def evaluated() -> list[dict[str, Any]] | None:
        groups = server.get("/api/v1/rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        return rules if rules and all(r["health"] == "ok" for r in rules) else None

    rules = wait_until("every rule evaluated", evaluated, 30, every_s=0.5,
                       seen=lambda: server.get("/api/v1/rules"))  # fmt: skip
    assert len(rules) == 9

    def active() -> dict[tuple[str, str], str] | None:
        alerts = server.get("/api/v1/alerts")["alerts"]
        states = {(a["labels"]["alertname"], a["labels"].get("table", "")): a["state"]
                  for a in alerts}  # fmt: skip
        wanted = {("OnceoverReconciliationMismatch", STALE), ("OnceoverRunsNeedAttention", NEVER)}
        return states if wanted <= set(states) else None

    states = wait_until("the alerts the stored state calls for", active, 30, every_s=0.5)
    # No `for`: firing at once. A minute's `for`: pending first.
    assert states[("OnceoverReconciliationMismatch", STALE)] == "firing"
    assert states[("OnceoverRunsNeedAttention", NEVER)] in ("pending", "firing")
    assert ("OnceoverReconciliationMismatch", FRESH) not in states  # its newest check is ok
    assert ("OnceoverControlPlaneDown", "") not in states


def test_every_query_of_the_grafana_board_runs_and_the_tables_answer(
    scraped: tuple[str, Prometheus],
) -> None:
    _, server = scraped
    board = json.loads(BOARD.read_text())
    assert board["templating"]["list"][0]["name"] == "table"
    tables_query = board["templating"]["list"][0]["definition"]
    assert tables_query == "label_values(onceover_table_rows_committed_total, table)"
    assert {s["metric"]["table"] for s in server.query("onceover_table_rows_committed_total")} == {
        FRESH,
        STALE,
        NEVER,
    }

    targets = [
        (panel["title"], target["expr"].replace("$table", ".*"))
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
    assert len(targets) >= 15
    answered = {title: server.query(expr) for title, expr in targets}  # each one runs
    glance = [
        server.query(target["expr"].replace("$table", ".*"))
        for panel in board["panels"]
        if panel["title"] == "Tables at a glance"
        for target in panel["targets"]
    ]
    assert all(vector for vector in glance[:5]), glance
    assert answered["Freshness (seconds since the last commit)"]
    assert answered["Runs needing a look"]


def test_promtool_accepts_the_shipped_rules_and_scrape_config(tmp_path: Path) -> None:
    import subprocess

    rules = subprocess.run([binary("promtool"), "check", "rules", str(RULES)],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 9 rules found" in rules.stdout
    # The Compose config names the rules where the container mounts them: checked with
    # that one path pointed at the file here.
    config = (REPO_ROOT / "docker" / "prometheus" / "prometheus.yml").read_text()
    local = tmp_path / "prometheus.yml"
    local.write_text(config.replace("/etc/prometheus/onceover-alerts.yml", str(RULES)))
    checked = subprocess.run([binary("promtool"), "check", "config", str(local)],
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
