"""``GET /api/metrics/write-errors``: requests by response code per step, totals, rates."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer


def _metrics(client: TestClient, **params: Any) -> Any:
    return client.get("/api/metrics/write-errors", params=params, headers=bearer(VIEWER))


def _seed(client: TestClient) -> None:
    s1 = "r1/s1"
    events = [
        f.started("r1", "a1", 0),
        *[f.acked("r1", s1, 10 + i, i * 10, 10) for i in range(6)],  # minute 0
        f.already_exists("r1", s1, 70, 50, 10),  # minute 1
        f.append_error("r1", s1, 75, "UNAVAILABLE"),
        f.acked("r1", s1, 130, 60, 10),  # minute 2
        f.out_of_range("r1", s1, 135, 999),
        f.acked("r2", "r2/s1", 10, 0, 4),  # another run, same table
    ]
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success


def test_per_minute_counts_totals_and_rates_of_a_run(client: TestClient) -> None:
    _seed(client)

    response = _metrics(client, run_id="r1", until=f.at(180).isoformat())

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["step_s"] == 60
    assert body["since"] == "2026-11-01T12:00:00Z"  # the run's first minute with appends
    assert [(s["start"][11:16], s["counts"]) for s in body["series"][:3]] == [
        ("12:00", {"OK": 6, "ALREADY_EXISTS": 0, "OUT_OF_RANGE": 0, "UNAVAILABLE": 0}),
        ("12:01", {"OK": 0, "ALREADY_EXISTS": 1, "OUT_OF_RANGE": 0, "UNAVAILABLE": 1}),
        ("12:02", {"OK": 1, "ALREADY_EXISTS": 0, "OUT_OF_RANGE": 1, "UNAVAILABLE": 0}),
    ]
    assert body["totals"] == {"OK": 7, "ALREADY_EXISTS": 1, "OUT_OF_RANGE": 1, "UNAVAILABLE": 1}
    assert body["requests"] == 10
    assert body["rates"]["ALREADY_EXISTS"] == 0.1
    assert body["rows"]["OK"] == 70


def test_a_table_over_bigger_steps(client: TestClient) -> None:
    _seed(client)

    body = _metrics(
        client, table=f.TABLE, since=f.at(0).isoformat(), until=f.at(600).isoformat(), step="5m"
    ).json()

    assert body["step_s"] == 300
    assert len(body["series"]) == 3  # 12:00, 12:05 and the step holding `until`
    assert body["series"][0]["requests"] == 11  # both runs
    assert body["totals"]["OK"] == 8

    # Minute 12:04 ends the first step, 12:05 starts the second; 12:10 is `until`'s.
    late = [f.acked("r3", "r3/s1", t, i * 10, 10) for i, t in enumerate((299, 300, 301, 600))]
    assert client.post("/api/events", json=f.as_json(late), headers=bearer(INGEST)).is_success
    body = _metrics(
        client, table=f.TABLE, since=f.at(0).isoformat(), until=f.at(601).isoformat(), step="5m"
    ).json()
    assert [(s["start"][11:16], s["requests"], s["rows_ok"]) for s in body["series"]] == [
        ("12:00", 12, 84), ("12:05", 2, 20), ("12:10", 1, 10),
    ]  # fmt: skip


def test_a_run_without_appends_has_zero_counts(client: TestClient) -> None:
    body = _metrics(client, run_id="nothing-yet").json()

    assert body["requests"] == 0
    assert body["totals"] == {"OK": 0, "ALREADY_EXISTS": 0, "OUT_OF_RANGE": 0}
    assert body["rates"] == {"OK": 0.0, "ALREADY_EXISTS": 0.0, "OUT_OF_RANGE": 0.0}


def test_bad_parameters_are_422_naming_the_parameter(client: TestClient) -> None:
    ten_days = {"run_id": "r1", "since": f.at(0).isoformat(), "until": f.at(864000).isoformat()}
    cases = [
        ({"run_id": "r1", "step": "90s"}, "step"),
        ({"run_id": "r1", "step": "fast"}, "step"),
        ({**ten_days, "step": "1m"}, "step"),  # 14,400 one-minute steps asked for
        ({"run_id": "r1", "since": f.at(100).isoformat(), "until": f.at(0).isoformat()}, "since"),
        ({"run_id": "r1", "since": "2026-11-01T12:00:00"}, "since"),  # no time zone
        ({}, "run_id"),
    ]
    for params, name in cases:
        response = _metrics(client, **params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["detail"][0]["loc"] == ["query", name], params


DAY = 86_400


def test_an_old_runs_chart_spans_its_appends_not_up_to_now(client: TestClient) -> None:
    """The run page asks with no range and no step. A run's chart ran from its first
    append to now: a 422 for any run older than a week (10,000 minutes), and a minute
    a step for every minute since it ended before that (docs/journal/profiling.md)."""
    s1 = "old/s1"
    events = [f.started("old", "a1", -9 * DAY), f.acked("old", s1, -9 * DAY + 10, 0, 5),
              f.acked("old", s1, -9 * DAY + 130, 5, 5)]  # fmt: skip
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    response = _metrics(client, run_id="old")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["step_s"] == 60
    assert (body["since"], body["until"]) == (
        f.at(-9 * DAY).isoformat().replace("+00:00", "Z"),
        f.at(-9 * DAY + 180).isoformat().replace("+00:00", "Z"),
    )  # its first minute with appends, and the end of its last
    assert [(s["start"][11:16], s["counts"]["OK"]) for s in body["series"]] == [
        ("12:00", 1), ("12:01", 0), ("12:02", 1), ("12:03", 0),
    ]  # fmt: skip


def test_a_long_runs_chart_takes_a_step_that_fits(client: TestClient) -> None:
    s1 = "long/s1"
    appends = [f.acked("long", s1, t, i, 1) for i, t in enumerate((0, DAY, 3 * DAY, 3 * DAY + 30))]
    events = [f.started("long", "a1", 0), *appends]
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    body = _metrics(client, run_id="long").json()

    assert body["step_s"] == 300  # three days: 4,321 minutes, 865 five-minute steps
    assert len(body["series"]) == 865
    assert body["totals"]["OK"] == 4
    assert [s["counts"]["OK"] for s in body["series"] if s["requests"]] == [1, 1, 2]
    # A step asked for is kept.
    assert len(_metrics(client, run_id="long", step="1m").json()["series"]) == 4_322


def test_a_since_given_alone_runs_to_now(client: TestClient) -> None:
    events = [f.started("r9", "a1", 0), f.acked("r9", "r9/s1", 10, 0, 5)]
    assert client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST)).is_success

    body = _metrics(client, run_id="r9", since=f.at(3600).isoformat()).json()

    assert body["since"] == "2026-11-01T13:00:00Z"
    assert body["until"] > "2026-11-28"  # now: after the run's appends, not before them
    assert body["requests"] == 0
