"""GET /metrics: the control plane in Prometheus's text format. Each table's figures read
as the overview shows them and its totals as the Tables page does; who may scrape; the
series stay bounded (no label per run, stream or batch); a scrape's statements do not
grow with the tables and runs; the port of its own, without a token."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app
from onceover_backend.services.ingest.transaction import ingest_events
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import Engine

from onceover.bigquery import BigQueryConfig
from onceover.preflight import free_port
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.backend.statements import statements
from tests.backend.test_overview import FRESH, NEVER, STALE, _build

METRICS_TOKEN = "metrics-token-0123456789"
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def samples(text: str) -> Samples:
    """name -> sorted labels -> value, every sample of the scrape."""
    found: Samples = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return found


def of(found: Samples, name: str, **labels: str) -> float | None:
    return found[name].get(tuple(sorted(labels.items())))


def scrape(client: TestClient, token: str = VIEWER) -> Samples:
    answer = client.get("/metrics", headers=bearer(token))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return samples(answer.text)


def test_each_tables_figures_read_as_the_overview_and_the_tables_page_show_them(
    engine: Engine, client: TestClient
) -> None:
    _build(engine)

    # The overview's day and 24 hours hold now: asked either side of the scrape, one of
    # the two answers was computed in the scrape's hour (a test at the hour's turn).
    before = client.get("/api/overview", headers=bearer(VIEWER)).json()
    found = scrape(client)
    after = client.get("/api/overview", headers=bearer(VIEWER)).json()
    tables = client.get("/api/tables", headers=bearer(VIEWER)).json()["data"]

    def agrees(overview: dict[str, Any]) -> bool:
        for row in overview["tables"]:
            table = row["table"]
            expected = {
                ("onceover_table_rows_committed_today", ()): row["rows_committed_today"],
                ("onceover_table_append_requests_24h", (("code", "all"),)): row["requests"],
                ("onceover_table_append_requests_24h", (("code", "ALREADY_EXISTS"),)): row[
                    "already_exists"
                ],
                ("onceover_table_append_requests_24h", (("code", "OUT_OF_RANGE"),)): row[
                    "out_of_range"
                ],
                ("onceover_table_rows_dead_lettered_24h", ()): row["rows_dead_lettered"],
                ("onceover_table_fresh", ()): 1 if row["freshness"] == "fresh" else 0,
            }
            for (name, extra), value in expected.items():
                if of(found, name, table=table, **dict(extra)) != value:
                    return False
        return True

    assert agrees(before) or agrees(after), (before["tables"], dict(found))
    # _build's commits are a month old: every table stale, nothing committed today.
    assert {row["table"] for row in before["tables"]} == {FRESH, STALE, NEVER}
    assert of(found, "onceover_table_fresh", table=FRESH) == 0
    assert of(found, "onceover_table_last_commit_timestamp_seconds", table=FRESH) == (
        f.at(6).timestamp()
    )
    assert of(found, "onceover_table_last_commit_timestamp_seconds", table=NEVER) is None
    assert of(found, "onceover_table_seconds_since_last_commit", table=NEVER) is None
    since = of(found, "onceover_table_seconds_since_last_commit", table=FRESH)
    assert since is not None
    assert since > timedelta(days=20).total_seconds()

    # The newest check touching each table, run-scoped or table-scoped (the overview's).
    assert of(found, "onceover_table_reconciliation", table=FRESH, status="ok") == 1
    assert of(found, "onceover_table_reconciliation", table=FRESH, status="mismatch") == 0
    assert of(found, "onceover_table_reconciliation", table=STALE, status="mismatch") == 1
    assert of(found, "onceover_table_reconciliation", table=NEVER, status="ok") is None

    # The totals over every run, as the Tables page sums them.
    for row in tables:
        table = row["table"]
        assert (
            of(found, "onceover_table_rows_committed_total", table=table) == (row["rows_committed"])
        )
        assert (
            of(found, "onceover_table_batches_committed_total", table=table)
            == (row["batches_committed"])
        )
        assert (
            of(found, "onceover_table_rows_dead_lettered_total", table=table)
            == (row["rows_dead_lettered"])
        )
        for code, key in (("ALREADY_EXISTS", "already_exists"), ("OUT_OF_RANGE", "out_of_range")):
            assert (
                of(found, "onceover_table_append_requests_total", table=table, code=code)
                == (row[key])
            )
        assert of(found, "onceover_runs", table=table, status="failed") == (
            row["runs_by_status"].get("failed", 0)
        )
    assert of(found, "onceover_table_rows_committed_total", table=STALE) == 40
    assert of(found, "onceover_table_append_requests_total", table=FRESH, code="OUT_OF_RANGE") == 1

    # Alerts by rule, the quiet one too; deliveries by status; the newest event.
    assert of(found, "onceover_alerts_firing", rule_id="1", rule="Run failed",
              severity="critical") == 2  # fmt: skip
    assert of(found, "onceover_alerts_firing", rule_id="2", rule="Gaps", severity="warning") == 0
    assert of(found, "onceover_webhook_deliveries", status="pending") == 0
    ingested = of(found, "onceover_events_ingested_total")
    assert ingested is not None
    assert ingested >= 20
    assert of(found, "onceover_ingest_lag_seconds") is not None


def test_the_control_planes_own_latency_and_queues_are_measured(client: TestClient) -> None:
    client.get("/api/runs/nobody", headers=bearer(VIEWER))
    client.get("/api/overview", headers=bearer(VIEWER))

    found = scrape(client)

    by_route = {
        dict(labels)["operation"]: value
        for labels, value in found["onceover_http_request_duration_seconds_count"].items()
    }
    # The route's operation id, never the path: a run's id is no label.
    assert by_route["getRun"] >= 1
    assert by_route["getOverview"] >= 1
    assert not any("nobody" in route for route in by_route)
    assert of(found, "onceover_ingest_waiting_batches") == 0
    assert of(found, "onceover_reconcile_waiting_checks") == 0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Every test here with a metrics token configured too."""
    return settings.model_copy(update={"metrics_token": SecretStr(METRICS_TOKEN)})


