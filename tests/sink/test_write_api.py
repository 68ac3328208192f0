"""The sink's own Storage Write client (onceover_jobs.sink.wire.write_api): its messages are
the client library's, byte for byte; a client a process keeps goes on over a fresh
channel after its server went away; the driver's commit imports neither the client
library nor pandas, pyarrow, httpx or pydantic."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from concurrent import futures
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from google.cloud.bigquery_storage_v1.services.big_query_write.transports.base import (
    BigQueryWriteTransport,
)
from google.protobuf import timestamp_pb2
from onceover_jobs.sink.datasource import OnceoverCommitMessage, OnceoverStreamWriter
from onceover_jobs.sink.wire import messages as write_wire
from onceover_jobs.sink.wire.unary import call_with_retry
from onceover_jobs.sink.wire.write_api import SERVICE, WriteApi, write_api
from pyspark import cloudpickle

from onceover.bigquery import WRITE_API_HOST, WRITE_API_SCOPES, BigQueryConfig, write_channel
from tests.helpers.writeapi import count, create_table, streaming_job
from tests.sink.test_committer import staged

STREAM = "projects/p/datasets/d/tables/t/streams/s1"


# -- the messages -------------------------------------------------------------------------


def test_requests_parse_as_the_client_library_s_messages() -> None:
    create = types.CreateWriteStreamRequest.pb().FromString(
        write_wire.create_write_stream_request("projects/p/datasets/d/tables/t", "BUFFERED")
    )
    assert create.parent == "projects/p/datasets/d/tables/t"
    assert create.write_stream.type_ == types.WriteStream.Type.BUFFERED
    get = types.GetWriteStreamRequest.pb().FromString(write_wire.get_write_stream_request(STREAM))
    assert get.name == STREAM
    final = types.FinalizeWriteStreamRequest.pb().FromString(
        write_wire.finalize_write_stream_request(STREAM)
    )
    assert final.name == STREAM
    for offset in (0, 1, 2**40):
        flush = types.FlushRowsRequest.pb().FromString(
            write_wire.flush_rows_request(STREAM, offset)
        )
        assert (flush.write_stream, flush.HasField("offset"), flush.offset.value) == (
            STREAM,
            True,
            offset,
        )
    commit = types.BatchCommitWriteStreamsRequest.pb().FromString(
        write_wire.batch_commit_request("projects/p/datasets/d/tables/t", [STREAM, STREAM + "2"])
    )
    assert list(commit.write_streams) == [STREAM, STREAM + "2"]


def _timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def test_answers_read_as_the_client_library_reads_them() -> None:
    created = datetime(2026, 11, 25, 10, 0, 1, 250_000, tzinfo=UTC)
    committed = datetime(2026, 11, 25, 10, 0, 2, 123_456, tzinfo=UTC)
    stream = types.WriteStream.pb()(
        name=STREAM,
        type_=types.WriteStream.Type.PENDING,
        create_time=_timestamp(created),
        commit_time=_timestamp(committed),
        location="US",  # and fields this reader does not know: skipped
        table_schema=types.TableSchema.pb()(fields=[{"name": "id", "type_": 2}]),
    )
    facts = write_wire.write_stream(stream.SerializeToString())
    proto_plus = types.WriteStream.deserialize(stream.SerializeToString())
    assert facts.name == STREAM
    assert facts.type == types.WriteStream.Type.PENDING
    assert facts.create_time == proto_plus.create_time.isoformat()
    assert facts.commit_time == proto_plus.commit_time.isoformat()  # the ledger's text
    uncommitted = types.WriteStream.pb()(name=STREAM, create_time=_timestamp(created))
    assert write_wire.write_stream(uncommitted.SerializeToString()).commit_time is None

    finalized = types.FinalizeWriteStreamResponse.pb()(row_count=2**33 + 5)
    assert write_wire.row_count(finalized.SerializeToString()) == 2**33 + 5
    flushed = types.FlushRowsResponse.pb()(offset=-1)  # a negative int64 takes ten bytes
    assert write_wire.flushed_offset(flushed.SerializeToString()) == -1

    code = types.StorageError.StorageErrorCode
    refused = types.BatchCommitWriteStreamsResponse.pb()(
        stream_errors=[
            {"code": code.STREAM_ALREADY_COMMITTED, "entity": STREAM, "error_message": "again"},
            {"code": code.INVALID_STREAM_STATE, "entity": STREAM + "2", "error_message": "x"},
        ]
    )
    answer = write_wire.commit_answer(refused.SerializeToString())
    assert answer.commit_time is None
    assert [(e.code, e.entity, e.message) for e in answer.stream_errors] == [
        ("STREAM_ALREADY_COMMITTED", STREAM, "again"),
        ("INVALID_STREAM_STATE", STREAM + "2", "x"),
    ]
    done = types.BatchCommitWriteStreamsResponse.pb()(commit_time=_timestamp(committed))
    assert write_wire.commit_answer(done.SerializeToString()).commit_time == committed.isoformat()


def test_the_storage_error_codes_and_the_endpoint_are_the_client_library_s() -> None:
    codes = types.StorageError.StorageErrorCode
    assert tuple(c.name for c in sorted(codes, key=int)) == write_wire.STORAGE_ERROR_CODES
    assert write_wire.storage_error_name(99) == "STORAGE_ERROR_99"
    kinds = types.WriteStream.Type
    expected = {name: int(getattr(kinds, name)) for name in ("COMMITTED", "PENDING", "BUFFERED")}
    assert expected == write_wire.STREAM_TYPES
    assert WRITE_API_SCOPES == BigQueryWriteTransport.AUTH_SCOPES
    assert WRITE_API_HOST == BigQueryWriteTransport.DEFAULT_HOST
    assert SERVICE == "google.cloud.bigquery.storage.v1.BigQueryWrite"


def test_the_calls_work_against_the_local_bigquery(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, write: BigQueryWriteClient
) -> None:
    table = create_table(rest, dataset)
    parent = "projects/{}/datasets/{}/tables/{}".format(*table.split("."))
    api = write_api(bq_config)
    assert write_api(bq_config) is api  # one a process
    stream = api.create_write_stream(parent, "PENDING", timeout=10)
    assert stream.type == types.WriteStream.Type.PENDING
    assert stream.create_time is not None
    assert api.get_write_stream(stream.name, timeout=10).commit_time is None
    assert api.finalize_write_stream(stream.name, timeout=10) == 0
    answer = api.batch_commit_write_streams(parent, [stream.name], timeout=10)
    assert answer.commit_time is not None
    assert answer.stream_errors == ()
    assert api.get_write_stream(stream.name, timeout=10).commit_time == answer.commit_time
    again = api.batch_commit_write_streams(parent, [stream.name], timeout=10)
    assert [e.code for e in again.stream_errors] == ["STREAM_ALREADY_COMMITTED"]


# -- a kept channel and a server that went away ------------------------------------------


class _Streams(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no types
    """Answers GetWriteStream with the stream asked for; nothing else."""

    def service(self, details: Any) -> Any:
        if details.method != f"/{SERVICE}/GetWriteStream":
            return None
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: types.WriteStream.pb()(
                name=types.GetWriteStreamRequest.pb().FromString(request).name
            ).SerializeToString()
        )


def _serve(port: int) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[_Streams()])
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    server.start()
    return server


@pytest.fixture
def port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kept(port: int) -> WriteApi:
    """A client on the channels the sink opens (onceover.bigquery.write_channel)."""
    config = BigQueryConfig(rest_endpoint="http://127.0.0.1:9", grpc_endpoint=f"127.0.0.1:{port}")
    return WriteApi(lambda: write_channel(config))


def test_a_kept_client_goes_on_over_a_fresh_channel_after_its_server_went_away(
    port: int,
) -> None:
    """The next task of a worker (or the commit's retry) must not inherit a channel that
    gRPC holds back from reconnecting (its backoff after failed attempts)."""
    api = _kept(port)
    first = _serve(port)
    try:
        assert api.get_write_stream(STREAM, timeout=10).name == STREAM
        used = api.channel
    finally:
        first.stop(0).wait()
    with pytest.raises(grpc.RpcError) as failed:
        api.get_write_stream(STREAM, timeout=10)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert api.channel is not used  # the broken one is left behind
    second = _serve(port)
    try:
        # No retry needed: the fresh channel connects at once.
        assert api.get_write_stream(STREAM, timeout=10).name == STREAM
    finally:
        second.stop(0).wait()


def test_a_retried_call_reaches_the_server_that_came_back(port: int) -> None:
    from onceover_jobs.sink.wire.retry import RetryPolicy

    api = _kept(port)
    first = _serve(port)
    assert api.get_write_stream(STREAM, timeout=10).name == STREAM
    first.stop(0).wait()
    servers: list[grpc.Server] = []

    def attempt(timeout: float) -> str:
        try:
            return api.get_write_stream(STREAM, timeout=timeout).name
        finally:
            if not servers:  # the server comes back after the first failed try
                servers.append(_serve(port))

    policy = RetryPolicy(deadline_s=20, initial_backoff_s=0.01, max_backoff_s=0.05)
    try:
        assert call_with_retry(policy, attempt, what="GetWriteStream", on=STREAM) == STREAM
    finally:
        for server in servers:
            server.stop(0).wait()


# -- what the driver's commit imports ------------------------------------------------------

HEAVY = (
    "pandas",
    "pyarrow",
    "numpy",
    "httpx",
    "pydantic",
    "proto",  # proto-plus, the client library's message layer
    "google.cloud.bigquery",
    "google.cloud.bigquery_storage_v1",
    "onceover.events",
)
COMMIT_WORKER = """
import json, pickle, sys
import pyspark.sql.worker.commit_data_source_write  # what Spark's commit worker imports
writer, messages = pickle.loads(open(sys.argv[1], "rb").read())
writer.commit(messages, 0)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture
def job_and_messages(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    write: BigQueryWriteClient,
    tmp_path: Path,
) -> tuple[str, bytes]:
    table = create_table(rest, dataset)
    job = streaming_job(bq_config, table, tmp_path / "checkpoint", mode="pending")
    messages = [OnceoverCommitMessage(r) for r in staged(write, table, (0, 5), (5, 7))]
    pickled: bytes = cloudpickle.dumps((OnceoverStreamWriter(job), messages))  # type: ignore[no-untyped-call]
    return table, pickled


def test_the_commit_imports_no_client_library_pandas_pyarrow_httpx_or_pydantic(
    job_and_messages: tuple[str, bytes],
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    tmp_path: Path,
) -> None:
    """The commit runs in a Python worker Spark starts afresh (and again after a minute
    idle): what it imports, its first commit waits for (docs/journal/profiling.md)."""
    table, pickled = job_and_messages
    path = tmp_path / "commit.pickle"
    path.write_bytes(pickled)
    done = subprocess.run(
        [sys.executable, "-c", COMMIT_WORKER, str(path)],
        env=bq_config.applied_to(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.splitlines()[-1])
    heavy = [m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]
    assert heavy == []
    assert count(rest, table) == (12, 12)  # and it did commit


def test_an_append_whose_connection_broke_goes_on_over_a_fresh_channel() -> None:
    """The appender (invariant 1) on the sink's kept client: a connection that ends with
    UNAVAILABLE is retried on a new channel, and the rows are acknowledged once."""
    from tests.sink.test_error_classes import FAKE_STREAM, FakeWrite, Heard, Step, append_rows
    from tests.sink.test_error_classes import appender as make_appender

    fake = FakeWrite()
    fake.play(  # the first connection fails, the next ones take every request
        "AppendRows", Step("fail", grpc.StatusCode.UNAVAILABLE, "connection reset"), Step("ok")
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=[fake])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        api = _kept(port)
        first = api.channel
        heard = Heard()
        append_rows(make_appender(api, FAKE_STREAM, heard), 0, 10)  # type: ignore[arg-type]
        assert heard.acked == [0, 10]
        assert heard.errors == [("UNAVAILABLE", True)]  # one failure, retried
        assert api.channel is not first
        assert fake.calls["AppendRows"] == 2  # the broken connection, then the fresh one
    finally:
        server.stop(0).wait()
