"""Reconciliation against the real local BigQuery: what the control plane recorded as
committed (from events) against the rows a table holds, changed by hand between checks.

The rows are put in with DML, as a data engineer fixing things by hand would; the
events are those a job sends (tests/jobs/test_reconcile_job.py runs the real job).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app
from onceover_backend.services.reconciliation.runner import Reconciler

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from onceover.key_checksum import BucketTally, key_bucket, key_checksum, key_hash
from onceover.preflight import free_port
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer

KEY = "order_id"
STAMPED_SCHEMA = [
    bigquery.SchemaField(KEY, "INT64"),
    bigquery.SchemaField("amount", "INT64"),
    bigquery.SchemaField("_onceover_run_id", "STRING"),
    bigquery.SchemaField("_onceover_batch_id", "INT64"),
]


@pytest.fixture
def app(settings: Settings, bq_config: BigQueryConfig) -> FastAPI:
    settings = settings.model_copy(update={"reconcile_on_success": True})  # the default
    return create_app(settings, bigquery=bq_config)


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=STAMPED_SCHEMA))
    return table


def insert(rest: bigquery.Client, table: str, rows: list[tuple[Any, ...]]) -> None:
    """Rows ``(key, amount, run_id, batch_id)`` by DML, every value a query parameter."""
    values, params = [], []
    for i, row in enumerate(rows):
        values.append(f"(@k{i}, @a{i}, @r{i}, @b{i})")
        for name, kind, value in zip(
            "karb", ("INT64", "INT64", "STRING", "INT64"), row, strict=True
        ):
            params.append(bigquery.ScalarQueryParameter(f"{name}{i}", kind, value))
    rest.query(
        f"INSERT INTO `{table}` ({KEY}, amount, _onceover_run_id, _onceover_batch_id) "
        f"VALUES {', '.join(values)}",
        job_config=bigquery.QueryJobConfig(query_parameters=params),
    ).result()


def run_events(
    run: str,
    table: str,
    batches: dict[int, int],
    *,
    key: str | None = KEY,
    stamped: bool = True,
    receipts: dict[int, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """The events of a run that committed ``batches`` (batch id -> rows) and succeeded;
    with ``receipts`` (batch id -> its keys), each commit's key checksum and tally as the
    sink reports them."""
    events: list[ev.Event] = [f.started(run, "a1", 0)]
    for batch, rows in batches.items():
        committed = f.committed(run, batch, 1.5 + batch, [f"{run}/b{batch}"], rows)
        if receipts is not None:
            keys = receipts[batch]
            tally = BucketTally(integer=all(isinstance(k, int) for k in keys))
            for k in keys:
                tally.add(k)
            buckets = tally.receipt()
            assert buckets is not None
            committed = committed.model_copy(
                update={"key_checksum": key_checksum(keys), "key_buckets": list(buckets)}
            )
        events += [f.intent(run, batch, 1 + batch, [f"{run}/b{batch}"], rows), committed]
    events.append(f.finished(run, "a1", 10, sum(batches.values())))
    shaped = []
    for event in events:
        update: dict[str, Any] = {"table": table}
        if isinstance(event, ev.BatchEvent):
            update |= {"key": key, "stamped": stamped}
        shaped.append(event.model_copy(update=update).model_dump(mode="json"))
    return shaped


def load_run(
    client: TestClient,
    rest: bigquery.Client,
    table: str,
    run: str,
    batches: dict[int, int],
    *,
    first_key: int = 0,
    key: str | None = KEY,
    stamped: bool = True,
    receipts: bool = False,
) -> None:
    """``batches`` of consecutive keys into ``table``, stamped as ``run``'s, and its events
    (with ``receipts``, the receipts of the rows put in)."""
    rows, next_key = [], first_key
    keys: dict[int, list[Any]] = {}
    for batch, count in batches.items():
        for _ in range(count):
            rows.append((next_key, 10, run if stamped else None, batch if stamped else None))
            keys.setdefault(batch, []).append(next_key)
            next_key += 1
    insert(rest, table, rows)
    events = run_events(
        run, table, batches, key=key, stamped=stamped, receipts=keys if receipts else None
    )
    posted = client.post("/api/events", json=events, headers=bearer(INGEST))
    assert posted.status_code == 200, posted.text


def reconcile(client: TestClient, run: str) -> dict[str, Any]:
    response = client.post(f"/api/runs/{run}/reconcile", headers=bearer(OPERATOR))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_clean_stamped_run_is_ok_with_every_count_equal(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30, 1: 20})
    body = reconcile(client, "r1")
    assert body["status"] == "ok", body
    assert (body["expected_rows"], body["actual_rows"], body["distinct_keys"]) == (50, 50, 50)
    assert (body["missing_rows"], body["extra_rows"], body["duplicate_key_count"]) == (0, 0, 0)
    assert body["duplicate_keys"] == []
    assert body["stamped"] is True
    assert body["key"] == KEY
    assert [(b["batch_id"], b["status"], b["expected_rows"], b["actual_rows"])
            for b in body["batches"]] == [(0, "ok", 30, 30), (1, "ok", 20, 20)]  # fmt: skip
    assert body["mismatched_batches"] == []
    assert body["method"] == "counts"  # its batches reported no key tally (a sink before them)
    assert body["warnings"] == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # one is enough
def test_a_clean_run_with_receipts_is_ok_in_one_query(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30, 1: 20}, receipts=True)
    body = reconcile(client, "r1")
    assert body["status"] == "ok", body
    assert (body["method"], body["queries"], body["warnings"]) == ("receipts", 1, [])
    assert (body["expected_rows"], body["actual_rows"], body["distinct_keys"]) == (50, 50, 50)
    assert [(b["batch_id"], b["status"], b["expected_checksum"] == b["actual_checksum"])
            for b in body["batches"]] == [(0, "ok", True), (1, "ok", True)]  # fmt: skip
    receipt = client.get("/api/runs/r1/batches/0", headers=bearer(VIEWER)).json()["receipts"][0]
    assert receipt["key_bucket_count"] == len({key_bucket(k) for k in range(30)})


def _keys(batch: dict[str, Any], kind: str) -> list[tuple[str | None, int]]:
    return [(k["key"], k["copies"]) for k in batch[kind]]


def test_receipts_name_the_duplicated_and_the_missing_keys_in_three_queries(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30, 1: 20}, receipts=True)  # keys 0-29, 30-49
    insert(rest, table, [(35, 10, "r1", 1)])  # a stamped copy
    rest.query(f"DELETE FROM `{table}` WHERE {KEY} IN (3, 40)").result()
    body = reconcile(client, "r1")
    assert (body["status"], body["method"], body["queries"]) == ("mismatch", "receipts", 3)
    assert body["mismatched_batches"] == [0, 1]
    first, second = body["batches"]
    assert (_keys(first, "keys_missing"), _keys(first, "keys_duplicated")) == ([("3", 0)], [])
    assert _keys(second, "keys_missing") == [("40", 0)]  # INT64 keys: named by value
    assert _keys(second, "keys_duplicated") == [("35", 2)]
    assert second["keys_missing"][0]["key_hash"] == key_hash(40)
    for batch in (first, second):
        assert (batch["keys_unexpected"], batch["unresolved_buckets"]) == ([], [])
    assert (body["actual_rows"], body["missing_rows"], body["extra_rows"]) == (49, 2, 1)
    assert body["duplicate_keys"] == [{"key": "35", "count": 2, "batch_id": 1, "run_id": None}]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # one is enough
def test_two_keys_missing_from_one_bucket_are_reported_as_that_bucket_not_guessed(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30}, receipts=True)
    assert key_bucket(2) == key_bucket(28)
    rest.query(f"DELETE FROM `{table}` WHERE {KEY} IN (2, 28)").result()
    body = reconcile(client, "r1")
    assert (body["status"], body["queries"]) == ("mismatch", 2)  # no key twice: no query 3
    [batch] = body["batches"]
    assert batch["keys_missing"] == []
    bucket = key_bucket(2)
    assert batch["unresolved_buckets"] == [{"bucket": bucket, "expected_rows": 2, "actual_rows": 0}]


def test_duplicates_inserted_by_hand_are_listed_with_their_counts_and_batches(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30, 1: 20})  # keys 0-29 in batch 0, 30-49 in 1
    insert(rest, table, [(35, 10, "r1", 1), (35, 10, "r1", 1)])  # a stamped copy, twice
    insert(rest, table, [(7, 99, None, None)])  # an unstamped copy: still a duplicate
    body = reconcile(client, "r1")
    assert body["status"] == "mismatch"
    assert body["duplicate_keys"] == [
        {"key": "35", "count": 3, "batch_id": 1, "run_id": None},
        {"key": "7", "count": 2, "batch_id": 0, "run_id": None},
    ]
    assert (body["duplicate_key_count"], body["duplicate_rows"], body["extra_rows"]) == (2, 3, 3)
    assert (body["actual_rows"], body["distinct_keys"], body["missing_rows"]) == (52, 50, 0)
    assert body["mismatched_batches"] == [0, 1]
    batch1 = body["batches"][1]
    assert (batch1["actual_rows"], batch1["duplicate_keys"], batch1["duplicate_rows"]) == (22, 1, 2)


def test_rows_deleted_by_hand_are_missing_rows(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 30, 1: 20})
    rest.query(f"DELETE FROM `{table}` WHERE {KEY} IN (3, 4, 40)").result()
    body = reconcile(client, "r1")
    assert body["status"] == "mismatch"
    assert any("carry no key tally" in w for w in body["warnings"])  # so no key is named
    assert (body["expected_rows"], body["actual_rows"], body["missing_rows"]) == (50, 47, 3)
    assert body["extra_rows"] == 0
    assert [(b["batch_id"], b["actual_rows"]) for b in body["batches"]] == [(0, 28), (1, 19)]
    assert body["mismatched_batches"] == [0, 1]


def test_a_lost_row_paired_with_a_duplicated_one_is_a_mismatch_though_counts_agree(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 50}, stamped=False)
    rest.query(f"UPDATE `{table}` SET {KEY} = 12 WHERE {KEY} = 13").result()
    body = reconcile(client, "r1")
    assert (body["expected_rows"], body["actual_rows"]) == (50, 50)  # COUNT(*) alone: fine
    assert body["status"] == "mismatch"
    assert (body["distinct_keys"], body["missing_rows"], body["extra_rows"]) == (49, 1, 1)
    assert body["duplicate_keys"] == [{"key": "12", "count": 2, "batch_id": None, "run_id": None}]
    assert body["stamped"] is False
    assert any("not stamped" in w for w in body["warnings"])


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("buffered", "the driver may have flushed some of their streams before it stopped"),
        ("committed", "the rows they appended were visible at once"),
    ],
)
def test_rows_of_a_batch_left_an_intent_may_be_visible_and_the_answer_says_why(
    client: TestClient, rest: bigquery.Client, table: str, mode: ev.Mode, why: str
) -> None:
    """The driver died after batch 1's intent and before the end of its flushes
    (buffered: partition 0 flushed, partition 1 not) or of its appends (committed):
    batch 1 is an intent, and rows of it are in the table all the same."""
    streams = ["r1/p0", "r1/p1"]
    insert(rest, table, [(k, 10, "r1", 0) for k in range(4)] + [(4, 10, "r1", 1), (5, 10, "r1", 1)])
    batch_events = [f.intent("r1", 0, 1, streams, 2), f.committed("r1", 0, 2, streams, 2),
                    f.intent("r1", 1, 3, streams, 2)]  # fmt: skip
    events = [
        f.started("r1", "a1", 0, mode=mode).model_copy(update={"table": table}),
        *(f.in_mode(e, mode, table=table, key=KEY, stamped=True) for e in batch_events),
        f.failed("r1", "a1", 4, "driver lost").model_copy(update={"table": table}),
    ]
    posted = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert posted.status_code == 200, posted.text

    body = reconcile(client, "r1")

    assert body["status"] == "mismatch"
    assert (body["expected_rows"], body["actual_rows"], body["extra_rows"]) == (4, 6, 2)
    assert body["mismatched_batches"] == [1]
    (warning,) = [w for w in body["warnings"] if "not recorded as committed" in w]
    assert warning.startswith(f"1 batch(es) of {mode}-mode writes not recorded as committed: ")
    assert why in warning
    assert "can be in the table all the same" in warning


def test_a_pending_mode_intent_is_not_said_to_be_visible(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    """BatchCommitWriteStreams is atomic: a pending batch left an intent shows no row."""
    insert(rest, table, [(k, 10, "r1", 0) for k in range(4)])
    events = run_events("r1", table, {0: 4})
    events.insert(-1, f.in_mode(f.intent("r1", 1, 3, ["r1/b1"], 2), "pending", table=table,
                                key=KEY, stamped=True).model_dump(mode="json"))  # fmt: skip
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    body = reconcile(client, "r1")

    assert body["status"] == "ok", body
    assert not [w for w in body["warnings"] if "not recorded as committed" in w]


def test_a_key_value_with_quotes_is_a_query_parameter(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    table = f"{dataset}.named"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("name", "STRING")]))
    nasty = 'it\'s a "quote" `tick`; DROP TABLE x; --'
    rest.query(
        f"INSERT INTO `{table}` (name) VALUES (@v), (@v), ('plain')",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[bigquery.ScalarQueryParameter("v", "STRING", nasty)]
        ),
    ).result()
    posted = client.post(
        "/api/events", json=run_events("r1", table, {0: 2}, key="name", stamped=False),
        headers=bearer(INGEST),
    )  # fmt: skip
    assert posted.status_code == 200
    body = reconcile(client, "r1")
    assert body["duplicate_keys"] == [{"key": nasty, "count": 2, "batch_id": None, "run_id": None}]
    assert body["status"] == "mismatch"
    still = next(iter(rest.query(f"SELECT COUNT(*) AS n FROM `{table}`").result()))
    assert still["n"] == 3  # nothing was dropped


def test_a_table_name_with_bad_characters_is_refused_naming_it(client: TestClient) -> None:
    for bad in ["p-roject.d.t`; DROP TABLE x", "onceover-local.d.t$20260101", "d.t"]:
        response = client.post(f"/api/tables/{bad}/reconcile", headers=bearer(OPERATOR))
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["detail"][0]["loc"] == ["path", "table"]
    # A run whose events name a table id that cannot go into SQL: stored as an error.
    events = run_events("r1", "onceover-local.d.t$20260101", {0: 1})
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).status_code == 200
    body = reconcile(client, "r1")
    assert body["status"] == "error"
    assert "is not project.dataset.table" in body["error"]


def test_an_unknown_run_is_404_and_stores_nothing(client: TestClient) -> None:
    response = client.post("/api/runs/nope/reconcile", headers=bearer(OPERATOR))
    assert response.status_code == 404
    assert response.json() == {"detail": "no run 'nope'"}
    history = client.get("/api/runs/nope/reconciliations", headers=bearer(VIEWER))
    assert history.status_code == 404
    missing = client.post("/api/tables/onceover-local.d.never/reconcile", headers=bearer(OPERATOR))
    assert missing.status_code == 404
    assert "no run has written to table" in missing.json()["detail"]


def test_a_table_gone_or_a_key_column_missing_is_a_stored_error(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 5})
    posted = client.post(
        "/api/events", json=run_events("r2", table, {0: 5}, key="no_such_column"),
        headers=bearer(INGEST),
    )  # fmt: skip
    assert posted.status_code == 200
    body = reconcile(client, "r2")
    assert body["status"] == "error"
    assert "key column 'no_such_column' is not in table" in body["error"]
    assert body["actual_rows"] is None

    rest.delete_table(table)
    body = reconcile(client, "r1")
    assert body["status"] == "error"
    assert f"table {table} does not exist" in body["error"]
    history = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert [r["status"] for r in history["data"]] == ["error", "ok"]  # newest first


def test_an_unreachable_bigquery_is_a_stored_error_within_the_deadline(
    engine: Any, client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 5})
    port = free_port()  # nothing listens there
    nowhere = BigQueryConfig(f"http://127.0.0.1:{port}", f"127.0.0.1:{port}")
    result = Reconciler(engine, nowhere, timeout_s=3).reconcile_run("r1", trigger="api", actor="t")
    assert result.status == "error"
    assert result.error is not None
    assert "BigQuery did not answer" in result.error
    stored = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert stored["data"][0]["error"] == result.error


def test_a_run_is_reconciled_and_audited_when_it_succeeds(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 8})  # its last event finishes the run
    history = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert history["count"] == 1
    (auto,) = history["data"]
    assert (auto["trigger"], auto["actor"], auto["status"]) == ("run_succeeded", "onceover", "ok")
    audit = client.get("/api/audit?action=reconcileRun", headers=bearer(OPERATOR)).json()
    assert [(e["actor"], e["outcome"]) for e in audit["data"]] == [
        ("onceover", "ok: reconciliation ok, expected 8 rows, found 8, 8 distinct keys")
    ]
    # The same events again change nothing, so the run is not checked twice.
    again = run_events("r1", table, {0: 8})
    assert client.post("/api/events", json=again, headers=bearer(INGEST)).json()["stored"] == 0
    assert client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()["count"] == 1


def test_the_automatic_check_waits_for_the_batches_the_job_reports(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    # The sink's batch events come from another process than the job's run events: a
    # spooled batch_committed can arrive after run_finished.
    insert(rest, table, [(k, 1, "r1", 0) for k in range(8)])
    events = run_events("r1", table, {0: 8})
    batch_events = [e for e in events if e["type"].startswith("batch_")]
    run_events_first = [e for e in events if not e["type"].startswith("batch_")]
    assert client.post("/api/events", json=run_events_first, headers=bearer(INGEST)).is_success
    run = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()
    assert (run["status"], run["rows_reported"], run["rows_committed"]) == ("succeeded", 8, 0)
    history = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert history["count"] == 0  # not yet: 8 rows reported, none heard of
    assert client.post("/api/events", json=batch_events, headers=bearer(INGEST)).is_success
    history = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert [(c["trigger"], c["status"]) for c in history["data"]] == [("run_succeeded", "ok")]


def test_reconciling_needs_an_operator_and_is_audited(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 4})
    refused = client.post("/api/runs/r1/reconcile", headers=bearer(VIEWER))
    assert refused.status_code == 403
    reconcile(client, "r1")
    audit = client.get("/api/audit?action=reconcileRun", headers=bearer(OPERATOR)).json()
    newest = audit["data"][0]
    assert (newest["role"], newest["target"], newest["status_code"]) == ("operator", "run r1", 200)
    assert newest["outcome"] == "ok: reconciliation ok, expected 4 rows, found 4, 4 distinct keys"
    assert audit["data"][1]["outcome"].startswith("forbidden")


def test_a_table_check_counts_every_run_and_the_rows_no_run_wrote(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 10, 1: 10})
    load_run(client, rest, table, "r2", {0: 5}, first_key=100)
    body = client.post(f"/api/tables/{table}/reconcile", headers=bearer(OPERATOR)).json()
    assert body["status"] == "ok", body
    assert (body["scope"], body["expected_rows"], body["actual_rows"]) == ("table", 25, 25)
    assert [(r["run_id"], r["status"], r["actual_rows"]) for r in body["runs"]] == [
        ("r1", "ok", 20), ("r2", "ok", 5)
    ]  # fmt: skip
    assert any("written by anything but onceover" in w for w in body["warnings"])

    insert(rest, table, [(500, 1, None, None)])  # another writer's row
    body = client.post(
        f"/api/tables/{table}/reconcile", json={"key": KEY}, headers=bearer(OPERATOR)
    ).json()
    assert body["status"] == "mismatch"
    assert (body["actual_rows"], body["extra_rows"], body["missing_rows"]) == (26, 1, 0)
    assert body["runs"][0] == {
        "run_id": None, "status": "mismatch", "expected_rows": 0, "actual_rows": 1,
        "distinct_keys": 1, "duplicate_keys": 0, "duplicate_rows": 0,
    }  # fmt: skip
    history = client.get(f"/api/tables/{table}/reconciliations", headers=bearer(VIEWER)).json()
    assert [r["status"] for r in history["data"]] == ["mismatch", "ok"]


def test_without_a_key_only_rows_are_counted_and_the_answer_says_so(
    client: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(client, rest, table, "r1", {0: 6}, key=None)
    body = reconcile(client, "r1")
    assert body["status"] == "ok"
    assert (body["key"], body["distinct_keys"], body["actual_rows"]) == (None, None, 6)
    assert any("no key column" in w for w in body["warnings"])


@pytest.fixture
def quiet_app(settings: Settings, bq_config: BigQueryConfig) -> Iterator[TestClient]:
    assert settings.reconcile_on_success is False  # as tests/backend/conftest.py sets it
    with TestClient(create_app(settings, bigquery=bq_config)) as client:
        yield client


def test_automatic_reconciliation_can_be_turned_off(
    quiet_app: TestClient, rest: bigquery.Client, table: str
) -> None:
    load_run(quiet_app, rest, table, "r1", {0: 3})
    history = quiet_app.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()
    assert history == {"data": [], "count": 0}


def test_a_run_that_writes_two_tables_is_checked_in_each_with_its_own_key(
    client: TestClient, rest: bigquery.Client, dataset: str, table: str
) -> None:
    """A foreachBatch run: micro-batch 0 writes the orders table twice (writes 0 and 1,
    one stamp between them) and a summary table with a key of its own."""
    summary = f"{dataset}.summary"
    rest.create_table(bigquery.Table(summary, schema=[
        bigquery.SchemaField("day", "INT64"), bigquery.SchemaField("total", "INT64"),
        bigquery.SchemaField("_onceover_run_id", "STRING"),
        bigquery.SchemaField("_onceover_batch_id", "INT64"),
    ]))  # fmt: skip
    insert(rest, table, [(k, 10, "fb", 0) for k in range(8)])
    rest.query(f"INSERT INTO `{summary}` VALUES (1, 80, 'fb', 0)").result()

    def write(kind: str, target: str, place: str, rows: int, key: str) -> dict[str, Any]:
        maker = f.intent if kind == "intent" else f.committed
        event = maker("fb", 0, 1, [f"{target}/{place}"], rows)
        update = {"id": ev.event_id("fb", kind, target, place), "table": target,
                  "write": place, "key": key, "stamped": True}  # fmt: skip
        return event.model_copy(update=update).model_dump(mode="json")

    events = [f.started("fb", "a1", 0).model_copy(update={"table": table}).model_dump(mode="json")]
    for target, place, rows, key in ((table, "0", 5, KEY), (table, "1", 3, KEY),
                                     (summary, "0", 1, "day")):  # fmt: skip
        events += [
            write("intent", target, place, rows, key),
            write("commit", target, place, rows, key),
        ]
    events.append(
        f.finished("fb", "a1", 10, 9).model_copy(update={"table": table}).model_dump(mode="json")
    )
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    run = client.get("/api/runs/fb", headers=bearer(VIEWER)).json()
    assert run["tables"] == [table, summary]
    history = client.get("/api/runs/fb/reconciliations", headers=bearer(VIEWER)).json()
    checks = {c["table"]: c for c in history["data"]}
    assert set(checks) == {table, summary}, history
    orders_check, summary_check = checks[table], checks[summary]
    assert (orders_check["status"], orders_check["key"], orders_check["expected_rows"]) == (
        "ok",
        KEY,
        8,
    )
    assert [
        (b["batch_id"], b["expected_rows"], b["actual_rows"]) for b in orders_check["batches"]
    ] == [(0, 8, 8)]
    assert (summary_check["status"], summary_check["key"], summary_check["actual_rows"]) == (
        "ok",
        "day",
        1,
    )
    assert summary_check["warnings"] == []

    # A summary row inserted twice by hand shows in the summary's check only.
    rest.query(f"INSERT INTO `{summary}` VALUES (1, 80, 'fb', 0)").result()
    again = client.post(f"/api/runs/fb/reconcile?table={summary}", headers=bearer(OPERATOR)).json()
    assert (again["table"], again["status"], again["duplicate_rows"]) == (summary, "mismatch", 1)
    assert reconcile(client, "fb")["status"] == "ok"  # the run's own table, by default

    elsewhere = client.post(
        f"/api/runs/fb/reconcile?table={dataset}.other", headers=bearer(OPERATOR)
    )
    assert elsewhere.status_code == 404
    assert elsewhere.json()["detail"] == (
        f"run 'fb' wrote no batch to table '{dataset}.other'; it wrote {table}, {summary}"
    )


DEAD_LETTER_SCHEMA = [
    bigquery.SchemaField(name, kind)
    for name, kind in (
        ("run_id", "STRING"), ("query_id", "STRING"), ("batch_id", "INT64"), ("write", "STRING"),
        ("table", "STRING"), ("partition", "INT64"), ("offset", "INT64"), ("key", "STRING"),
        ("column", "STRING"), ("reason", "STRING"), ("row", "STRING"),
        ("set_aside_at", "TIMESTAMP"),
    )
]  # fmt: skip
"""The dead-letter table as the sink creates it (docs/guides/bad-rows.md#the-dead-letter-table)."""


@pytest.fixture
def dead_letters(rest: bigquery.Client, dataset: str) -> str:
    table = f"{dataset}.orders_dead_letters"
    rest.create_table(bigquery.Table(table, schema=DEAD_LETTER_SCHEMA))
    return table


def set_aside(
    rest: bigquery.Client, dead_letters: str, run: str, batch: int, offsets: list[int],
    *, table: str | None,
) -> None:  # fmt: skip
    """Rows BigQuery refused for ``table``, as the sink sets them aside: one per offset
    (``table`` None: a dead-letter table without a table column)."""
    values, params = [], []
    for i, offset in enumerate(offsets):
        values.append(f"(@r{i}, 'q1', @b{i}, 0, @o{i}, @k{i}, 'note', @why{i}, @row{i}, "
                      f"CURRENT_TIMESTAMP(){'' if table is None else ', @t'})")  # fmt: skip
        params += [
            bigquery.ScalarQueryParameter(f"r{i}", "STRING", run),
            bigquery.ScalarQueryParameter(f"b{i}", "INT64", batch),
            bigquery.ScalarQueryParameter(f"o{i}", "INT64", offset),
            bigquery.ScalarQueryParameter(f"k{i}", "STRING", str(1000 + offset)),
            bigquery.ScalarQueryParameter(f"why{i}", "STRING", "value too long for STRING(10)"),
            bigquery.ScalarQueryParameter(f"row{i}", "STRING", f'{{"order_id": {1000 + offset}}}'),
        ]
    if table is not None:
        params.append(bigquery.ScalarQueryParameter("t", "STRING", table))
    rest.query(
        f"INSERT INTO `{dead_letters}` (`run_id`, `query_id`, `batch_id`, `partition`, `offset`, "
        f"`key`, `column`, `reason`, `row`, `set_aside_at`{'' if table is None else ', `table`'}) "
        f"VALUES {', '.join(values)}",
        job_config=bigquery.QueryJobConfig(query_parameters=params),
    ).result()


def run_setting_aside(
    run: str, table: str, dead_letter_table: str, batches: dict[int, tuple[int, int]]
) -> list[dict[str, Any]]:
    """The events of a run whose batches committed (rows, rows set aside) and succeeded."""
    events = run_events(run, table, {batch: rows for batch, (rows, _) in batches.items()})
    for event in events:
        if event["type"] in ("batch_intent", "batch_committed"):
            event["dead_lettered_rows"] = batches[event["batch_id"]][1]
            event["dead_letter_table"] = dead_letter_table
            event["dead_letter_streams"] = [{"stream": f"{run}/dlq{event['batch_id']}", "rows": 1}]
    return events


def test_rows_set_aside_are_expected_but_never_missing_and_counted_in_the_dead_letter_table(
    client: TestClient, rest: bigquery.Client, table: str, dead_letters: str
) -> None:
    """Batch 0 commits 30 rows and sets 2 aside, batch 1 commits 20 and sets 1 aside: the
    table holds 50 of the run's rows, the dead-letter table 3 of them (and rows of another
    run, and of the same run for another table, which are not the check's)."""
    insert(rest, table, [(k, 10, "r1", 0 if k < 30 else 1) for k in range(50)])
    set_aside(rest, dead_letters, "r1", 0, [7, 12], table=table)
    set_aside(rest, dead_letters, "r1", 1, [3], table=table)
    set_aside(rest, dead_letters, "someone-else", 0, [1, 2, 3, 4], table=table)
    set_aside(rest, dead_letters, "r1", 0, [5], table=f"{table}_summary")
    events = run_setting_aside("r1", table, dead_letters, {0: (30, 2), 1: (20, 1)})
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    body = reconcile(client, "r1")

    assert body["status"] == "ok", body
    assert (body["expected_rows"], body["actual_rows"], body["missing_rows"]) == (50, 50, 0)
    assert (body["rows_set_aside"], body["rows_in_dead_letter_table"]) == (3, 3)
    assert body["dead_letter_table"] == dead_letters
    assert [(b["batch_id"], b["status"], b["expected_rows"]) for b in body["batches"]] == [
        (0, "ok", 30), (1, "ok", 20)
    ]  # fmt: skip
    assert body["warnings"] == []
    automatic = client.get("/api/runs/r1/reconciliations", headers=bearer(VIEWER)).json()["data"]
    assert [(c["trigger"], c["status"], c["rows_in_dead_letter_table"]) for c in automatic] == [
        ("api", "ok", 3), ("run_succeeded", "ok", 3)
    ]  # fmt: skip
    audit = client.get("/api/audit?action=reconcileRun", headers=bearer(OPERATOR)).json()
    assert audit["data"][0]["outcome"] == (
        "ok: reconciliation ok, expected 50 rows, found 50, 50 distinct keys, 3 set aside, "
        "3 in the dead-letter table"
    )
    run = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()
    assert (run["rows_committed"], run["rows_dead_lettered"]) == (50, 3)

    # A set-aside row lost from the dead-letter table: the target table still agrees,
    # the dead-letter table does not.
    rest.query(
        f"DELETE FROM `{dead_letters}` WHERE run_id = 'r1' AND `offset` = 12 AND `table` = @t",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[bigquery.ScalarQueryParameter("t", "STRING", table)]
        ),
    ).result()
    body = reconcile(client, "r1")
    assert body["status"] == "mismatch"
    assert (body["rows_set_aside"], body["rows_in_dead_letter_table"]) == (3, 2)
    assert (body["missing_rows"], body["extra_rows"], body["mismatched_batches"]) == (0, 0, [])


