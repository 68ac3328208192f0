"""Rows BigQuery refused and the sink set aside in a dead-letter table: stored once,
counted once per batch in the run and table totals, and alerted on (a real webhook
receiver verifies each delivery). Reconciling them is in test_reconciliation.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.models import AlertRuleCreate
from onceover_backend.services.alerts import rules
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_backend.tables import Alert, Batch, Event, Reconciliation, Run, Stream
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.helpers.waiting import wait_until
from tests.helpers.webhook_receiver import WebhookReceiver

DLQ = "onceover-local.ds.orders_dead_letters"
DASHBOARD = "http://dashboard.example"
TOO_LONG = "value too long for STRING(10)"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    settings.webhook_poll_s = 0.05
    settings.webhook_backoff_s = 0.3
    settings.public_url = DASHBOARD
    return settings


def _post(client: TestClient, events: Sequence[ev.Event]) -> dict[str, Any]:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _get(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params, headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    return response.json()


def set_aside_run(run: str = "r1") -> list[ev.Event]:
    """One attempt: batch 0 commits 100 rows to the table and sets 3 aside; batch 1 sets
    nothing aside. Task attempt 0 of partition 0 had a request refused (2 rows), was
    retried as attempt 1, which named the same rows again, then a third row."""
    s1, s2 = f"{run}/s1", f"{run}/s2"
    first = [(17, "order-17", "note", TOO_LONG), (18, "order-18", "note", TOO_LONG)]
    third = [(60, "order-60", "amount", "out of NUMERIC(5, 2) range")]
    aside: dict[str, Any] = {
        "dead_lettered": 3, "dead_letter_table": DLQ, "dead_letter_streams": [f"{run}/dlq0"]
    }  # fmt: skip
    return [
        f.started(run, "a1", 0),
        f.rejected(run, s1, 1, 0, first, dead_letter_table=DLQ, attempt=0),
        f.rejected(run, s1, 2, 0, first, dead_letter_table=DLQ, attempt=1),
        f.rejected(run, s1, 3, 40, third, dead_letter_table=DLQ, attempt=1),
        f.intent(run, 0, 4, [s1, s2], 50, **aside),
        f.committed(run, 0, 5, [s1, s2], 50, **aside),
        f.intent(run, 1, 6, [f"{run}/s3"], 20),
        f.committed(run, 1, 7, [f"{run}/s3"], 20),
        f.finished(run, "a1", 8, 120),
    ]


def test_rejections_and_set_aside_batches_are_stored_once(
    client: TestClient, engine: Engine
) -> None:
    events = set_aside_run()

    first = _post(client, events)
    again = _post(client, events)

    assert first == {"received": 9, "stored": 9, "duplicates": 0, "run_ids": ["r1"]}
    assert again == {"received": 9, "stored": 0, "duplicates": 9, "run_ids": []}
    with Session(engine) as session:
        stored = session.exec(
            select(Event.type, func.count()).group_by(Event.type).order_by(Event.type)
        ).all()
        assert [tuple(row) for row in stored] == [
            ("batch_committed", 2), ("batch_intent", 2), ("rows_rejected", 3),
            ("run_finished", 1), ("run_started", 1),
        ]  # fmt: skip
        body = session.exec(select(Event.body).where(Event.type == "rows_rejected")).first()
        assert body is not None
        assert body["dead_letter_table"] == DLQ
        assert body["samples"][0] == {
            "offset": 17, "key": "order-17", "column": "note", "reason": TOO_LONG
        }  # fmt: skip
        batch = session.exec(select(Batch).where(Batch.batch_id == 0)).one()
        assert (batch.rows, batch.dead_lettered_rows, batch.dead_letter_table) == (100, 3, DLQ)
        assert batch.dead_letter_streams == [
            {"stream": "r1/dlq0", "rows": 3, "bytes": 0, "partition": 0, "attempt": None}
        ]
        run = session.get(Run, "r1")
        assert run is not None
        assert (run.rows_committed, run.rows_dead_lettered, run.rejected_requests) == (120, 3, 3)
        # the dead-letter stream is committed with its batch, on the dead-letter table
        dead_letters = session.exec(select(Stream).where(Stream.name == "r1/dlq0")).one()
        assert (dead_letters.table_id, dead_letters.stream_type, dead_letters.state) == (
            DLQ, "PENDING", "committed"
        )  # fmt: skip


def test_the_run_counts_each_batch_once_and_shows_the_latest_rows_refused(
    client: TestClient,
) -> None:
    events = set_aside_run()
    _post(client, events)
    # The batch's commit reported again, then a replay found it committed (resolved):
    # new events (new ids), the same batch.
    recommitted = events[5].model_copy(update={"id": ev.event_id("r1", "again"), "time": f.at(9)})
    resolved = f.committed("r1", 0, 10, ["r1/s1", "r1/s2"], 50, resolved=True,
                           dead_lettered=3, dead_letter_table=DLQ)  # fmt: skip
    assert _post(client, [recommitted, resolved])["stored"] == 2

    run = _get(client, "/api/runs/r1")

    assert (run["rows_committed"], run["rows_dead_lettered"]) == (120, 3)  # not 6, not 9
    assert (run["dead_letter_table"], run["rejected_requests"]) == (DLQ, 3)
    assert run["batches_committed"] == 2
    batches = {b["batch_id"]: b for b in run["batches"]}
    assert (batches[0]["rows"], batches[0]["dead_lettered_rows"]) == (100, 3)
    assert batches[0]["resolved"] is True
    assert batches[0]["dead_letter_streams"] == [
        {"stream": "r1/dlq0", "rows": 3, "bytes": 0, "partition": 0, "attempt": None}
    ]
    assert (batches[1]["dead_lettered_rows"], batches[1]["dead_letter_table"]) == (0, None)
    # Newest first; rows 17 and 18, named by both task attempts, are shown once each.
    assert [(r["offset"], r["key"], r["column"], r["reason"], r["attempt"])
            for r in run["rejections"]] == [
        (60, "order-60", "amount", "out of NUMERIC(5, 2) range", 1),
        (17, "order-17", "note", TOO_LONG, 1),
        (18, "order-18", "note", TOO_LONG, 1),
    ]  # fmt: skip
    assert {(r["partition"], r["batch_id"], r["dead_letter_table"]) for r in run["rejections"]} == {
        (0, 0, DLQ)
    }
    stream = next(s for s in run["streams"] if s["name"] == "r1/s1")
    assert stream["last_error"] == (
        f"1 row(s) rejected at offset 40 (set aside in {DLQ}): out of NUMERIC(5, 2) range"
    )
    assert run["write_requests"] == {}  # refused requests are not append answers

    listed = _get(client, "/api/runs")["data"]
    assert [(r["run_id"], r["rows_dead_lettered"], r["rejected_requests"]) for r in listed] == [
        ("r1", 3, 3)
    ]


def test_a_set_aside_batch_not_yet_committed_counts_nothing(client: TestClient) -> None:
    events = [e for e in set_aside_run() if not isinstance(e, ev.BatchCommitted | ev.RunFinished)]
    _post(client, events)

    run = _get(client, "/api/runs/r1")

    assert (run["rows_committed"], run["rows_dead_lettered"]) == (0, 0)
    assert run["batches"][0]["dead_lettered_rows"] == 3  # what the intent says it will set aside


def test_table_totals_add_up_every_run(client: TestClient) -> None:
    _post(client, set_aside_run("r1"))
    _post(client, set_aside_run("r2"))
    _post(client, f.full_run("clean"))

    (table,) = _get(client, "/api/tables")["data"]

    assert (table["table"], table["rows_committed"]) == (f.TABLE, 120 + 120 + 100)
    assert (table["rows_dead_lettered"], table["rejected_requests"]) == (6, 6)


def test_rows_that_failed_the_task_are_shown_without_a_dead_letter_table(
    client: TestClient,
) -> None:
    refused = f.rejected("r1", "r1/s1", 2, 0, [(3, None, "id", "NULL in REQUIRED column")],
                         dead_letter_table=None)  # fmt: skip
    _post(client, [f.started("r1", "a1", 0), refused, f.failed("r1", "a1", 3, "rows refused")])

    run = _get(client, "/api/runs/r1")

    assert (run["rows_dead_lettered"], run["dead_letter_table"], run["rejected_requests"]) == (
        0, None, 1
    )  # fmt: skip
    assert [(r["offset"], r["key"], r["dead_letter_table"]) for r in run["rejections"]] == [
        (3, None, None)
    ]
    stream = run["streams"][0]
    assert stream["last_error"] == (
        "1 row(s) rejected at offset 0 (no dead-letter table: the task fails): "
        "NULL in REQUIRED column"
    )


def _rule(client: TestClient, **fields: Any) -> dict[str, Any]:
    body = {"name": "rows set aside", "kind": "rows_dead_lettered", **fields}
    response = client.post("/api/alert-rules", json=body, headers=bearer(OPERATOR))
    assert response.status_code == 201, response.text
    rule: dict[str, Any] = response.json()
    return rule


def test_a_rows_dead_lettered_rule_takes_a_window_and_threshold_only(client: TestClient) -> None:
    refused = client.post(
        "/api/alert-rules",
        json={"name": "x", "kind": "rows_dead_lettered", "params": {"per": "share"}},
        headers=bearer(OPERATOR),
    )
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "params.per"]

    rule = _rule(client, params={"window_s": 600, "threshold": 5})

    assert (rule["kind"], rule["params"]["window_s"], rule["params"]["threshold"]) == (
        "rows_dead_lettered", 600, 5
    )  # fmt: skip


def _alerts(engine: Engine) -> list[tuple[str | None, str, float | None]]:
    with Session(engine) as session:
        return [(a.run_id, a.state, a.value) for a in session.exec(select(Alert))]


def test_rows_set_aside_fire_above_the_threshold_and_resolve_as_the_window_moves_on(
    client: TestClient, engine: Engine
) -> None:
    _rule(client, params={"threshold": 3})  # above 3 rows
    _rule(client, scope="job", scope_value="other-job")  # another job's runs only
    _post(client, set_aside_run("r1"))  # 3 rows at t=5: not above 3

    assert evaluate(engine, DASHBOARD, f.at(60)) == 0
    assert _alerts(engine) == []

    more = f.committed("r1", 2, 70, ["r1/s4"], 10, dead_lettered=2, dead_letter_table=DLQ)
    _post(client, [more])
    assert evaluate(engine, DASHBOARD, f.at(80)) == 1
    assert _alerts(engine) == [("r1", "firing", 5)]

    # Five minutes (the default window) after the last batch set rows aside: resolved.
    assert evaluate(engine, DASHBOARD, f.at(70 + 6 * 60)) == 1
    assert _alerts(engine) == [("r1", "resolved", 5)]


def test_rows_set_aside_are_delivered_firing_then_resolved_signed(
    app: FastAPI, client: TestClient, engine: Engine, hook: WebhookReceiver
) -> None:
    rule = _rule(client, severity="critical")
    endpoint = client.post(
        "/api/webhooks",
        json={"name": "pager", "url": hook.url, "rule_ids": [rule["id"]]},
        headers=bearer(OPERATOR),
    ).json()
    hook.secret = endpoint["secret"]
    _post(client, set_aside_run("r1"))

    assert evaluate(engine, DASHBOARD, f.at(60)) == 1
    [fired] = hook.wait_for(1)
    assert evaluate(engine, DASHBOARD, f.at(5 + 6 * 60)) == 1
    fired, resolved = hook.wait_for(2)
    assert evaluate(engine, DASHBOARD, f.at(5 + 7 * 60)) == 0

    def delivered() -> list[dict[str, Any]] | None:
        found = client.get(
            f"/api/webhooks/{endpoint['id']}/deliveries", headers=bearer(VIEWER)
        ).json()["data"]
        return found if all(d["status"] == "succeeded" for d in found) else None

    assert len(wait_until("both deliveries succeeded", delivered, 30)) == 2
    assert app.state.dispatcher.run_once() == []  # nothing left to send
    assert len(hook.all()) == 2
    assert fired.verified
    assert resolved.verified
    alert = fired.json()["alerts"][0]
    assert (fired.json()["status"], alert["labels"]["kind"], alert["labels"]["run_id"]) == (
        "firing", "rows_dead_lettered", "r1"
    )  # fmt: skip
    assert alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["value"] == "3"
    assert alert["annotations"]["summary"].startswith(
        f"3 row(s) BigQuery refused were set aside in {DLQ} by 1 batch(es) of run r1 "
        f"(job orders, table {f.TABLE}) committed in the last 5 min"
    )
    assert alert["generatorURL"] == f"{DASHBOARD}/runs/r1"
    done = resolved.json()["alerts"][0]
    assert (resolved.json()["status"], done["fingerprint"]) == ("resolved", alert["fingerprint"])


def test_a_reconciliation_mismatched_by_its_dead_letter_table_says_so(
    client: TestClient, engine: Engine
) -> None:
    rules.create(engine, AlertRuleCreate(name="drift", kind="reconciliation"))
    _post(client, set_aside_run("r1"))
    with Session(engine) as session:
        session.add(Reconciliation(
            scope="run", run_id="r1", table_id=f.TABLE, status="mismatch", expected_rows=120,
            actual_rows=120, distinct_keys=120, duplicate_key_count=0, missing_rows=0,
            rows_set_aside=3, dead_letter_table=DLQ, rows_in_dead_letter_table=2,
            trigger="api", actor="t", checked_at=f.at(20), duration_ms=1,
        ))  # fmt: skip
        session.commit()

    assert evaluate(engine, DASHBOARD, f.at(30)) == 1

    with Session(engine) as session:
        summary = session.exec(select(Alert.summary)).one()
    assert summary.endswith(
        f"expected 120 rows, BigQuery holds 120 (120 distinct keys, 0 duplicated, 0 missing); "
        f"3 rows set aside, 2 in the dead-letter table {DLQ}"
    )
