"""The local BigQuery launcher: in process and as a child process, on free ports."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types
from onceover_tools.localbq import (
    LocalBigQuery,
    LocalBigQueryOptions,
    LocalBigQueryProcess,
    patches,
)

from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from onceover.errors import LocalBigQueryVersionError, PortInUseError
from onceover.preflight import check_port_free
from tests.helpers.writeapi import (
    append_all,
    append_request,
    count,
    create_stream,
    create_table,
    rows,
)


def _answers(config: BigQueryConfig) -> list[str]:
    """List datasets over REST and open the gRPC channel: both endpoints serve."""
    rest = bigquery_client(config)
    datasets = [d.dataset_id for d in rest.list_datasets(timeout=10)]
    channel = write_client(config).transport.grpc_channel  # type: ignore[attr-defined]
    grpc.channel_ready_future(channel).result(timeout=10)
    return datasets


def _ports(config: BigQueryConfig) -> tuple[int, int]:
    assert config.rest_endpoint is not None
    assert config.grpc_endpoint is not None
    return int(config.rest_endpoint.rsplit(":", 1)[1]), int(config.grpc_endpoint.rsplit(":", 1)[1])


def test_in_process_serves_on_free_ports_and_releases_them() -> None:
    server = LocalBigQuery().start()
    try:
        ports = _ports(server.config)
        assert _answers(server.config) == []
    finally:
        server.stop()

    for port in ports:
        check_port_free("127.0.0.1", port, "--port")  # raises if still held
    server.stop()  # a second stop is harmless


def test_a_child_process_serves_and_stops_cleanly(tmp_path: Path) -> None:
    process = LocalBigQueryProcess(log_path=tmp_path / "bq.log").start()
    try:
        config = process.config
        assert config.project == "onceover-local"
        assert _answers(config) == []
    finally:
        status = process.stop()

    assert status == 0
    for port in _ports(config):
        check_port_free("127.0.0.1", port, "--port")


def test_a_data_directory_keeps_tables_across_restarts(tmp_path: Path) -> None:
    options = LocalBigQueryOptions(data_dir=tmp_path / "bq")
    with LocalBigQuery(options) as first:
        rest, write = bigquery_client(first.config), write_client(first.config)
        rest.create_dataset(f"{rest.project}.kept")
        table_id = create_table(rest, f"{rest.project}.kept")
        stream = create_stream(write, table_id, types.WriteStream.Type.COMMITTED)
        append_all(write, [append_request(stream.name, rows(0, 25), offset=0)])

    with LocalBigQuery(options) as second:
        assert count(bigquery_client(second.config), table_id) == (25, 25)


def test_a_busy_port_is_refused_naming_the_option(busy_port: int) -> None:
    with pytest.raises(PortInUseError, match=f"port {busy_port} .* --grpc-port"):
        LocalBigQuery(LocalBigQueryOptions(grpc_port=busy_port)).start()
    with pytest.raises(PortInUseError, match="--rest-port"):
        LocalBigQueryProcess(LocalBigQueryOptions(rest_port=busy_port)).start()


def test_another_bqemulator_release_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import bqemulator

    monkeypatch.setattr(bqemulator, "__version__", "1.5.0")

    with pytest.raises(LocalBigQueryVersionError, match=r"bqemulator 1\.5\.0 .* 1\.4\.0"):
        patches.install()
    with pytest.raises(LocalBigQueryVersionError):
        LocalBigQuery().start()


def test_the_clients_talk_to_the_configured_endpoints(
    bq_config: BigQueryConfig, rest: bigquery.Client
) -> None:
    assert bq_config.rest_endpoint == rest._connection.API_BASE_URL
    assert rest.project == bq_config.project