def test_a_table_check_counts_the_set_aside_rows_of_every_run(
    client: TestClient, rest: bigquery.Client, table: str, dead_letters: str
) -> None:
    insert(rest, table, [(k, 10, "r1", 0) for k in range(10)])
    insert(rest, table, [(100 + k, 10, "r2", 0) for k in range(5)])
    set_aside(rest, dead_letters, "r1", 0, [1], table=table)
    set_aside(rest, dead_letters, "r2", 0, [2, 3], table=table)
    set_aside(rest, dead_letters, "r2", 0, [3], table=table)  # set aside twice: one too many
    for run, rows, aside in (("r1", 10, 1), ("r2", 5, 2)):
        events = run_setting_aside(run, table, dead_letters, {0: (rows, aside)})
        assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    body = client.post(f"/api/tables/{table}/reconcile", headers=bearer(OPERATOR)).json()

    assert body["status"] == "mismatch"
    assert (body["expected_rows"], body["actual_rows"], body["missing_rows"]) == (15, 15, 0)
    assert (body["rows_set_aside"], body["rows_in_dead_letter_table"]) == (3, 4)
    assert all(r["status"] == "ok" for r in body["runs"])  # the table itself agrees


def test_a_dead_letter_table_without_a_table_column_is_counted_by_run_and_says_so(
    client: TestClient, rest: bigquery.Client, dataset: str, table: str
) -> None:
    """One micro-batch writes the orders table (1 row set aside) and a summary table (2
    set aside) into one dead-letter table that cannot tell them apart."""
    dead_letters = f"{dataset}.shared_dead_letters"
    schema = [field for field in DEAD_LETTER_SCHEMA if field.name != "table"]
    rest.create_table(bigquery.Table(dead_letters, schema=schema))
    summary = f"{dataset}.summary"
    rest.create_table(bigquery.Table(summary, schema=STAMPED_SCHEMA))
    insert(rest, table, [(k, 10, "fb", 0) for k in range(4)])
    insert(rest, summary, [(1, 40, "fb", 0)])
    set_aside(rest, dead_letters, "fb", 0, [1, 2, 3], table=None)
    events = run_setting_aside("fb", table, dead_letters, {0: (4, 1)})
    aside: dict[str, Any] = {"dead_lettered": 2, "dead_letter_table": dead_letters,
                             "dead_letter_streams": ["fb/dlq-summary"]}  # fmt: skip
    for kind in ("intent", "commit"):
        maker = f.intent if kind == "intent" else f.committed
        extra = maker("fb", 0, 1, ["fb/summary"], 1, **aside)
        update = {"id": ev.event_id("fb", kind, "summary"), "table": summary, "key": KEY,
                  "stamped": True}  # fmt: skip
        events.insert(-1, extra.model_copy(update=update).model_dump(mode="json"))
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    body = reconcile(client, "fb")

    assert body["status"] == "ok", body
    assert (body["rows_set_aside"], body["rows_in_dead_letter_table"]) == (1, 3)
    assert body["warnings"] == [
        f"the dead-letter table {dead_letters} has no table column and also holds rows set "
        f"aside from other tables ({summary}): rows_in_dead_letter_table counts them too, and "
        "is compared with the rows set aside there from every table"
    ]


