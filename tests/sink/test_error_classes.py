"""Which failures are retried and which fail at once (issue 26, item 5), for AppendRows
and the unary calls, and the StorageError each message names.

Against the local BigQuery where it can produce the failure (a stream or table that
does not exist, a finalized stream); against a scripted in-process gRPC server for
what it cannot (PERMISSION_DENIED, UNAUTHENTICATED, a StorageError in the status, a
retried code then success, a server that never answers). Every "fails at once" test
runs under a 30 s retry deadline and asserts well under a second and one attempt:
before, each of these retried for the whole deadline."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.api_core.exceptions import (
    GoogleAPICallError,
    NotFound,
    from_grpc_error,
    from_grpc_status,
)
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from google.cloud.bigquery_storage_v1.services.big_query_write.transports import (
    BigQueryWriteGrpcTransport,
)
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]
from onceover_jobs.sink.errors import (
    AppendRejectedError,
    CallRejectedError,
    DuplicateAppendError,
    RetryDeadlineError,
    StreamUnusableError,
)
from onceover_jobs.sink.wire import storage_errors
from onceover_jobs.sink.wire.appender import PlannedAppend, StreamAppender
from onceover_jobs.sink.wire.requests import ArrowEncoder
from onceover_jobs.sink.wire.retry import RetryPolicy, is_broken_transport, is_retried
from onceover_jobs.sink.wire.storage_errors import (
    StorageErrorInfo,
    storage_error_of,
    table_of,
    target_text,
)
from onceover_jobs.sink.wire.unary import CallNotFoundError, call_with_retry, gapic

from onceover.bigquery import GRPC_OPTIONS, BigQueryConfig
from tests.helpers.writeapi import (
    ARROW_SCHEMA,
    create_stream,
    create_table,
    rows,
    streaming_job,
    table_path,
)

pytestmark = pytest.mark.alone  # times what must not wait (make test runs these alone)

SERVICE = "/google.cloud.bigquery.storage.v1.BigQueryWrite/"
FAKE_STREAM = "projects/p/datasets/d/tables/t/streams/s1"
FAKE_TABLE = "p.d.t"
PATIENT = RetryPolicy(deadline_s=30.0, initial_backoff_s=0.01, max_backoff_s=0.05)
"""A deadline far longer than any test: failing at once is measured against it."""
AT_ONCE_S = 1.0
Code = grpc.StatusCode
PERMANENT = [
    Code.NOT_FOUND,
    Code.PERMISSION_DENIED,
    Code.UNAUTHENTICATED,
    Code.INVALID_ARGUMENT,
    Code.FAILED_PRECONDITION,
    Code.UNKNOWN,  # sent by the server: not a broken transport
]
RETRIED = [
    Code.UNAVAILABLE,
    Code.INTERNAL,
    Code.ABORTED,
    Code.CANCELLED,
    Code.DEADLINE_EXCEEDED,
    Code.RESOURCE_EXHAUSTED,
]
StorageCode = types.StorageError.StorageErrorCode


def packed_storage_error(code: int, entity: str, message: str) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(types.StorageError.pb()(code=code, entity=entity, error_message=message))
    return packed


def status_with(
    code: grpc.StatusCode, message: str, storage: tuple[int, str] | None = None
) -> status_pb2.Status:
    """A google.rpc.Status; with a StorageError (code, message) on FAKE_STREAM in its
    details, behind an unrelated detail as real servers add them."""
    status = status_pb2.Status(code=code.value[0], message=message)
    if storage is not None:
        info = any_pb2.Any()
        info.Pack(error_details_pb2.ErrorInfo(reason="OTHER"))
        status.details.append(info)
        status.details.append(packed_storage_error(storage[0], FAKE_STREAM, storage[1]))
    return status


# -- a scripted BigQueryWrite ---------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What the fake does with one call (or one AppendRows connection)."""

    action: str  # "fail" | "ok" | "hang" | "answer_error"
    code: grpc.StatusCode = Code.OK
    message: str = ""
    storage: tuple[int, str] | None = None


