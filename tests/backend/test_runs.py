"""``GET /api/runs`` filters and pages; ``GET /api/runs/{run_id}`` shows one run whole."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.db import write_transaction
from onceover_backend.services.reads.runs import list_runs
from onceover_backend.tables import Run
from sqlalchemy import Engine, insert
from sqlmodel import Session

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer
from tests.backend.statements import statements


def _list(client: TestClient, **params: Any) -> Any:
    response = client.get("/api/runs", params=params, headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    return response.json()


def _seed(client: TestClient) -> None:
    events: list[ev.Event] = []
    for i in range(5):  # five finished runs, a minute apart
        events += [
            e.model_copy(update={"time": e.time + (f.at(60 * i) - f.T0)})
            for e in f.full_run(f"ok{i}")
        ]
    events += [f.started("bad", "a1", 400), f.failed("bad", "a1", 401, "no table")]
    other = f.started("other", "a1", 500).model_copy(
        update={"table": "p.ds.other", "job": "refunds"}
    )
    events.append(other)
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success


def test_filters_and_pages(client: TestClient) -> None:
    _seed(client)

    everything = _list(client)
    assert everything["count"] == 7
    assert [r["run_id"] for r in everything["data"]][:3] == ["other", "bad", "ok4"]  # newest first

    assert [r["run_id"] for r in _list(client, status="failed")["data"]] == ["bad"]
    both = _list(client, status=["failed", "running"])
    assert {r["run_id"] for r in both["data"]} == {"bad", "other"}
    assert [r["run_id"] for r in _list(client, job="refunds")["data"]] == ["other"]
    assert _list(client, table=f.TABLE)["count"] == 6
    window = _list(client, since=f.at(60).isoformat(), until=f.at(180).isoformat())
    assert [r["run_id"] for r in window["data"]] == ["ok2", "ok1"]

    page = _list(client, status="succeeded", limit=2, offset=2)
    assert page["count"] == 5
    assert [r["run_id"] for r in page["data"]] == ["ok2", "ok1"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_filtered_runs_list_reads_its_page_in_order_not_every_match_sorted(
    engine: Engine,
) -> None:
    """With an index of the filter alone, SQLite read every matching run and sorted
    them all for a page of 50: the succeeded list took twice as long at 10,000,000
    events stored as at 1,000,000 (docs/journal/profiling.md). PostgreSQL plans by its
    statistics, so only SQLite's plan is asked for here."""
    start = f.T0
    with write_transaction(engine) as session:
        session.execute(insert(Run), [
            {"run_id": f"r{i:03d}", "table_id": f"p.ds.t{i % 3}", "job": f"job{i % 2}",
             "status": "failed" if i % 5 == 0 else "succeeded",
             "started_at": start + timedelta(minutes=i)}
            for i in range(60)
        ])  # fmt: skip
    filters: list[tuple[dict[str, Any], list[int]]] = [
        ({"status": ["succeeded"]}, [i for i in range(60) if i % 5 != 0]),
        ({"table": "p.ds.t1"}, [i for i in range(60) if i % 3 == 1]),
        ({"job": "job0"}, [i for i in range(60) if i % 2 == 0]),
    ]
    for where, matching in filters:
        with Session(engine) as session, statements(engine) as sent:
            listed = list_runs(session, limit=4, **where)
        expected = [f"r{i:03d}" for i in reversed(matching)]
        assert [run.run_id for run in listed.data] == expected[:4], where
        assert listed.count == len(expected)
        (page,) = [s for s in sent if "ORDER BY" in s.sql and "LIMIT" in s.sql]
        with engine.connect() as connection:
            plan = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + page.sql, page.parameters)
            steps = [row[3] for row in plan]
        assert "USE TEMP B-TREE FOR ORDER BY" not in steps, (where, steps)


def test_bad_filters_are_422_naming_the_parameter(client: TestClient) -> None:
    cases: list[tuple[dict[str, str | int], str]] = [
        ({"status": "sleeping"}, "status"),
        ({"limit": 0}, "limit"),
        ({"since": "yesterday"}, "since"),
    ]
    for params, name in cases:
        response = client.get("/api/runs", params=params, headers=bearer(VIEWER))
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"][-1] in (name, 0), response.text
        assert name in response.json()["detail"][0]["loc"]


def test_a_run_has_attempts_batches_and_streams(client: TestClient) -> None:
    _seed(client)

    run = client.get("/api/runs/ok0", headers=bearer(VIEWER)).json()

    assert run["run_id"] == "ok0"
    assert run["status"] == "succeeded"
    assert run["table"] == f.TABLE
    assert run["rows_committed"] == 100
    assert [a["attempt_id"] for a in run["attempts"]] == ["a1"]
    assert run["attempts"][0]["spec"]["module"] == "onceover_jobs.load_files"
    assert [(b["batch_id"], b["state"], b["rows"]) for b in run["batches"]] == [
        (0, "committed", 100)
    ]
    assert run["batches"][0]["committed_at"] == "2026-11-01T12:00:06Z"
    assert len(run["streams"]) == 2