def test_a_dead_letter_table_gone_is_a_stored_error(
    client: TestClient, rest: bigquery.Client, table: str, dead_letters: str
) -> None:
    insert(rest, table, [(k, 10, "r1", 0) for k in range(4)])
    rest.delete_table(dead_letters)
    events = run_setting_aside("r1", table, dead_letters, {0: (4, 1)})
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success

    body = reconcile(client, "r1")

    assert body["status"] == "error"
    assert body["error"] == f"table {dead_letters} does not exist (was it deleted?)"
    assert (body["rows_set_aside"], body["rows_in_dead_letter_table"]) == (1, None)


# -- mode("overwrite"): the scope replaced holds exactly the rows staged -----------------


def overwritten(rest: bigquery.Client, dataset: str, rows: list[tuple[int, str | None]]) -> str:
    """A table partitioned by day holding ``rows`` (key, day) as an overwrite left it."""
    table = bigquery.Table(f"{dataset}.daily", schema=[
        bigquery.SchemaField(KEY, "INT64"), bigquery.SchemaField("day", "DATE")
    ])  # fmt: skip
    table.time_partitioning = bigquery.TimePartitioning(field="day")
    rest.create_table(table)
    values = ", ".join(f"({k}, {f'DATE {d!r}' if d else 'NULL'})" for k, d in rows)
    rest.query(f"INSERT INTO `{dataset}.daily` ({KEY}, day) VALUES {values}").result()
    return f"{dataset}.daily"