class FakeWrite(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no types
    """Plays a script per method: each call takes the next step, the last one repeats."""

    def __init__(self) -> None:
        self.script: dict[str, list[Step]] = {}
        self.calls: Counter[str] = Counter()

    def play(self, method: str, *steps: Step) -> None:
        self.script[method] = list(steps)
        self.calls[method] = 0

    def _step(self, method: str) -> Step:
        steps = self.script.get(method) or [Step("ok")]
        self.calls[method] += 1
        return steps[min(self.calls[method], len(steps)) - 1]

    def service(self, details: Any) -> Any:
        method = details.method.removeprefix(SERVICE)
        if method == "AppendRows":
            return grpc.stream_stream_rpc_method_handler(self._append_rows)
        return grpc.unary_unary_rpc_method_handler(partial(self._unary, method))

    def _unary(self, method: str, request: bytes, context: Any) -> bytes:
        step = self._step(method)
        if step.action == "fail":
            context.abort_with_status(
                rpc_status.to_status(status_with(step.code, step.message, step.storage))
            )
        if step.action == "hang":
            _hang(context)
            return b""
        return bytes(types.WriteStream.serialize(types.WriteStream(name=FAKE_STREAM)))

    def _append_rows(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        step = self._step("AppendRows")
        for request in requests:
            offset = types.AppendRowsRequest.pb(types.AppendRowsRequest.deserialize(request))
            if step.action == "fail":  # at open: the first request is answered with a status
                context.abort_with_status(
                    rpc_status.to_status(status_with(step.code, step.message, step.storage))
                )
            if step.action == "hang":
                continue  # takes every request, answers none
            if step.action == "answer_error":
                error = status_with(step.code, step.message, step.storage)
                yield types.AppendRowsResponse.serialize(types.AppendRowsResponse(error=error))
                continue
            result = types.AppendRowsResponse.AppendResult(offset=offset.offset.value)
            yield types.AppendRowsResponse.serialize(
                types.AppendRowsResponse(append_result=result, write_stream=FAKE_STREAM)
            )


def _hang(context: Any) -> None:
    """Answer nothing until the client gives up (its deadline), or 10 s."""
    until = time.monotonic() + 10
    while context.is_active() and time.monotonic() < until:
        time.sleep(0.01)


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[FakeWrite, str]]:
    fake = FakeWrite()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), handlers=[fake])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield fake, f"127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture
def fake(fake_server: tuple[FakeWrite, str]) -> FakeWrite:
    fake_server[0].script.clear()
    fake_server[0].calls.clear()
    return fake_server[0]


@pytest.fixture
def fake_client(fake_server: tuple[FakeWrite, str]) -> Iterator[BigQueryWriteClient]:
    channel = grpc.insecure_channel(fake_server[1], options=GRPC_OPTIONS)
    yield BigQueryWriteClient(transport=BigQueryWriteGrpcTransport(channel=channel))
    channel.close()


# -- the appender -----------------------------------------------------------------------


class Heard:
    def __init__(self) -> None:
        self.acked: list[int | None] = []
        self.gaps: list[int | None] = []
        self.errors: list[tuple[str, bool]] = []
        self.throttles: list[tuple[int | None, str]] = []

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None:
        self.acked.append(append.offset)

    def already_exists(self, append: PlannedAppend) -> None:
        pass

    def out_of_range(self, append: PlannedAppend, message: str) -> None:
        self.gaps.append(append.offset)

    def error(self, append: PlannedAppend | None, code: str, message: str, retrying: bool) -> None:
        self.errors.append((code, retrying))

    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        self.throttles.append((append.offset, message))


def appender(
    client: BigQueryWriteClient, stream: str, heard: Heard, policy: RetryPolicy = PATIENT
) -> StreamAppender:
    return StreamAppender(
        client,
        stream,
        schema_payload=ArrowEncoder(ARROW_SCHEMA).schema_payload,
        listener=heard,
        context="batch 3 partition 1",
        policy=policy,
    )


def append_rows(target: StreamAppender, *offsets: int) -> None:
    """Append 10 rows at each offset, then flush; closes the appender either way."""
    encoder = ArrowEncoder(ARROW_SCHEMA)
    try:
        for offset in offsets:
            encoded = encoder.encode(rows(offset, 10))
            target.append(PlannedAppend(offset, 10, encoded.bytes, encoded.apply))
        target.flush()
    finally:
        target.close()


