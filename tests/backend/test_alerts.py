"""Alert rules over the stored data: which conditions fire, which do not, for how long,
and how they resolve. Rounds are run here by calling the evaluator with a clock."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient
from onceover_backend.models import AlertRuleCreate
from onceover_backend.services.alerts import rules
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import Alert, AlertTransition, Reconciliation
from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.backend import factory as f
from tests.backend.conftest import OPERATOR, VIEWER, bearer

DASHBOARD = "http://onceover.example"


def _rule(engine: Engine, kind: str, **fields: Any) -> int:
    created = rules.create(engine, AlertRuleCreate(name=kind, kind=kind, **fields))
    return created.id


def _round(engine: Engine, now: datetime) -> int:
    made = evaluate(engine, DASHBOARD, now)
    assert made is not None
    return made


def _alerts(engine: Engine) -> list[tuple[str, str | None, str]]:
    with Session(engine) as session:
        rows = session.exec(select(Alert).order_by(Alert.id)).all()  # type: ignore[arg-type]
        return [(a.labels["kind"], a.run_id, a.state) for a in rows]


def _transitions(engine: Engine) -> list[tuple[str, bool]]:
    with Session(engine) as session:
        rows = session.exec(select(AlertTransition).order_by(AlertTransition.id)).all()  # type: ignore[arg-type]
        return [(t.status, t.repeat) for t in rows]


def test_an_out_of_range_answer_fires_and_already_exists_under_its_threshold_does_not(
    engine: Engine,
) -> None:
    _rule(engine, "out_of_range")
    _rule(engine, "already_exists_rate", params={"threshold": 5})  # per minute
    ingest_events(engine, f.full_run("clean"))  # one ALREADY_EXISTS: deduplication at work
    ingest_events(engine, [f.started("gap", "a1", 0), f.out_of_range("gap", "gap/s1", 30, 7)])

    assert _round(engine, f.at(60)) == 1

    assert _alerts(engine) == [("out_of_range", "gap", "firing")]
    with Session(engine) as session:
        alert = session.exec(select(Alert)).one()
        assert alert.value == 1
        assert "OUT_OF_RANGE" in alert.summary
        assert "gap" in alert.summary
        assert alert.labels == {
            "alertname": "out_of_range", "kind": "out_of_range", "severity": "warning",
            "rule_id": alert.labels["rule_id"], "run_id": "gap", "table": f.TABLE, "job": "orders",
        }  # fmt: skip
    # The window (5 min by default) moves past the answer: resolved.
    assert _round(engine, f.at(30 + 6 * 60)) == 1
    assert _alerts(engine) == [("out_of_range", "gap", "resolved")]
    assert _transitions(engine) == [("firing", False), ("resolved", False)]


def test_already_exists_above_its_share_fires(engine: Engine) -> None:
    _rule(engine, "already_exists_rate", params={"threshold": 0.4, "per": "share"})
    ingest_events(engine, f.full_run("r"))  # 1 of 3 requests: 33%
    assert _round(engine, f.at(60)) == 0
    ingest_events(engine, [f.already_exists("r", "r/s2", 5, 0, 50)])  # 2 of 4: 50%
    assert _round(engine, f.at(61)) == 1
    with Session(engine) as session:
        alert = session.exec(select(Alert)).one()
        assert alert.value == 0.5
        assert "50.0% of requests" in alert.summary


def test_error_rate_counts_other_codes_only(engine: Engine) -> None:
    _rule(engine, "error_rate", params={"threshold": 1, "window_s": 60})
    ingest_events(engine, f.full_run("r"))
    ingest_events(engine, [f.append_error("r", "r/s1", 2, "UNAVAILABLE")])
    assert _round(engine, f.at(3)) == 0  # 1 per minute is not above 1
    ingest_events(engine, [f.append_error("r", "r/s2", 3, "INTERNAL")])
    assert _round(engine, f.at(4)) == 1
    assert _alerts(engine) == [("error_rate", "r", "firing")]


def test_a_failed_run_fires_after_its_for_duration_and_resolves_when_it_runs_again(
    engine: Engine,
) -> None:
    _rule(engine, "run_failed", for_s=60, severity="critical")
    ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10, "driver died")])

    assert _round(engine, f.at(20)) == 0
    assert _alerts(engine) == [("run_failed", "r", "pending")]
    assert _round(engine, f.at(80)) == 1
    assert _alerts(engine) == [("run_failed", "r", "firing")]
    assert _round(engine, f.at(90)) == 0  # still failed: no repeat before its interval

    ingest_events(engine, [f.started("r", "a2", 100), f.finished("r", "a2", 110, rows=5)])
    assert _round(engine, f.at(120)) == 1
    assert _alerts(engine) == [("run_failed", "r", "resolved")]
    assert _transitions(engine) == [("firing", False), ("resolved", False)]


def test_a_condition_that_clears_within_its_for_duration_tells_nobody(engine: Engine) -> None:
    _rule(engine, "run_failed", for_s=300)
    ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10)])
    _round(engine, f.at(20))
    ingest_events(engine, [f.started("r", "a2", 30)])
    assert _round(engine, f.at(40)) == 0
    assert _alerts(engine) == [("run_failed", "r", "inactive")]
    assert _transitions(engine) == []


def test_a_firing_alert_repeats_at_its_interval(engine: Engine) -> None:
    _rule(engine, "run_failed", repeat_interval_s=600)
    ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10)])
    _round(engine, f.at(20))
    _round(engine, f.at(20 + 599))
    _round(engine, f.at(20 + 600))
    assert _transitions(engine) == [("firing", False), ("firing", True)]


def test_scope_limits_a_rule_to_one_job_or_table(engine: Engine) -> None:
    _rule(engine, "run_failed", scope="job", scope_value="other-job")
    _rule(engine, "run_failed", scope="table", scope_value=f.TABLE)
    ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10)])
    _round(engine, f.at(20))
    with Session(engine) as session:
        rules = [a.labels["rule_id"] for a in session.exec(select(Alert))]
    assert len(rules) == 1


def test_stalled_runs_and_orphan_streams(engine: Engine) -> None:
    _rule(engine, "run_stalled", params={"silent_s": 120})
    _rule(engine, "orphan_streams", params={"older_than_s": 600})
    ingest_events(engine, [f.started("r", "a1", 0), f.created("r", "r/s1", 1)])
    ingest_events(engine, [f.acked("r", "r/s1", 2, 0, 10), f.finalized("r", "r/s1", 3, 10)])
    ingest_events(engine, f.full_run("done"))  # its streams are committed: no orphans

    _round(engine, f.at(60))
    assert _alerts(engine) == []
    _round(engine, f.at(700))
    assert sorted(_alerts(engine)) == [
        ("orphan_streams", "r", "firing"), ("run_stalled", "r", "firing")
    ]  # fmt: skip


def test_a_mismatched_reconciliation_fires_until_a_later_check_is_ok(engine: Engine) -> None:
    _rule(engine, "reconciliation", params={"duplicates_only": True})
    ingest_events(engine, f.full_run("r"))

    def check(status: str, duplicates: int) -> None:
        with Session(engine) as session:
            session.add(Reconciliation(
                scope="run", run_id="r", table_id=f.TABLE, status=status, expected_rows=100,
                actual_rows=100 + duplicates, distinct_keys=100, duplicate_key_count=duplicates,
                missing_rows=0, trigger="api", actor="t", checked_at=f.at(100), duration_ms=1,
            ))  # fmt: skip
            session.commit()

    check("mismatch", 0)  # rows missing, no duplicates: not this rule's business
    assert _round(engine, f.at(120)) == 0
    check("mismatch", 3)
    assert _round(engine, f.at(130)) == 1
    with Session(engine) as session:
        assert "3 duplicated" in session.exec(select(Alert)).one().summary
    check("ok", 0)
    assert _round(engine, f.at(140)) == 1
    assert _alerts(engine) == [("reconciliation", "r", "resolved")]


def test_deleting_a_rule_resolves_its_firing_alerts(engine: Engine) -> None:
    rule_id = _rule(engine, "run_failed")
    ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10)])
    _round(engine, f.at(20))

    rules.delete(engine, rule_id)
    assert _round(engine, f.at(30)) == 1

    assert _alerts(engine) == [("run_failed", "r", "resolved")]
    with Session(engine) as session:
        last = session.exec(select(AlertTransition).where(AlertTransition.number == 2)).one()
        assert "disabled or deleted" in last.summary


def test_rules_api_validates_per_kind_and_only_operators_change_rules(client: TestClient) -> None:
    body = {"name": "gaps", "kind": "out_of_range", "params": {"per": "share"}}
    refused = client.post("/api/alert-rules", json=body, headers=bearer(OPERATOR))
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "params.per"]
    assert "already_exists_rate, error_rate" in refused.json()["detail"][0]["msg"]

    no_threshold = {"name": "dedup", "kind": "already_exists_rate"}
    refused = client.post("/api/alert-rules", json=no_threshold, headers=bearer(OPERATOR))
    assert refused.json()["detail"][0]["loc"] == ["body", "params.threshold"]
    scoped = {"name": "s", "kind": "run_failed", "scope": "job"}
    refused = client.post("/api/alert-rules", json=scoped, headers=bearer(OPERATOR))
    assert refused.json()["detail"][0]["loc"] == ["body", "scope_value"]

    assert client.post("/api/alert-rules", json=body, headers=bearer(VIEWER)).status_code == 403
    good = {"name": "gaps", "kind": "out_of_range", "severity": "critical", "for_s": 30}
    created = client.post("/api/alert-rules", json=good, headers=bearer(OPERATOR))
    assert created.status_code == 201, created.text
    rule = created.json()
    assert rule["repeat_interval_s"] == 4 * 3600

    changed = client.put(
        f"/api/alert-rules/{rule['id']}", json={**good, "enabled": False}, headers=bearer(OPERATOR)
    )
    assert changed.json()["enabled"] is False
    listed = client.get("/api/alert-rules", headers=bearer(VIEWER)).json()
    assert [r["name"] for r in listed["data"]] == ["gaps"]
    assert (
        client.delete(f"/api/alert-rules/{rule['id']}", headers=bearer(OPERATOR)).status_code == 204
    )
    assert client.get(f"/api/alert-rules/{rule['id']}", headers=bearer(VIEWER)).status_code == 404
    assert client.get("/api/alert-rules", headers=bearer(VIEWER)).json()["count"] == 0


def test_alerts_api_shows_current_state_and_history(client: TestClient, engine: Engine) -> None:
    client.app.state.settings.public_url = DASHBOARD  # type: ignore[attr-defined]
    _rule(engine, "run_failed")
    ingest_events(engine, [f.started("r/1", "a1", 0), f.failed("r/1", "a1", 10)])
    _round(engine, f.at(20))

    current = client.get("/api/alerts?state=firing", headers=bearer(VIEWER)).json()
    assert current["count"] == 1
    alert = current["data"][0]
    assert alert["generator_url"] == f"{DASHBOARD}/runs/r%2F1"
    ingest_events(engine, [f.started("r/1", "a2", 30)])
    _round(engine, f.at(40))

    history = client.get("/api/alerts/history?run_id=r/1", headers=bearer(VIEWER)).json()
    assert [t["status"] for t in history["data"]] == ["resolved", "firing"]
    assert {t["fingerprint"] for t in history["data"]} == {alert["fingerprint"]}
    detail = client.get(f"/api/alerts/{alert['id']}", headers=bearer(VIEWER)).json()
    assert detail["state"] == "resolved"
    assert [t["number"] for t in detail["history"]] == [2, 1]
    assert client.get("/api/alerts?state=firing", headers=bearer(VIEWER)).json()["count"] == 0