def test_a_cdc_runs_batches_show_their_upserts_and_deletes(client: TestClient) -> None:
    """A change data capture write's receipt counts its rows by kind; the intent's counts
    stand until the commit's arrive, and an append's stay null."""
    intent = f.intent("cdc", 0, 1, ["cdc/s1"], 30).model_copy(update={"upserts": 24, "deletes": 6})
    committed = f.committed("cdc", 0, 2, ["cdc/s1"], 30).model_copy(
        update={"upserts": 24, "deletes": 6}
    )
    plain = f.committed("cdc", 1, 3, ["cdc/s2"], 5)
    events = [f.started("cdc", "a1", 0), intent, committed, plain]
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    run = client.get("/api/runs/cdc", headers=bearer(VIEWER)).json()
    assert [(b["batch_id"], b["rows"], b["upserts"], b["deletes"]) for b in run["batches"]] == [
        (0, 30, 24, 6),
        (1, 5, None, None),
    ]


def test_an_unknown_run_is_404(client: TestClient) -> None:
    response = client.get("/api/runs/nope", headers=bearer(VIEWER))

    assert response.status_code == 404
    assert response.json() == {"detail": "no run 'nope'"}


def _write_of_batch(
    run: str, batch: int, table: str, write: str, t: float, rows: int
) -> list[ev.Event]:
    """One foreachBatch write: its intent and commit, as the sink sends them."""
    update = {"table": table, "write": write}
    return [
        f.intent(run, batch, t, [f"{table}/{write}/s"], rows).model_copy(
            update={**update, "id": ev.event_id(run, "intent", batch, table, write)}
        ),
        f.committed(run, batch, t + 1, [f"{table}/{write}/s"], rows).model_copy(
            update={**update, "id": ev.event_id(run, "committed", batch, table, write)}
        ),
    ]


def test_each_write_of_a_foreach_batch_call_is_a_batch_of_its_own(client: TestClient) -> None:
    """A micro-batch that writes the orders table twice and a summary once: three
    writes, each committed on its own, none merged into another."""
    events: list[ev.Event] = [f.started("fb", "a1", 0)]
    events += _write_of_batch("fb", 7, f.TABLE, "0", 1, 30)
    events += _write_of_batch("fb", 7, f.TABLE, "1", 3, 20)
    events += _write_of_batch("fb", 7, "p.ds.summary", "0", 5, 2)
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    run = client.get("/api/runs/fb", headers=bearer(VIEWER)).json()

    assert sorted((b["table"], b["batch_id"], b["write"], b["rows"]) for b in run["batches"]) == [
        (f.TABLE, 7, "0", 30),
        (f.TABLE, 7, "1", 20),
        ("p.ds.summary", 7, "0", 2),
    ]
    assert run["rows_committed"] == 52
    assert {(s["table"], s["write"]) for s in run["streams"]} == {
        (f.TABLE, "0"),
        (f.TABLE, "1"),
        ("p.ds.summary", "0"),
    }


def test_a_write_that_is_no_ordinal_nor_write_id_is_refused_by_name(client: TestClient) -> None:
    for bad in ("01", "../x", "id-", "id-a b"):
        event = f.intent("fb", 1, 1, ["s"], 1).model_dump(mode="json") | {"write": bad}
        response = client.post("/api/events", json=[event], headers=bearer(INGEST))
        assert response.status_code == 422, bad
        assert "write" in response.json()["detail"][0]["loc"], response.text
    assert client.get("/api/runs/fb", headers=bearer(VIEWER)).status_code == 404


def test_a_driver_refused_while_another_runs_the_run_leaves_the_run_to_it(
    client: TestClient,
) -> None:
    """A second driver on the same checkpoint starts, is refused (it wrote nothing) and
    says so; the run is the first driver's: running, then succeeded. Without the flag
    the later-started attempt's failure would be the run's, alerting and resuming it."""
    refused = f.failed("race", "a2", 3, "ConcurrentDriverError: another driver still runs")
    steps: list[tuple[list[ev.Event], str]] = [
        ([f.started("race", "a1", 0), f.heartbeat("race", "a1", 1)], "running"),
        ([f.started("race", "a2", 2), refused.model_copy(update={"refused": True})], "running"),
        ([f.finished("race", "a1", 9, 100)], "succeeded"),
    ]
    for events, status in steps:
        posted = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
        assert posted.is_success, posted.text
        run = client.get("/api/runs/race", headers=bearer(VIEWER)).json()
        assert (run["status"], run["current_attempt_id"]) == (status, "a1"), run
    assert {a["attempt_id"]: a["status"] for a in run["attempts"]} == {
        "a1": "succeeded",
        "a2": "refused",
    }
    assert run["error"] is None


def test_a_run_says_why_this_control_plane_cannot_resume_it(client: TestClient) -> None:
    own = f.started("ours", "a1", 0)  # onceover_jobs.load_files: launched again from here
    script = f.started("script", "driver-1", 0).model_copy(update={"spec": None})
    foreign = f.started("foreign", "a1", 0).model_copy(
        update={"spec": ev.JobSpec(module="billing.nightly", args=[], checkpoint="/tmp/c")}
    )
    ended = [f.failed("ours", "a1", 5), f.failed("script", "driver-1", 5),
             f.failed("foreign", "a1", 5)]  # fmt: skip
    events = [own, script, foreign, *ended]
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    def why(run: str) -> Any:
        answer = client.get(f"/api/runs/{run}", headers=bearer(VIEWER))
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "failed"
        return answer.json()["resume_unavailable"]

    assert why("ours") is None
    assert "reported no launch spec: it was written by a script of its own" in why("script")
    assert why("foreign") == (
        "its job module 'billing.nightly' is not one this control plane launches "
        "(ONCEOVER_LAUNCH_MODULES: onceover_jobs.)"
    )
