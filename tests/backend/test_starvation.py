"""Background work keeps its pace while BigQuery hangs and ``/api/health`` is flooded.

"Hangs" is the hard case: a listener that accepts connections and never answers
(:mod:`onceover_tools.bench.hanging`), so only the backend's own deadlines end its calls. A
refused connection fails at once and hides what waits on what.

Each wait here has a deadline and fails naming what did not happen; nothing sleeps, and
no rate is asserted (``onceover bench`` measures those).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_backend.services.periodic import every
from onceover_backend.services.reads.health import ClientPacing
from onceover_backend.services.reconciliation.bigquery_counts import Scope, TableCounter
from onceover_tools.bench.hanging import HangingBigQuery

from onceover.bigquery import BigQueryConfig, bigquery_client
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.backend.live import automatic_check, serving
from tests.helpers.local_http import LocalServer, TrackedHandler
from tests.helpers.waiting import wait_until
from tests.helpers.webhook_receiver import WebhookReceiver

RECONCILE_S = 8.0  # deadline of each BigQuery call of a reconciliation
HEALTH_S = 1.0  # deadline of each dependency check of /api/health
FLOOD = 32  # anonymous threads calling /api/health without a pause
# More runs succeed than the request thread pool has threads (anyio's 40): when their
# checks took those threads, ingest stopped until the checks timed out.
RUNS = 48
INGEST_DEADLINE_S = 4.0  # each POST must answer within this
WEBHOOK_DEADLINE_S = 5.0  # from a failed run's events to the receiver's request


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: what is measured here is threads, not the database."""
    url = f"sqlite:///{tmp_path / 'onceover.db'}"
    upgrade_to_head(url)
    return url


@pytest.fixture
def hanging() -> Iterator[HangingBigQuery]:
    with HangingBigQuery() as bigquery:
        yield bigquery


@pytest.fixture
def app(settings: Settings, hanging: HangingBigQuery) -> FastAPI:
    tuned = settings.model_copy(
        update={
            "reconcile_on_success": True,
            "reconcile_timeout_s": RECONCILE_S,
            "reconcile_workers": 2,
            "reconcile_queue": 4,
            "health_timeout_s": HEALTH_S,
            "health_cache_s": 2.0,
            "alert_eval_interval_s": 0.2,
            "webhook_poll_s": 0.05,
            "webhook_timeout_s": 5.0,
        }
    )
    return create_app(tuned, bigquery=hanging.config)