def test_who_may_scrape(client: TestClient) -> None:
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=bearer("nobody-issued-this-token")).status_code == 401
    assert client.get("/metrics", headers=bearer(INGEST)).status_code == 403
    for token in (VIEWER, OPERATOR, METRICS_TOKEN):
        assert client.get("/metrics", headers=bearer(token)).status_code == 200
    # The metrics token reads /metrics and nothing else.
    assert client.get("/api/runs", headers=bearer(METRICS_TOKEN)).status_code == 401


def test_the_series_stay_bounded_however_many_runs(engine: Engine, client: TestClient) -> None:
    """Labels name tables, codes, statuses and rules, never a run, stream or batch: 30
    runs into one table add no series to one run's."""
    ingest_events(engine, f.full_run("r0"))
    one = scrape(client)
    for number in range(1, 30):
        ingest_events(engine, f.full_run(f"r{number}"))
    many = scrape(client)

    def series(found: Samples) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {
            (name, labels)
            for name, by_labels in found.items()
            if not name.startswith("onceover_http_request")  # grows with routes asked
            for labels in by_labels
        }

    assert series(many) == series(one)
    label_names = {name for _, labels in series(many) for name, _ in labels}
    assert label_names <= {"table", "code", "status", "rule_id", "rule", "severity"}
    per_table = [s for s in series(many) if dict(s[1]).get("table") == f.TABLE]
    assert len(per_table) <= 40, sorted(per_table)
    assert of(many, "onceover_table_rows_committed_total", table=f.TABLE) == 30 * 100


def test_a_scrapes_statements_do_not_grow_with_tables_and_runs(
    engine: Engine, client: TestClient
) -> None:
    ingest_events(engine, f.full_run("r0"))
    scrape(client)  # the first scrape warms what is cached
    with statements(engine) as few:
        scrape(client)
    for number in range(1, 20):
        events = f.full_run(f"r{number}")
        ingest_events(engine, [e.model_copy(update={"table": f"p.ds.t{number}"}) for e in events])
    with statements(engine) as many:
        scrape(client)
    assert len(many) == len(few) <= 12, [s.sql for s in many]


def test_a_port_of_its_own_serves_the_same_scrape_without_a_token(settings: Settings) -> None:
    port = free_port()
    app = create_app(settings.model_copy(update={"metrics_port": port}), bigquery=BigQueryConfig())
    with TestClient(app) as client:
        client.get("/api/overview", headers=bearer(VIEWER))
        answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert answer.status_code == 200
        found = samples(answer.text)
        assert of(found, "onceover_events_ingested_total") == 0
        assert found["onceover_http_request_duration_seconds_count"]
    with pytest.raises(httpx.TransportError):  # closed with the app
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
