"""The fault proxy in front of the real local BigQuery: each wire fault does what it says.

What the client sees is asserted, and what the server applied is read back from
BigQuery after a commit, so "dropped after the server applied" is a fact, not a claim.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.api_core.exceptions import ServiceUnavailable
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_tools.chaos.proxy import FaultProxy, WireFault

from onceover.bigquery import BigQueryConfig, write_client
from tests.helpers.writeapi import append_request, create_stream, create_table, rows, table_path

PENDING = types.WriteStream.Type.PENDING
COMMITTED = types.WriteStream.Type.COMMITTED


def _through(proxy: FaultProxy, bq_config: BigQueryConfig) -> BigQueryWriteClient:
    config = BigQueryConfig(bq_config.rest_endpoint, proxy.endpoint, bq_config.project)
    # No client-side retries: each call is one call through the proxy.
    return write_client(config)


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


def _count(rest: bigquery.Client, table: str) -> int:
    return int(next(iter(rest.query(f"SELECT COUNT(*) FROM `{table}`").result()))[0])


def _append_rows(
    client: BigQueryWriteClient, stream: str, requests: list[types.AppendRowsRequest]
) -> Iterator[types.AppendRowsResponse]:
    """The raw gRPC call, as the sink makes it: errors are ``grpc.RpcError``."""
    metadata = (("x-goog-request-params", f"write_stream={stream}"),)
    rpc: Any = client.transport.append_rows  # the raw stream-stream callable
    call: Iterator[types.AppendRowsResponse] = rpc(iter(requests), metadata=metadata)
    return call


def _append_one(client: BigQueryWriteClient, stream: str, start: int, offset: int) -> None:
    """One request on its own connection; raises the call's error."""
    for response in _append_rows(client, stream, [append_request(stream, rows(start, 10), offset)]):
        assert not response.error.code, response.error.message