def post_overwrite(
    client: TestClient, run: str, table: str, rows: int, *, stop: str = "swapped",
    partitions: list[str] | None = None, partition_count: int | None = None,
) -> None:  # fmt: skip
    events = []
    for event in f.overwrite_run(run, stop, rows=rows, partitions=partitions):
        update: dict[str, Any] = {"table": table}
        if isinstance(event, ev.BatchEvent):
            update["key"] = KEY
        if isinstance(event, ev.SwapEvent) and partition_count is not None:
            update["partition_count"] = partition_count
        events.append(event.model_copy(update=update).model_dump(mode="json"))
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).is_success


def test_an_overwrite_of_the_whole_table_expects_exactly_its_staged_rows(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    table = overwritten(rest, dataset, [(k, "2026-11-01") for k in range(6)])
    post_overwrite(client, "nightly", table, 6)

    body = reconcile(client, "nightly")
    assert body["status"] == "ok", body
    assert (body["overwrite"], body["replaced_partitions"]) == (True, None)
    assert (body["expected_rows"], body["actual_rows"], body["distinct_keys"]) == (6, 6, 6)
    assert body["warnings"] == []  # unstamped, and nothing said of it: the scope is the table

    rest.query(f"INSERT INTO `{table}` ({KEY}, day) VALUES (99, DATE '2026-12-01')").result()
    body = reconcile(client, "nightly")
    assert (body["status"], body["actual_rows"], body["extra_rows"]) == ("mismatch", 7, 1)
    whole = client.post(f"/api/tables/{table}/reconcile", headers=bearer(OPERATOR)).json()
    assert "run(s) nightly overwrote the table: a table check adds up" in whole["warnings"][1]


def test_a_dynamic_overwrite_counts_only_the_partitions_it_replaced(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    """Days 11-01 and NULL replaced with three rows; the rows of 11-02, untouched, are not
    the run's to count."""
    kept = [(100 + k, "2026-11-02") for k in range(5)]
    table = overwritten(rest, dataset, [(1, "2026-11-01"), (2, "2026-11-01"), (3, None), *kept])
    post_overwrite(client, "nightly", table, 3, partitions=["20261101", "__NULL__"])

    body = reconcile(client, "nightly")
    assert body["status"] == "ok", body
    assert body["replaced_partitions"] == ["20261101", "__NULL__"]
    assert (body["expected_rows"], body["actual_rows"], body["distinct_keys"]) == (3, 3, 3)

    rest.query(f"INSERT INTO `{table}` ({KEY}, day) VALUES (7, NULL), (8, '2026-11-02')").result()
    body = reconcile(client, "nightly")
    assert (body["status"], body["actual_rows"], body["extra_rows"]) == ("mismatch", 4, 1)


def test_an_overwrite_nothing_can_be_counted_of_is_an_error_saying_why(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    table = overwritten(rest, dataset, [(1, "2026-11-01")])
    post_overwrite(client, "asked", table, 1, stop="swap_asked")  # counted, with a warning
    body = reconcile(client, "asked")
    assert (body["status"], body["actual_rows"]) == ("ok", 1)
    assert "(job onceover_overwrite_asked_0) was asked for and not heard" in body["warnings"][1]

    post_overwrite(client, "staged", table, 3, stop="staged")
    body = reconcile(client, "staged")
    assert (body["status"], body["overwrite"], body["queries"]) == ("error", True, None)
    assert body["error"].startswith("the run's overwrite stopped with its rows staged in ")
    assert f"{table} holds its old rows" in body["error"]

    hours = [str(2026110100 + h) for h in range(100)]  # of 120 replaced, 100 named
    post_overwrite(client, "big", table, 3, partitions=hours, partition_count=120)
    body = reconcile(client, "big")
    assert body["status"] == "error"
    assert "replaced 120 partitions and its swap names the first 100" in body["error"]


def test_a_cdc_run_is_checked_by_its_primary_key_not_by_rows(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    """30 changes (24 upserts, 6 deletes) leave 12 keys: by rows that would be a
    mismatch; by key it is ok while each key is held once, and a key held twice (a plain
    insert beside the changes) is a mismatch naming the copies."""
    table = f"{dataset}.accounts"
    created = bigquery.Table(table, schema=[bigquery.SchemaField("id", "INT64"),
                                            bigquery.SchemaField("v", "STRING")])  # fmt: skip
    created._properties["tableConstraints"] = {"primaryKey": {"columns": ["id"]}}
    rest.create_table(created)
    rest.query_and_wait(
        f"INSERT INTO `{table}` (id, v) VALUES " + ", ".join(f"({k}, 'v')" for k in range(12))
    )
    events = run_events("cdc1", table, {0: 30}, key=None, stamped=False)
    for event in events:
        if event["type"] in ("batch_intent", "batch_committed"):
            event |= {"mode": "default", "upserts": 24, "deletes": 6}
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).status_code == 200

    checked = reconcile(client, "cdc1")
    assert (checked["status"], checked["method"], checked["key"]) == ("ok", "changes", "id")
    assert (checked["actual_rows"], checked["distinct_keys"], checked["expected_rows"]) == (
        12, 12, None,
    )  # fmt: skip
    assert any("24 upserts and 6 deletes" in w for w in checked["warnings"])

    rest.query_and_wait(f"INSERT INTO `{table}` (id, v) VALUES (3, 'again')")
    again = reconcile(client, "cdc1")
    assert (again["status"], again["actual_rows"], again["distinct_keys"]) == ("mismatch", 13, 12)
    assert again["extra_rows"] == 1


def test_a_cdc_table_compared_with_its_sources_state_names_missing_extra_and_stale_keys(
    client: TestClient, rest: bigquery.Client, dataset: str
) -> None:
    """Given the source's final state as a table (``against``), each key is compared:
    equal, the check is ok; a key lost, a deleted key back and a key holding an older
    version are each counted (Beam's load test checks its table so: EXCEPT DISTINCT)."""
    table, source = f"{dataset}.mirror", f"{dataset}.source_state"
    schema = [bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("v", "STRING")]
    created = bigquery.Table(table, schema=schema)
    created._properties["tableConstraints"] = {"primaryKey": {"columns": ["id"]}}
    rest.create_table(created)
    rest.create_table(bigquery.Table(source, schema=schema))
    for name in (table, source):
        rest.query_and_wait(
            f"INSERT INTO `{name}` (id, v) VALUES " + ", ".join(f"({k}, 'v{k}')" for k in range(8))
        )
    events = run_events("cdc2", table, {0: 10}, key=None, stamped=False)
    for event in events:
        if event["type"] in ("batch_intent", "batch_committed"):
            event |= {"mode": "default", "upserts": 9, "deletes": 1}
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).status_code == 200

    def against() -> dict[str, Any]:
        response = client.post(
            "/api/runs/cdc2/reconcile", params={"against": source}, headers=bearer(OPERATOR)
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    equal = against()
    assert (equal["status"], equal["compared_with"], equal["keys_differing"]) == ("ok", source, 0)
    rest.query_and_wait(f"DELETE FROM `{table}` WHERE id = 2")  # lost
    rest.query_and_wait(f"INSERT INTO `{table}` (id, v) VALUES (99, 'deleted at the source')")
    rest.query_and_wait(f"UPDATE `{table}` SET v = 'old' WHERE id = 5")  # an older version
    differs = against()
    assert differs["status"] == "mismatch"
    assert (differs["missing_rows"], differs["extra_rows"], differs["keys_differing"]) == (1, 1, 1)

    plain = client.post(  # no changes were written to a plain table: refused, naming it
        "/api/runs/cdc2/reconcile", params={"against": source, "table": source},
        headers=bearer(OPERATOR),
    )  # fmt: skip
    assert plain.status_code in (404, 422)
