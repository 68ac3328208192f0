"""``GET /api/health`` reports the database and BigQuery as they are."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app

from onceover.bigquery import BigQueryConfig
from onceover.preflight import free_port


def _client(tmp_path: Path, bigquery: BigQueryConfig, **settings: object) -> TestClient:
    values: dict[str, object] = {
        "database_url": f"sqlite:///{tmp_path / 'db' / 'onceover.db'}",
        "frontend_dist": tmp_path / "dist",
        "health_timeout_s": 2.0,
        **settings,
    }
    return TestClient(create_app(Settings(**values), bigquery=bigquery))  # type: ignore[arg-type]


def test_everything_up_is_ok(tmp_path: Path, bq_config: BigQueryConfig) -> None:
    with _client(tmp_path, bq_config) as client:
        response = client.get("/api/health")

    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "ok"
    assert body["database"]["status"] == "ok"
    assert body["database"]["target"].startswith("sqlite:///")
    assert body["bigquery"] == {
        "status": "ok",
        "target": f"local BigQuery REST {bq_config.rest_endpoint} gRPC {bq_config.grpc_endpoint}",
        "latency_ms": body["bigquery"]["latency_ms"],
        "error": None,
        "age_s": 0.0,  # checked for this call: nothing was cached yet
    }
    assert (tmp_path / "db" / "onceover.db").exists()


def test_postgresql_is_checked_for_real(
    tmp_path: Path, bq_config: BigQueryConfig, postgres_url: str
) -> None:
    with _client(tmp_path, bq_config, database_url=postgres_url) as client:
        body = client.get("/api/health").json()

    assert body["database"]["status"] == "ok", body["database"]
    assert body["database"]["target"] == postgres_url


def test_unreachable_bigquery_is_503_with_the_reason(tmp_path: Path) -> None:
    nothing = free_port()
    down = BigQueryConfig(
        rest_endpoint=f"http://127.0.0.1:{nothing}", grpc_endpoint=f"127.0.0.1:{nothing}"
    )
    with _client(tmp_path, down) as client:
        response = client.get("/api/health")

    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "degraded"
    assert body["database"]["status"] == "ok"
    assert body["bigquery"]["status"] == "error"
    assert "Connection refused" in body["bigquery"]["error"]


def test_unreachable_database_is_503_and_hides_the_password(
    tmp_path: Path, bq_config: BigQueryConfig
) -> None:
    url = f"postgresql+psycopg://onceover:s3cret@127.0.0.1:{free_port()}/onceover"
    with _client(tmp_path, bq_config, database_url=url) as client:
        response = client.get("/api/health")

    body = response.json()
    assert response.status_code == 503
    assert body["database"]["status"] == "error"
    assert "s3cret" not in response.text
    assert body["bigquery"]["status"] == "ok"


def test_the_dashboard_is_served_at_the_root(tmp_path: Path, bq_config: BigQueryConfig) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text('<!doctype html><div id="root"></div>')

    with _client(tmp_path, bq_config) as client:
        response = client.get("/")

    assert response.status_code == 200
    assert '<div id="root">' in response.text


def test_an_unbuilt_dashboard_says_how_to_build_it(
    tmp_path: Path, bq_config: BigQueryConfig
) -> None:
    with _client(tmp_path, bq_config) as client:
        response = client.get("/")

    assert response.status_code == 503
    assert "make frontend" in response.text


@pytest.mark.parametrize("path", ["/openapi.json"])
def test_health_is_in_the_openapi_schema(
    tmp_path: Path, bq_config: BigQueryConfig, path: str
) -> None:
    with _client(tmp_path, bq_config) as client:
        schema = client.get(path).json()

    assert schema["paths"]["/api/health"]["get"]["operationId"] == "getHealth"
