"""A batch's receipt (when BigQuery made its rows visible, the source offsets it read,
the checksum of its keys): stored as its first commit reported it, and read back with
``GET /api/runs/{run_id}/batches/{batch}``, a record per table, query and write."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from onceover import events as ev
from onceover.key_checksum import key_checksum
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer

COMMIT_TIME = datetime(2026, 11, 1, 12, 0, 6, 250000, tzinfo=UTC)
OFFSETS = ['{"logOffset":41}', '{"orders":{"0":1200,"1":1187}}']
CHECKSUM = key_checksum(range(100))
OTHER_TABLE = "onceover-local.ds.customers"


def _post(client: TestClient, events: Sequence[ev.Event]) -> None:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.status_code == 200, response.text


def _batch(client: TestClient, run: str, batch: str, status: int = 200) -> Any:
    response = client.get(f"/api/runs/{run}/batches/{batch}", headers=bearer(VIEWER))
    assert response.status_code == status, response.text
    return response.json()


def _receipt(event: ev.BatchCommitted, **fields: Any) -> ev.BatchCommitted:
    return event.model_copy(update=fields)


def _streaming_run(run: str = "r1") -> list[ev.Event]:
    """Batch 0 committed with a whole receipt, batch 1 with none (a sink before them)."""
    s1, s2 = f"{run}/s1", f"{run}/s2"
    return [
        f.started(run, "a1", 0),
        f.intent(run, 0, 5, [s1, s2], 50),
        _receipt(
            f.committed(run, 0, 6, [s1, s2], 50),
            key="order_id",
            stamped=True,
            commit_time=COMMIT_TIME,
            source_offsets=OFFSETS,
            key_checksum=CHECKSUM,
        ),
        f.intent(run, 1, 7, [f"{run}/s3"], 10),
        f.committed(run, 1, 8, [f"{run}/s3"], 10),
    ]


def test_a_committed_batch_answers_with_its_receipt(client: TestClient) -> None:
    _post(client, _streaming_run())

    body = _batch(client, "r1", "0")

    assert body["run_id"] == "r1"
    assert body["batch"] == 0
    [receipt] = body["receipts"]
    assert receipt["table"] == f.TABLE
    assert receipt["query_id"] == "q1"
    assert receipt["batch_id"] == 0
    assert receipt["write"] is None
    assert receipt["state"] == "committed"
    assert receipt["rows"] == 100
    assert receipt["stamped"] is True
    assert datetime.fromisoformat(receipt["commit_time"]) == COMMIT_TIME
    assert datetime.fromisoformat(receipt["committed_at"]) == f.at(6)
    assert receipt["source_offsets"] == OFFSETS
    assert receipt["key_checksum"] == CHECKSUM
    assert [(s["stream"], s["rows"]) for s in receipt["streams"]] == [
        ("r1/s1", 50),
        ("r1/s2", 50),
    ]


def test_a_batch_without_a_receipt_shows_nulls_here_and_in_the_run(client: TestClient) -> None:
    _post(client, _streaming_run())

    [receipt] = _batch(client, "r1", "1")["receipts"]
    run = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()

    assert (receipt["commit_time"], receipt["source_offsets"], receipt["key_checksum"]) == (
        None,
        None,
        None,
    )
    by_batch = {b["batch_id"]: b for b in run["batches"]}
    assert by_batch[0]["source_offsets"] == OFFSETS
    assert by_batch[0]["key_checksum"] == CHECKSUM
    assert by_batch[1]["commit_time"] is None


@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_the_first_commits_receipt_stands_and_a_later_report_only_fills_gaps(
    client: TestClient, order: str
) -> None:
    """A replay found the batch committed (resolved) and reported it again, with another
    commit time (the time it looked) and the checksum the first report lacked."""
    s1 = "r1/s1"
    first = _receipt(
        f.committed("r1", 0, 6, [s1], 10), commit_time=COMMIT_TIME, source_offsets=OFFSETS
    )
    again = _receipt(
        f.committed("r1", 0, 30, [s1], 10, resolved=True),
        commit_time=f.at(29),
        source_offsets=['{"logOffset":99}'],
        key_checksum=CHECKSUM,
    )
    events: list[ev.Event] = [f.started("r1", "a1", 0), first, again]
    _post(client, events if order == "in order" else [events[0], again])
    if order == "reversed":  # the earlier commit's report arrives last, on its own
        _post(client, [first])

    [receipt] = _batch(client, "r1", "0")["receipts"]

    assert datetime.fromisoformat(receipt["commit_time"]) == COMMIT_TIME
    assert receipt["source_offsets"] == OFFSETS
    assert receipt["key_checksum"] == CHECKSUM  # null in the first report: filled
    assert datetime.fromisoformat(receipt["committed_at"]) == f.at(6)
    assert receipt["resolved"] is True


def _batch_write(run: str, write: str, t: float, table: str = f.TABLE) -> ev.BatchCommitted:
    return _receipt(
        f.committed(run, 0, t, [f"{run}/w{write}-{table}"], 5),
        id=ev.event_id(run, "batch write", write, table),
        table=table,
        batch_id=None,
        write=write,
        commit_time=f.at(t),
        key_checksum=key_checksum(["a", "b"]),
    )


def test_batch_writes_are_addressed_as_write(client: TestClient) -> None:
    _post(
        client,
        [
            f.started("r2", "a1", 0),
            _batch_write("r2", "10", 3),
            _batch_write("r2", "2", 2),
            _batch_write("r2", "id-daily", 4),
        ],
    )

    body = _batch(client, "r2", "write")

    assert body["run_id"] == "r2"
    assert body["batch"] == "write"
    assert [r["write"] for r in body["receipts"]] == ["2", "10", "id-daily"]
    assert all(r["batch_id"] is None for r in body["receipts"])
    assert all(r["source_offsets"] is None for r in body["receipts"])
    assert [datetime.fromisoformat(r["commit_time"]) for r in body["receipts"]] == [
        f.at(2),
        f.at(3),
        f.at(4),
    ]
    assert {r["key_checksum"] for r in body["receipts"]} == {key_checksum(["a", "b"])}


def test_every_table_and_query_of_one_batch_comes_back(client: TestClient) -> None:
    run = "r3"
    other_table = _receipt(
        f.committed(run, 4, 6, [f"{run}/c1"], 7),
        id=ev.event_id(run, "customers", 4),
        table=OTHER_TABLE,
        commit_time=f.at(6),
        source_offsets=OFFSETS,
    )
    other_query = _receipt(
        f.committed(run, 4, 7, [f"{run}/q2"], 3),
        id=ev.event_id(run, "q2", 4),
        query_id="q2",
        commit_time=f.at(7),
    )
    _post(
        client,
        [
            f.started(run, "a1", 0),
            other_query,
            _receipt(f.committed(run, 4, 5, [f"{run}/o1"], 20), commit_time=f.at(5)),
            other_table,
            f.committed(run, 5, 8, [f"{run}/o2"], 1),
        ],
    )

    body = _batch(client, run, "4")

    assert body["batch"] == 4
    assert [(r["table"], r["query_id"], r["rows"]) for r in body["receipts"]] == [
        (OTHER_TABLE, "q1", 7),
        (f.TABLE, "q1", 20),
        (f.TABLE, "q2", 3),
    ]
    assert [r["source_offsets"] for r in body["receipts"]] == [OFFSETS, None, None]
    assert body == _batch(client, run, "004")  # the same number, however written


def test_an_unknown_run_or_batch_is_404_naming_it(client: TestClient) -> None:
    _post(client, _streaming_run())

    assert _batch(client, "nope", "0", 404) == {"detail": "no run 'nope'"}
    assert _batch(client, "r1", "7", 404) == {"detail": "run 'r1' has no batch 7"}
    assert _batch(client, "r1", "write", 404) == {"detail": "run 'r1' has no batch write"}


@pytest.mark.parametrize("batch", ["writes", "-1", "1.5", "0x1", "12345678901", "2147483648"])
def test_a_batch_that_is_neither_a_number_nor_write_is_422_naming_it(
    client: TestClient, batch: str
) -> None:
    _post(client, _streaming_run())

    detail = _batch(client, "r1", batch, 422)["detail"]

    assert [error["loc"] for error in detail] == [["path", "batch"]]
    assert detail[0]["input"] == batch


def test_receipts_need_a_token(client: TestClient) -> None:
    _post(client, _streaming_run())

    assert client.get("/api/runs/r1/batches/0").status_code == 401


def test_a_checksum_past_2_53_is_stored_whole_and_one_past_int64_refused(
    client: TestClient,
) -> None:
    """A sum of 32-bit terms passes 2**53 from about four million rows on: no count (that
    JSON readers must hold exactly), it is kept whole up to its BIGINT column's limit."""
    big = 2**63 - 1
    committed = _receipt(f.committed("r4", 0, 6, ["r4/s1"], 10), key_checksum=big)
    _post(client, [f.started("r4", "a1", 0), committed])

    [receipt] = _batch(client, "r4", "0")["receipts"]
    too_big = {**f.as_json([committed])[0], "id": ev.event_id("r4", "too big")}
    too_big["key_checksum"] = 2**63
    refused = client.post("/api/events", json=[too_big], headers=bearer(INGEST))

    assert receipt["key_checksum"] == big
    assert refused.status_code == 422, refused.text
    assert [error["loc"] for error in refused.json()["detail"]] == [
        ["body", 0, "batch_committed", "key_checksum"]
    ]