def timed(fn: Callable[[], object]) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as caught:  # noqa: PT011 - callers assert the type
        fn()
    return caught.value, time.monotonic() - started


def test_append_to_a_stream_that_does_not_exist_fails_at_once(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    missing = f"{table_path(write, table)}/streams/{'0' * 16}"
    heard = Heard()
    error, elapsed = timed(lambda: append_rows(appender(write, missing, heard), 0))
    assert isinstance(error, AppendRejectedError)
    assert elapsed < AT_ONCE_S
    assert (error.stream, error.table, error.grpc_code) == (missing, table, "NOT_FOUND")
    # With the StorageError BigQuery sends (the local BigQuery's patches add it), the
    # stream is named unusable; a bare NOT_FOUND (it could be the table) is a refusal.
    assert isinstance(error, StreamUnusableError) is (error.storage_code == "STREAM_NOT_FOUND")
    assert error.storage_code in (None, "STREAM_NOT_FOUND")
    assert missing in str(error)
    assert f"(table {table})" in str(error)
    assert "NOT_FOUND" in str(error)
    assert "batch 3 partition 1" in str(error)
    assert heard.errors == [("NOT_FOUND", False)]


def test_append_to_a_finalized_stream_fails_at_once(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, types.WriteStream.Type.PENDING).name
    write.finalize_write_stream(name=stream)
    error, elapsed = timed(lambda: append_rows(appender(write, stream, Heard()), 0))
    assert isinstance(error, AppendRejectedError)
    assert elapsed < AT_ONCE_S
    assert error.grpc_code == "FAILED_PRECONDITION"
    assert isinstance(error, StreamUnusableError) is (error.storage_code == "STREAM_FINALIZED")
    assert error.storage_code in (None, "STREAM_FINALIZED")
    assert stream in str(error)
    assert table in str(error)


@pytest.mark.parametrize("code", PERMANENT, ids=lambda c: c.name)
def test_append_connection_refused_at_open_fails_at_once(
    fake: FakeWrite, fake_client: BigQueryWriteClient, code: grpc.StatusCode
) -> None:
    fake.play("AppendRows", Step("fail", code, f"refused: {code.name.lower()}"))
    heard = Heard()
    error, elapsed = timed(lambda: append_rows(appender(fake_client, FAKE_STREAM, heard), 0, 10))
    assert type(error) is AppendRejectedError
    assert elapsed < AT_ONCE_S
    assert fake.calls["AppendRows"] == 1
    assert (error.stream, error.table, error.grpc_code) == (FAKE_STREAM, FAKE_TABLE, code.name)
    assert f"stream {FAKE_STREAM} (table {FAKE_TABLE}) ({code.name})" in str(error)
    assert f"refused: {code.name.lower()}" in str(error)
    assert heard.errors == [(code.name, False)]


@pytest.mark.parametrize("code", RETRIED, ids=lambda c: c.name)
def test_append_connection_failing_with_a_retried_code_is_retried(
    fake: FakeWrite, fake_client: BigQueryWriteClient, code: grpc.StatusCode
) -> None:
    fake.play("AppendRows", Step("fail", code, "try"), Step("fail", code, "again"), Step("ok"))
    heard = Heard()
    append_rows(appender(fake_client, FAKE_STREAM, heard), 0, 10)
    assert heard.acked == [0, 10]
    assert fake.calls["AppendRows"] == 3  # two refused connections, then one that served
    assert heard.errors == [(code.name, True), (code.name, True)]


@pytest.mark.parametrize(
    ("storage_code", "where"),
    [
        (StorageCode.STREAM_FINALIZED, "answer_error"),
        (StorageCode.INVALID_STREAM_STATE, "answer_error"),
        (StorageCode.STREAM_NOT_FOUND, "fail"),
    ],
    ids=["finalized-in-stream", "invalid-state-in-stream", "not-found-at-open"],
)
def test_a_stream_that_takes_no_more_appends_is_named_unusable(
    fake: FakeWrite, fake_client: BigQueryWriteClient, storage_code: int, where: str
) -> None:
    grpc_code = Code.NOT_FOUND if where == "fail" else Code.INVALID_ARGUMENT
    fake.play("AppendRows", Step(where, grpc_code, "no more", (storage_code, "it is done")))
    error, elapsed = timed(lambda: append_rows(appender(fake_client, FAKE_STREAM, Heard()), 0))
    assert isinstance(error, StreamUnusableError)
    assert elapsed < AT_ONCE_S
    name = StorageCode(storage_code).name
    assert (error.stream, error.storage_code, error.table) == (FAKE_STREAM, name, FAKE_TABLE)
    assert f"StorageError {name} on {FAKE_STREAM}: it is done" in str(error)
    assert fake.calls["AppendRows"] == 1


def test_offset_already_exists_in_the_storage_error_takes_the_already_exists_path(
    fake: FakeWrite, fake_client: BigQueryWriteClient
) -> None:
    # Whatever gRPC code comes with it: a request never sent before that "already
    # exists" means the offsets are wrong (invariant 1), not a plain refusal.
    fake.play(
        "AppendRows",
        Step("answer_error", Code.INVALID_ARGUMENT, "dup", (StorageCode.OFFSET_ALREADY_EXISTS, "")),
    )
    error, _ = timed(lambda: append_rows(appender(fake_client, FAKE_STREAM, Heard()), 0))
    assert isinstance(error, DuplicateAppendError)
    assert error.storage_code == "OFFSET_ALREADY_EXISTS"


def test_offset_out_of_range_in_the_storage_error_rewinds_once_then_fails(
    fake: FakeWrite, fake_client: BigQueryWriteClient
) -> None:
    fake.play(
        "AppendRows",
        Step("answer_error", Code.INVALID_ARGUMENT, "gap", (StorageCode.OFFSET_OUT_OF_RANGE, "")),
    )
    heard = Heard()
    error, _ = timed(lambda: append_rows(appender(fake_client, FAKE_STREAM, heard), 5))
    assert isinstance(error, AppendRejectedError)
    assert "(OUT_OF_RANGE)" in str(error)
    assert heard.gaps == [5, 5]  # the OUT_OF_RANGE path: one rewind, then the task fails
    assert fake.calls["AppendRows"] == 2


def test_an_append_server_that_never_answers_is_bounded_by_the_deadline(
    fake: FakeWrite, fake_client: BigQueryWriteClient
) -> None:
    fake.play("AppendRows", Step("hang"))
    policy = RetryPolicy(
        deadline_s=1.0, initial_backoff_s=0.01, max_backoff_s=0.05, response_timeout_s=0.3
    )
    heard = Heard()
    error, elapsed = timed(
        lambda: append_rows(appender(fake_client, FAKE_STREAM, heard, policy), 0)
    )
    assert isinstance(error, RetryDeadlineError)
    assert elapsed < 0.3 + 1.0 + 0.5  # the first wait, then no longer than the deadline
    assert fake.calls["AppendRows"] >= 3  # reconnected and re-sent after each silence
    assert all(code == "DEADLINE_EXCEEDED" for code, _ in heard.errors)
    assert FAKE_STREAM in str(error)


@pytest.mark.parametrize(
    ("code", "details", "retried"),
    [
        (Code.UNKNOWN, "Stream removed", True),
        (Code.UNKNOWN, "Exception iterating requests!", True),
        (Code.UNKNOWN, "Received http2 header with status: 500", True),
        (Code.UNKNOWN, "an error the server could not classify", False),
        (Code.UNAVAILABLE, "Socket closed", True),
        (Code.PERMISSION_DENIED, "Socket closed", False),  # the server answered
    ],
)
def test_unknown_is_retried_only_as_a_broken_transport(
    code: grpc.StatusCode, details: str, retried: bool
) -> None:
    assert is_retried(code.value[0], details) is retried
    assert is_broken_transport(code.value[0], details) is (retried and code is Code.UNKNOWN)


# -- unary calls ------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["gapic", "partial", "zero-argument"])
def test_get_of_a_stream_that_does_not_exist_fails_at_once_as_not_found(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str, form: str
) -> None:
    table = create_table(rest, dataset)
    missing = f"{table_path(write, table)}/streams/{'0' * 16}"
    forms: dict[str, Callable[..., Any]] = {
        "gapic": gapic(write.get_write_stream, name=missing),
        "partial": partial(write.get_write_stream, name=missing),  # what committer.py passes
        "zero-argument": lambda: write.get_write_stream(name=missing),  # the earlier form
    }
    attempt = forms[form]
    what = "GetWriteStream" if form == "gapic" else None
    on = missing if form != "partial" else None  # a partial names its stream itself
    error, elapsed = timed(lambda: call_with_retry(PATIENT, attempt, what=what, on=on))
    assert isinstance(error, CallNotFoundError)
    assert isinstance(error, NotFound)  # committer.py catches NotFound around such calls
    assert isinstance(error, CallRejectedError)
    assert elapsed < AT_ONCE_S
    assert error.message == str(error)
    assert missing in error.message
    assert f"(table {table})" in error.message
    assert "NOT_FOUND" in error.message
    if form != "zero-argument":
        assert error.message.startswith("GetWriteStream on stream ")
    assert (error.target, error.table, error.grpc_code) == (missing, table, "NOT_FOUND")


def test_finalize_of_a_stream_that_does_not_exist_fails_at_once(
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    dataset: str,
    bq_config: BigQueryConfig,
    tmp_path: Path,
) -> None:
    table = create_table(rest, dataset)
    missing = f"{table_path(write, table)}/streams/{'0' * 16}"
    job = streaming_job(bq_config, table, tmp_path, **{"retry.deadline_s": "300"})
    error, elapsed = timed(
        lambda: call_with_retry(
            job.retry_policy,  # the job's retry.deadline_s, 300 s: the old loop's whole wait
            gapic(write.finalize_write_stream, name=missing),
            what="FinalizeWriteStream",
            on=missing,
        )
    )
    assert isinstance(error, CallNotFoundError)
    assert elapsed < AT_ONCE_S
    assert error.message.startswith(f"FinalizeWriteStream on stream {missing} (table {table})")


def test_create_on_a_table_that_does_not_exist_fails_at_once_naming_it(
    write: BigQueryWriteClient, dataset: str
) -> None:
    parent = table_path(write, f"{dataset}.absent")
    stream = types.WriteStream(type_=types.WriteStream.Type.PENDING)
    error, elapsed = timed(
        lambda: call_with_retry(
            PATIENT,
            gapic(write.create_write_stream, parent=parent, write_stream=stream),
            what="CreateWriteStream",
            on=parent,
        )
    )
    assert isinstance(error, CallNotFoundError)
    assert elapsed < AT_ONCE_S
    assert error.message.startswith(f"CreateWriteStream on table {dataset}.absent failed")
    assert error.table == f"{dataset}.absent"


@pytest.mark.parametrize("code", PERMANENT, ids=lambda c: c.name)
def test_a_unary_call_refused_for_good_fails_at_once(
    fake: FakeWrite, fake_client: BigQueryWriteClient, code: grpc.StatusCode
) -> None:
    storage = (StorageCode.INVALID_STREAM_STATE, "not finalized")
    fake.play("FinalizeWriteStream", Step("fail", code, "refused by the fake", storage))
    error, elapsed = timed(
        lambda: call_with_retry(
            PATIENT,
            gapic(fake_client.finalize_write_stream, name=FAKE_STREAM),
            what="FinalizeWriteStream",
            on=FAKE_STREAM,
        )
    )
    assert isinstance(error, CallRejectedError)
    assert isinstance(error, NotFound) is (code is Code.NOT_FOUND)
    assert elapsed < AT_ONCE_S
    assert fake.calls["FinalizeWriteStream"] == 1
    meaning = {
        Code.NOT_FOUND: f": {storage_errors.READINGS['missing']}",
        Code.PERMISSION_DENIED: f": {storage_errors.READINGS['denied_or_missing']}",
    }.get(code, "")
    assert str(error) == (
        f"FinalizeWriteStream on stream {FAKE_STREAM} (table {FAKE_TABLE}) failed: "
        f"{code.name}: refused by the fake "
        f"[StorageError INVALID_STREAM_STATE on {FAKE_STREAM}: not finalized]{meaning}"
    )
    assert (error.what, error.target, error.grpc_code, error.storage_code) == (
        "FinalizeWriteStream",
        FAKE_STREAM,
        code.name,
        "INVALID_STREAM_STATE",
    )
    assert error.server_message == "refused by the fake"


@pytest.mark.parametrize("code", RETRIED, ids=lambda c: c.name)
def test_a_unary_call_failing_with_a_retried_code_is_retried_then_answers(
    fake: FakeWrite, fake_client: BigQueryWriteClient, code: grpc.StatusCode
) -> None:
    fake.play("GetWriteStream", Step("fail", code, "busy"), Step("fail", code, "busy"), Step("ok"))
    # The committer's form: a partial of the GAPIC method gets retry=None and a timeout
    # too, so the server sees exactly the attempts this loop makes (GAPIC's own retry
    # would add its own for UNAVAILABLE and DEADLINE_EXCEEDED).
    stream = call_with_retry(PATIENT, partial(fake_client.get_write_stream, name=FAKE_STREAM))
    assert stream.name == FAKE_STREAM
    assert fake.calls["GetWriteStream"] == 3


@pytest.mark.parametrize("per_call_timeout_s", [60.0, 0.25], ids=["deadline", "per-call-cap"])
def test_a_unary_call_that_never_answers_is_bounded_by_the_deadline(
    fake: FakeWrite, fake_client: BigQueryWriteClient, per_call_timeout_s: float
) -> None:
    fake.play("BatchCommitWriteStreams", Step("hang"))
    policy = RetryPolicy(deadline_s=0.8, initial_backoff_s=0.01, max_backoff_s=0.02)
    request = types.BatchCommitWriteStreamsRequest(parent="projects/p/datasets/d/tables/t")
    error, elapsed = timed(
        lambda: call_with_retry(
            policy,
            gapic(fake_client.batch_commit_write_streams, request=request),
            what="BatchCommitWriteStreams",
            on=request.parent,
            per_call_timeout_s=per_call_timeout_s,
        )
    )
    assert isinstance(error, RetryDeadlineError)
    assert 0.7 < elapsed < 0.8 + 0.5
    assert "BatchCommitWriteStreams on table p.d.t: DEADLINE_EXCEEDED" in str(error)
    # One attempt the length of the deadline, or several capped ones within it.
    attempts = fake.calls["BatchCommitWriteStreams"]
    assert attempts == 1 if per_call_timeout_s > 1 else attempts >= 3


@pytest.mark.parametrize("form", ["gapic", "partial"])
def test_unavailable_forever_ends_at_the_deadline_not_gapics(
    fake: FakeWrite, fake_client: BigQueryWriteClient, form: str
) -> None:
    # GAPIC would retry UNAVAILABLE for 600 s on its own: both forms turn that off.
    fake.play("FlushRows", Step("fail", Code.UNAVAILABLE, "down"))
    policy = RetryPolicy(deadline_s=0.5, initial_backoff_s=0.05, max_backoff_s=0.1)
    request = types.FlushRowsRequest(write_stream=FAKE_STREAM, offset=10)
    attempt = (
        gapic(fake_client.flush_rows, request=request)
        if form == "gapic"
        else partial(fake_client.flush_rows, request=request)
    )
    error, elapsed = timed(lambda: call_with_retry(policy, attempt))
    assert isinstance(error, RetryDeadlineError)
    assert elapsed < 0.5 + 0.3
    assert str(error).startswith(f"FlushRows on stream {FAKE_STREAM} (table {FAKE_TABLE}): ")
    assert "UNAVAILABLE: down" in str(error)
    assert "attempts (retry.deadline_s=0.5)" in str(error)


def test_a_last_attempt_cut_short_by_the_deadline_still_names_what_the_server_answered(
    fake: FakeWrite, fake_client: BigQueryWriteClient
) -> None:
    # The deadline, not the server, ends the last attempt: its DEADLINE_EXCEEDED is the
    # sink's own, and the error must still say the server kept answering UNAVAILABLE
    # (a CI run once ended an UNAVAILABLE-forever call on such a tail attempt).
    fake.play("FlushRows", Step("fail", Code.UNAVAILABLE, "down"), Step("hang"))
    policy = RetryPolicy(deadline_s=0.5, initial_backoff_s=0.01, max_backoff_s=0.02)
    request = types.FlushRowsRequest(write_stream=FAKE_STREAM, offset=10)
    error, _ = timed(
        lambda: call_with_retry(policy, gapic(fake_client.flush_rows, request=request))
    )
    assert isinstance(error, RetryDeadlineError)
    text = str(error)
    assert text.startswith(
        f"FlushRows on stream {FAKE_STREAM} (table {FAKE_TABLE}): DEADLINE_EXCEEDED"
    )
    assert "(before that: UNAVAILABLE: down)" in text


# -- StorageError parsing ---------------------------------------------------------------


def test_storage_error_from_an_in_stream_status() -> None:
    status = status_with(Code.INVALID_ARGUMENT, "x", (StorageCode.STREAM_FINALIZED, "sealed"))
    found = storage_errors.from_status(status)
    assert found == StorageErrorInfo("STREAM_FINALIZED", FAKE_STREAM, "sealed")
    assert str(found) == f"StorageError STREAM_FINALIZED on {FAKE_STREAM}: sealed"
    assert storage_error_of(status) == found
    # As it arrives: the response's error field, of the raw AppendRowsResponse.
    response = types.AppendRowsResponse.pb(types.AppendRowsResponse(error=status))
    assert storage_errors.from_status(response.error) == found


def test_a_status_without_a_storage_error_has_none() -> None:
    assert storage_errors.from_status(status_with(Code.INTERNAL, "x")) is None
    assert storage_errors.from_status(None) is None
    unrelated = status_pb2.Status(code=3)
    unrelated.details.add().Pack(error_details_pb2.ErrorInfo(reason="QUOTA"))
    assert storage_errors.from_status(unrelated) is None


def test_an_unknown_storage_error_code_is_kept_by_number() -> None:
    status = status_pb2.Status(code=3, details=[packed_storage_error(999, "e", "new")])
    assert storage_errors.from_status(status) == StorageErrorInfo("STORAGE_ERROR_999", "e", "new")


class _Call(grpc.RpcError):  # type: ignore[misc]  # grpc ships no types
    """The trailing metadata of a failed call, as grpc.Call offers it."""

    def __init__(self, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        self._metadata = metadata

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._metadata


def test_storage_error_from_grpc_trailing_metadata() -> None:
    status = status_with(Code.NOT_FOUND, "gone", (StorageCode.TABLE_NOT_FOUND, "no table"))
    call = _Call((("x-other", "1"), ("grpc-status-details-bin", status.SerializeToString())))
    expected = StorageErrorInfo("TABLE_NOT_FOUND", FAKE_STREAM, "no table")
    assert storage_errors.from_rpc_error(call) == expected
    assert storage_error_of(call) == expected
    assert storage_errors.from_rpc_error(_Call((("grpc-status-details-bin", b"\xff"),))) is None
    assert storage_errors.from_rpc_error(_Call(())) is None


def test_storage_error_from_a_real_grpc_error_and_its_api_core_error(
    fake: FakeWrite, fake_client: BigQueryWriteClient
) -> None:
    storage = (StorageCode.STREAM_NOT_FOUND, "no such stream")
    fake.play("GetWriteStream", Step("fail", Code.NOT_FOUND, "gone", storage))
    expected = StorageErrorInfo("STREAM_NOT_FOUND", FAKE_STREAM, "no such stream")
    with pytest.raises(grpc.RpcError) as raw:  # the raw gRPC call, under the GAPIC client
        fake_client.transport.get_write_stream(types.GetWriteStreamRequest(name=FAKE_STREAM))
    assert storage_errors.from_rpc_error(raw.value) == expected
    with pytest.raises(NotFound) as wrapped:  # the GAPIC method: a GoogleAPICallError
        fake_client.get_write_stream(name=FAKE_STREAM, retry=None)
    assert storage_errors.from_api_error(wrapped.value) == expected
    assert storage_error_of(wrapped.value) == expected
    # google-api-core keeps an unknown detail as an Any; from the details alone:
    converted = from_grpc_error(raw.value)
    detached = GoogleAPICallError("gone", details=converted.details)
    assert storage_errors.from_api_error(detached) == expected


def test_storage_error_from_api_core_details_already_unpacked() -> None:
    message = types.StorageError(
        code=StorageCode.STREAM_ALREADY_COMMITTED, entity="s", error_message="done"
    )
    for detail in (message, types.StorageError.pb(message)):
        error = GoogleAPICallError("x", details=[error_details_pb2.ErrorInfo(), detail])
        assert storage_errors.from_api_error(error) == StorageErrorInfo(
            "STREAM_ALREADY_COMMITTED", "s", "done"
        )
    assert storage_errors.from_api_error(GoogleAPICallError("x")) is None
    assert storage_error_of(ValueError("not a status")) is None


def test_tables_are_named_from_streams_and_tables() -> None:
    assert table_of(FAKE_STREAM) == FAKE_TABLE
    assert table_of("projects/p/datasets/d/tables/t") == FAKE_TABLE
    assert table_of("projects/p/datasets/d/tables/t/streams/_default") == FAKE_TABLE
    assert table_of("p.d.t") is None
    assert table_of(None) is None
    assert target_text(FAKE_STREAM) == f"stream {FAKE_STREAM} (table {FAKE_TABLE})"
    assert target_text("projects/p/datasets/d/tables/t") == f"table {FAKE_TABLE}"
    assert target_text("elsewhere") == "elsewhere"
    assert target_text(None) == "an unnamed stream or table"


# -- what an answer means (issue 55, item 4) ------------------------------------------


def _storage(code: str) -> StorageErrorInfo:
    return StorageErrorInfo(code, "projects/p/datasets/d/tables/t/streams/s", "")


@pytest.mark.parametrize(
    ("grpc_code", "message", "storage", "reading"),
    [
        # NOT_FOUND, as the local BigQuery and often real BigQuery answer (Beam #37140)
        ("NOT_FOUND", "Requested entity was not found. Entity: projects/p/.../_default", None,
         "missing"),
        # the StorageError decides, whatever the code (java-bigquerystorage PR #1559)
        ("INVALID_ARGUMENT", "", _storage("STREAM_NOT_FOUND"), "missing"),
        ("FAILED_PRECONDITION", "", _storage("STREAM_NOT_FOUND"), "missing"),
        ("INVALID_ARGUMENT", "", _storage("TABLE_NOT_FOUND"), "missing"),
        ("FAILED_PRECONDITION", "finalized", _storage("STREAM_FINALIZED"), None),
        # no StorageError: the message says so (Beam PR #16906)
        ("INVALID_ARGUMENT", "Stream projects/p/datasets/d/tables/t/streams/s does not exist",
         None, "missing"),
        ("FAILED_PRECONDITION", "Requested entity was not found.", None, "missing"),
        # an INVALID_ARGUMENT about something else is not a missing stream
        ("INVALID_ARGUMENT", "Field amount: value not found in enum", None, None),
        ("INVALID_ARGUMENT", "Invalid offset", None, None),
        # PERMISSION_DENIED, which BigQuery answers for a missing resource too (#238)
        ("PERMISSION_DENIED", "Permission 'TABLES_UPDATE_DATA' denied on resource "
         "'projects/p/datasets/d/tables/t' (or it may not exist).", None, "denied_or_missing"),
    ],
)  # fmt: skip
def test_each_shape_of_a_missing_stream_is_read_as_one(
    grpc_code: str, message: str, storage: StorageErrorInfo | None, reading: str | None
) -> None:
    assert storage_errors.reading_of(grpc_code, message, storage) == reading


@pytest.mark.parametrize("shape", ["INVALID_ARGUMENT", "FAILED_PRECONDITION"])
def test_a_unary_call_on_a_missing_stream_is_not_found_whatever_code_it_came_with(
    shape: str,
) -> None:
    """As NotFound (so code catching it keeps working), naming what BigQuery said."""
    stream = "projects/p/datasets/d/tables/t/streams/s"
    packed = any_pb2.Any()
    code = types.StorageError.StorageErrorCode.STREAM_NOT_FOUND
    packed.Pack(types.StorageError.pb()(code=code, entity=stream, error_message="gone"))
    error = from_grpc_status(getattr(grpc.StatusCode, shape), "gone", details=[packed])

    def attempt(timeout: float) -> None:
        raise error

    with pytest.raises(CallNotFoundError) as refused:
        call_with_retry(RetryPolicy(deadline_s=5), attempt, what="GetWriteStream", on=stream)
    assert isinstance(refused.value, NotFound)
    assert refused.value.grpc_code == shape
    assert refused.value.storage_code == "STREAM_NOT_FOUND"
    assert "BigQuery says it does not exist" in refused.value.message
