"""Two backend replicas on one PostgreSQL, each with its own evaluator and dispatcher
running every 50 ms: every alert transition is made once and delivered once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import AlertTransition, WebhookDelivery
from sqlmodel import Session, select

from onceover.bigquery import BigQueryConfig
from tests.backend import factory as f
from tests.backend.conftest import OPERATOR, TOKENS, bearer
from tests.helpers.waiting import wait_until
from tests.helpers.webhook_receiver import WebhookReceiver

REPLICAS = 2


@pytest.fixture
def replicas(postgres_url: str, tmp_path: Path) -> Iterator[list[TestClient]]:
    upgrade_to_head(postgres_url)
    with ExitStack() as stack:
        clients = []
        for number in range(REPLICAS):
            settings = Settings(
                database_url=postgres_url, tokens=TOKENS, frontend_dist=tmp_path / "none",
                stall_check_interval_s=3600, auto_resume_interval_s=3600,
                reconcile_on_success=False, alert_eval_interval_s=0.05, webhook_poll_s=0.05,
                public_url=f"http://replica-{number}.example",
            )  # fmt: skip
            app = create_app(settings, bigquery=BigQueryConfig())
            clients.append(stack.enter_context(TestClient(app)))
        yield clients


def _burst(apps: list[FastAPI]) -> None:
    """Eight evaluations at once, four on each replica's engine, besides their loops."""
    gate = threading.Barrier(8)

    def one(app: FastAPI) -> None:
        gate.wait()
        evaluate(app.state.engine, "http://burst.example")

    threads = [threading.Thread(target=one, args=(apps[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _settled(apps: list[FastAPI], deliveries: int, timeout_s: float = 30) -> None:
    """Until ``deliveries`` exist and every one of them has succeeded."""

    def statuses() -> list[str]:
        with Session(apps[0].state.engine) as session:
            return [d.status for d in session.exec(select(WebhookDelivery))]

    def settled() -> bool | None:
        now = statuses()
        return (len(now) >= deliveries and set(now) == {"succeeded"}) or None

    # the replicas' loops run on their own schedule
    wait_until(f"{deliveries} deliveries succeeded", settled, timeout_s, seen=statuses)


def test_each_transition_is_delivered_once_by_two_replicas(
    replicas: list[TestClient], tmp_path: Path
) -> None:
    hook = WebhookReceiver()
    hook.up()
    try:
        one, other = replicas
        apps: list[FastAPI] = [one.app, other.app]  # type: ignore[list-item]
        one.post("/api/alert-rules", json={"name": "failed", "kind": "run_failed"},
                 headers=bearer(OPERATOR))  # fmt: skip
        created = other.post("/api/webhooks", json={"name": "hook", "url": hook.url},
                             headers=bearer(OPERATOR))  # fmt: skip
        hook.secret = created.json()["secret"]
        engine = apps[0].state.engine

        ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10)])
        _burst(apps)
        _settled(apps, 1)
        ingest_events(engine, [f.started("r", "a2", 20)])
        _burst(apps)
        _settled(apps, 2)

        # Both replicas are idle now: nothing more to evaluate (None: the other replica
        # held the round) or send.
        assert {evaluate(app.state.engine, "x") for app in apps} <= {0, None}
        assert [app.state.dispatcher.run_once() for app in apps] == [[], []]
        received = hook.all()
        with Session(engine) as session:
            transitions = [t.status for t in session.exec(select(AlertTransition))]
    finally:
        hook.down()

    assert sorted(transitions) == ["firing", "resolved"]
    assert sorted(r.json()["status"] for r in received) == ["firing", "resolved"]
    assert len({r.message_id for r in received}) == 2
    assert all(r.verified for r in received)