@dataclass
class Flood:
    """``FLOOD`` threads calling ``GET /api/health`` without a token until stopped."""

    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    answers: int = 0
    statuses: set[int] = field(default_factory=set)
    last: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _call(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self.stop.is_set():
                try:
                    response = http.get("/api/health")
                    body = response.json()
                except (httpx.HTTPError, ValueError) as exc:
                    with self._lock:
                        self.errors.append(repr(exc))
                    continue
                with self._lock:
                    self.answers += 1
                    self.statuses.add(response.status_code)
                    self.last = body

    def __enter__(self) -> Flood:
        self._threads = [
            threading.Thread(target=self._call, name=f"health-flood-{n}", daemon=True)
            for n in range(FLOOD)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


def _post(http: httpx.Client, events: list[Any], what: str) -> None:
    try:
        response = http.post("/api/events", json=f.as_json(events), timeout=INGEST_DEADLINE_S)
    except httpx.TimeoutException:
        pytest.fail(f"POST /api/events ({what}) did not answer within {INGEST_DEADLINE_S:g} s")
    assert response.status_code == 200, response.text


def test_ingest_and_webhooks_keep_time_while_bigquery_hangs_and_health_is_flooded(
    app: FastAPI, hanging: HangingBigQuery, hook: WebhookReceiver
) -> None:
    with serving(app) as url:
        operator = httpx.Client(base_url=url, headers=bearer(OPERATOR), timeout=30)
        rule = operator.post(
            "/api/alert-rules",
            json={"name": "load failed", "kind": "run_failed", "severity": "critical"},
        )
        assert rule.status_code == 201, rule.text
        hook_body = {"name": "pager", "url": hook.url, "rule_ids": [rule.json()["id"]]}
        endpoint = operator.post("/api/webhooks", json=hook_body)
        assert endpoint.status_code == 201, endpoint.text
        hook.secret = endpoint.json()["secret"]
        try:
            with Flood(url) as flood, httpx.Client(base_url=url, headers=bearer(INGEST)) as jobs:
                wait_until("the health flood answering", lambda: flood.answers or None, 30)

                # Each POST finishes a run, whose check then hangs on BigQuery.
                for number in range(RUNS):
                    _post(jobs, f.full_run(f"ok-{number}"), f"run ok-{number}")
                # A failed run: the evaluator fires, the dispatcher delivers.
                _post(jobs, [f.started("bad", "a1", 0), f.failed("bad", "a1", 10)], "run bad")
                [delivered] = hook.wait_for(1, timeout_s=WEBHOOK_DEADLINE_S)
                assert delivered.verified
                assert delivered.json()["alerts"][0]["labels"]["run_id"] == "bad"

                # The first run's check ends as an error naming the deadline.
                first = automatic_check(url, VIEWER, "ok-0", RECONCILE_S + 10)
                assert first["status"] == "error"
                assert f"BigQuery did not answer within {RECONCILE_S:g} s" in first["error"]
                # Checks past the workers and the queue are not made, and say so.
                last = automatic_check(url, VIEWER, f"ok-{RUNS - 1}", 10)
                assert last["status"] == "error"
                assert "ONCEOVER_RECONCILE_QUEUE" in last["error"]

                # Health still answers, every caller, degraded, naming BigQuery.
                seen = flood.answers
                wait_until("more health answers", lambda: flood.answers > seen or None, 10)
            assert flood.errors == []
            assert flood.statuses == {503}
            assert flood.last["status"] == "degraded"
            assert flood.last["database"]["status"] == "ok"
            assert flood.last["bigquery"]["status"] == "error"
            assert flood.last["bigquery"]["target"].startswith("local BigQuery REST")
        finally:
            operator.close()
            hanging.close()  # checks still waiting fail at once: the shutdown is quick


def test_concurrent_health_calls_share_one_check_of_each_dependency(
    app: FastAPI, hanging: HangingBigQuery
) -> None:
    callers = 16
    with serving(app) as url, ThreadPoolExecutor(callers) as pool:
        answers = list(
            pool.map(lambda _: httpx.get(f"{url}/api/health", timeout=30), range(callers))
        )
        # One check (one REST connection; gRPC is not tried once REST failed) answered
        # every caller.
        assert hanging.rest.accepted == 1
        assert hanging.grpc.accepted == 0
        bodies = [answer.json() for answer in answers]
        assert {answer.status_code for answer in answers} == {503}
        assert {body["bigquery"]["error"] for body in bodies} == {bodies[0]["bigquery"]["error"]}
        # Asked again within ONCEOVER_HEALTH_CACHE_S: the same answer, growing older;
        # past it, a new check.
        ages: list[float] = []

        def checked_again() -> bool | None:
            shown = httpx.get(f"{url}/api/health", timeout=30).json()["bigquery"]
            if hanging.rest.accepted == 1:
                assert shown["latency_ms"] == bodies[0]["bigquery"]["latency_ms"]
                ages.append(shown["age_s"])
            return hanging.rest.accepted == 2 or None

        wait_until("a second check once the answer is older than the cache", checked_again, 30)
        assert ages == sorted(ages)
        assert ages[-1] > 0


def test_health_answers_one_address_in_turns_and_others_meanwhile() -> None:
    """A flood from one address waits its turns; another address is not behind it; past
    ``max_waiting``, callers from a flooding address are let through, not queued."""

    async def scenario() -> list[str]:
        pacing = ClientPacing(interval_s=0.05, max_waiting=2)
        done: list[str] = []

        async def call(address: str, name: str) -> None:
            await pacing.turn(address)
            done.append(name)

        await asyncio.gather(
            call("10.0.0.1", "a1"),  # its turn: now
            call("10.0.0.1", "a2"),  # waits one interval
            call("10.0.0.1", "a3"),  # two
            call("10.0.0.1", "a4"),  # two are waiting already: through at once
            call("10.0.0.2", "b1"),  # another address: its turn is now
        )
        return done

    assert asyncio.run(scenario()) == ["a1", "a4", "b1", "a2", "a3"]


def test_a_periodic_round_runs_while_the_default_thread_pool_is_busy() -> None:
    """A flood of work on the loop's default executor (where asyncio.to_thread goes)
    cannot hold back a stall sweep or a webhook round."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        busy = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(busy)
        release = threading.Event()
        blocked = loop.run_in_executor(None, release.wait, 30)
        stop = asyncio.Event()
        rounds: list[str] = []

        def work() -> None:
            rounds.append(threading.current_thread().name)
            loop.call_soon_threadsafe(stop.set)

        try:
            await asyncio.wait_for(every(0.01, stop, work, "the test round"), 10)
        finally:
            release.set()
            await blocked
        assert rounds, "the round did not run"
        assert "test-round" in rounds[0]

    asyncio.run(scenario())


# -- a BigQuery that answers table lookups and never answers queries ------------------


class _TablesOnly(TrackedHandler):
    """``tables.get`` answers a schema; every other call (a query) is never answered."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        body = json.dumps(
            {
                "tableReference": {"projectId": "proj-abc", "datasetId": "ds", "tableId": "t"},
                "schema": {"fields": [{"name": "order_id", "type": "INTEGER"}]},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.owner.released.wait(60)


class _QueriesHang(LocalServer):
    handler = _TablesOnly

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def down(self) -> None:
        self.released.set()
        super().down()


def test_a_query_bigquery_never_answers_fails_within_the_deadline() -> None:
    """Queries are retried only within the check's deadline: the client library's own
    job retry (ten minutes) once kept a check going long after it."""
    server = _QueriesHang()
    server.up()
    ended: list[BaseException | None] = []
    try:
        config = BigQueryConfig(f"http://127.0.0.1:{server.port}", f"127.0.0.1:{server.port}")
        counter = TableCounter(bigquery_client(config), timeout_s=1.0)
        scope = Scope("proj-abc.ds.t", "order_id")
        assert counter.columns(scope.table) == {"order_id": "INTEGER"}

        def count() -> None:
            try:
                counter.count(scope)
            except Exception as exc:  # what is asserted below
                ended.append(exc)
            else:
                ended.append(None)

        # A daemon thread: a count that hangs must not hold the test run at exit.
        threading.Thread(target=count, name="count", daemon=True).start()
        [error] = wait_until("the count to end", lambda: ended or None, 20)
    finally:
        server.down()
    assert error is not None
    assert "BigQuery did not answer within 1 s" in str(error)


def test_the_hanging_bigquery_accepts_never_answers_and_closes() -> None:
    with HangingBigQuery() as bigquery:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(str(bigquery.config.rest_endpoint), timeout=0.2)
        assert bigquery.rest.accepted == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(str(bigquery.config.rest_endpoint), timeout=2)