def _commit(
    client: BigQueryWriteClient, table: str, stream: str, **kwargs: object
) -> types.BatchCommitWriteStreamsResponse:
    request = types.BatchCommitWriteStreamsRequest(
        parent=table_path(client, table), write_streams=[stream]
    )
    return client.batch_commit_write_streams(request=request, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def proxies(bq_config: BigQueryConfig) -> Iterator[list[FaultProxy]]:
    started: list[FaultProxy] = []
    yield started
    for proxy in started:
        proxy.stop()


def _proxy(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, *faults: WireFault, **kwargs: object
) -> FaultProxy:
    assert bq_config.grpc_endpoint is not None
    proxy = FaultProxy(bq_config.grpc_endpoint, faults, **kwargs).start()  # type: ignore[arg-type]
    proxies.append(proxy)
    return proxy


def test_without_faults_everything_passes_through(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    client = _through(_proxy(proxies, bq_config), bq_config)
    stream = create_stream(client, table, PENDING).name
    _append_one(client, stream, 0, 0)
    _append_one(client, stream, 10, 10)
    assert client.finalize_write_stream(name=stream).row_count == 20
    _commit(client, table, stream)
    assert _count(rest, table) == 20


def test_a_dropped_append_response_was_applied_and_its_retry_is_already_exists(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(proxies, bq_config, WireFault("drop_response", "AppendRows", 1))
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, COMMITTED).name
    with pytest.raises(grpc.RpcError) as lost:
        _append_one(client, stream, 0, 0)
    assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "after the server applied" in (lost.value.details() or "")
    assert _count(rest, table) == 10  # applied, though the client never heard

    retry = _append_rows(client, stream, [append_request(stream, rows(0, 10), 0)])
    assert [r.error.code for r in retry] == [grpc.StatusCode.ALREADY_EXISTS.value[0]]
    assert [(f.fault.action, f.fault.nth) for f in proxy.fired] == [("drop_response", 1)]


def test_unavailable_before_forwarding_applies_nothing(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(proxies, bq_config, WireFault("unavailable", "AppendRows", 2))
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, COMMITTED).name
    _append_one(client, stream, 0, 0)
    with pytest.raises(grpc.RpcError) as refused:
        _append_one(client, stream, 10, 10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert _count(rest, table) == 10
    _append_one(client, stream, 10, 10)  # the re-send is new to the server: OK, not a duplicate
    assert _count(rest, table) == 20


def test_unary_faults_unavailable_then_dropped_commit_response(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(
        proxies,
        bq_config,
        WireFault("unavailable", "FinalizeWriteStream", 1),
        WireFault("drop_response", "BatchCommitWriteStreams", 1),
    )
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, PENDING).name
    _append_one(client, stream, 0, 0)
    with pytest.raises(ServiceUnavailable):
        client.finalize_write_stream(name=stream, retry=None)
    assert client.finalize_write_stream(name=stream).row_count == 10
    with pytest.raises(ServiceUnavailable):
        _commit(client, table, stream, retry=None)
    assert _count(rest, table) == 10  # the commit took effect; only its answer was lost
    again = _commit(client, table, stream)
    assert not again.commit_time  # re-committing answers with an error, not a second commit
    assert [e.code for e in again.stream_errors] == [
        types.StorageError.StorageErrorCode.STREAM_ALREADY_COMMITTED
    ]
    assert _count(rest, table) == 10


def test_an_uncommitted_answer_has_neither_commit_time_nor_errors_and_commits_nothing(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(proxies, bq_config, WireFault("uncommitted", "BatchCommitWriteStreams", 1))
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, PENDING).name
    _append_one(client, stream, 0, 0)
    client.finalize_write_stream(name=stream)

    answer = types.BatchCommitWriteStreamsResponse.pb(_commit(client, table, stream))
    assert not answer.HasField("commit_time")  # BigQuery: unset means not committed
    assert not answer.stream_errors
    assert _count(rest, table) == 0  # the server never saw it
    assert not types.WriteStream.pb(client.get_write_stream(name=stream)).HasField("commit_time")
    assert _commit(client, table, stream).commit_time  # the next try commits
    assert _count(rest, table) == 10
    with pytest.raises(ValueError, match="BatchCommitWriteStreams only"):
        WireFault("uncommitted", "AppendRows", 1)


def test_a_cut_connection_and_a_delay(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(
        proxies,
        bq_config,
        WireFault("delay", "AppendRows", 1, delay_s=0.2),
        WireFault("cut", "AppendRows", 2),
    )
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, COMMITTED).name
    requests = [append_request(stream, rows(i * 10, 10), i * 10) for i in range(3)]
    seen: list[Any] = []

    def read_all() -> None:
        seen.extend(r.append_result.offset for r in _append_rows(client, stream, requests))

    with pytest.raises(grpc.RpcError) as cut:
        read_all()
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "cut mid-stream" in (cut.value.details() or "")
    assert seen in ([], [0])  # answers in flight at the cut are lost with it
    # The messages before the cut: applied or not, by chance; the one after: never sent.
    assert _count(rest, table) in (0, 10, 20)
    assert [f.fault.action for f in proxy.fired] == ["delay", "cut"]


def test_kill_hands_both_ends_of_the_clients_connection_to_the_callback(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, table: str
) -> None:
    peers: list[tuple[str, str]] = []
    called = threading.Event()

    def on_kill(peer: str, server: str) -> str:
        peers.append((peer, server))
        called.set()
        return "noted"

    proxy = _proxy(proxies, bq_config, WireFault("kill", "AppendRows", 1), on_kill=on_kill)
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, COMMITTED).name
    _append_one(client, stream, 0, 0)
    assert called.wait(10)
    assert peers[0][0].startswith(("ipv4:127.0.0.1:", "ipv6:[::1]:"))
    assert peers[0][1] == proxy.endpoint  # the connection's other end
    assert proxy.fired[0].detail == "noted"


def test_a_gap_is_out_of_range_and_the_call_goes_on(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    proxy = _proxy(proxies, bq_config, WireFault("gap", "AppendRows", 2))
    client = _through(proxy, bq_config)
    stream = create_stream(client, table, COMMITTED).name
    requests = [append_request(stream, rows(i * 10, 10), i * 10) for i in range(3)]

    codes = [r.error.code for r in _append_rows(client, stream, requests)]

    # The second arrives 1,000,000 rows ahead: a gap. The third, at offset 20, is
    # still ahead of the 10 the server expects: a gap as well. Nothing applied past 10.
    out_of_range = grpc.StatusCode.OUT_OF_RANGE.value[0]
    assert codes == [0, out_of_range, out_of_range]
    assert _count(rest, table) == 10
    assert [f.detail for f in proxy.fired] == ["offset 10 sent as 1000010"]
    again = [append_request(stream, rows(i * 10, 10), i * 10) for i in (1, 2)]
    assert [r.error.code for r in _append_rows(client, stream, again)] == [0, 0]
    assert _count(rest, table) == 30


def test_a_late_duplicate_is_applied_again_after_what_came_since(
    proxies: list[FaultProxy], bq_config: BigQueryConfig, rest: bigquery.Client, table: str
) -> None:
    """On the ``_default`` stream (no offsets) the copy of a connection's second message,
    which carries neither stream name nor schema, is applied again on a call of its own,
    after the messages sent since; stop() sends a copy its timer has not sent yet."""
    proxy = _proxy(proxies, bq_config, WireFault("late_duplicate", "AppendRows", 2, delay_s=600.0))
    client = _through(proxy, bq_config)
    stream = f"{table_path(client, table)}/streams/_default"
    requests = [
        append_request(stream, rows(i * 10, 10), None, with_schema=i == 0) for i in range(3)
    ]
    requests[1].write_stream = ""  # as later messages of a call may leave it out
    assert [r.error.code for r in _append_rows(client, stream, requests)] == [0, 0, 0]
    assert _count(rest, table) == 30
    assert proxy.fired == []  # its timer is far off
    proxy.stop()
    assert _count(rest, table) == 40
    held = rest.query(f"SELECT id, COUNT(*) AS n FROM `{table}` GROUP BY id HAVING n > 1")
    assert sorted(r["id"] for r in held.result()) == list(range(10, 20))
    (fired,) = proxy.fired
    assert re.fullmatch(r"sent again \d+\.\d s later: applied", fired.detail), fired.detail


def test_a_wire_fault_names_a_real_method() -> None:
    with pytest.raises(ValueError, match="unknown Storage Write method"):
        WireFault("delay", "AppendRow", 1)
    with pytest.raises(ValueError, match="AppendRows only"):
        WireFault("cut", "FinalizeWriteStream", 1)
