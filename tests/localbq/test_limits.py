"""The Storage Write API limits the local BigQuery enforces, each pinned by its documented
behaviour (BigQuery's "Storage Write API quotas and limits" and ``storage.proto``), and
the patches that let it take what BigQuery's limits allow: requests up to 20 MB, tables
of 10,000 columns.

The limits are shortened with :func:`onceover_tools.localbq.limits.limited` for the length of
a test; every test talks to the local BigQuery over its real gRPC endpoint with the
official client, and reads errors as a writer would: the gRPC status code, the
``StorageError`` packed in the status details, the rows counted in the table.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from google.api_core import exceptions
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_tools.localbq import limits, patches
from onceover_tools.localbq.limits import (
    WRITE_API_LIMITS,
    WriteApiLimitValues,
    create_stream_calls,
    limited,
)

from onceover.errors import ConfigurationError
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import (
    ARROW_SCHEMA,
    acknowledged_offset,
    append_all,
    append_request,
    commit,
    count,
    create_stream,
    create_table,
    rows,
    table_path,
)

PENDING = types.WriteStream.Type.PENDING
COMMITTED = types.WriteStream.Type.COMMITTED
RESOURCE_EXHAUSTED_CODE = 8
BUFFERED = types.WriteStream.Type.BUFFERED
Code = types.StorageError.StorageErrorCode
INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION, OUT_OF_RANGE = 3, 5, 6, 9, 11
DEADLINE_S = 5.0


# -- helpers ------------------------------------------------------------------------


def storage_errors(details: Iterable[Any]) -> list[tuple[int, str]]:
    """``(code, entity)`` of each ``StorageError`` Any-packed in a status's details."""
    found = []
    for packed in details:
        error = types.StorageError.pb()()
        assert packed.Unpack(error), f"not a StorageError: {packed.type_url}"
        found.append((error.code, error.entity))
    return found


def unary_storage_errors(error: exceptions.GoogleAPICallError) -> list[tuple[int, str]]:
    """The ``StorageError`` of a failed call: the client library parses the
    ``grpc-status-details-bin`` trailer (after checking its code and message are the
    call's) into ``details``."""
    return storage_errors(error.details)


def create(write: BigQueryWriteClient, table_id: str, kind: int) -> types.WriteStream:
    """CreateWriteStream without the client's retries (it retries RESOURCE_EXHAUSTED)."""
    return write.create_write_stream(
        parent=table_path(write, table_id),
        write_stream=types.WriteStream(type_=kind),
        retry=None,
        timeout=30,
    )


def flush_rows(write: BigQueryWriteClient, stream: str, offset: int) -> types.FlushRowsResponse:
    return write.flush_rows(request=types.FlushRowsRequest(write_stream=stream, offset=offset))


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; fail after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {deadline_s} s: {what}")
        time.sleep(0.02)


def wait_clock(until: float) -> None:
    """Let the monotonic clock reach ``until`` (an expiry under test), bounded."""
    assert until - time.monotonic() < DEADLINE_S
    while time.monotonic() < until:
        time.sleep(min(0.02, max(0.0, until - time.monotonic())))


def gone(write: BigQueryWriteClient, name: str) -> bool:
    try:
        write.get_write_stream(name=name, retry=None, timeout=10)
    except exceptions.NotFound:
        return True
    return False


# -- settings -----------------------------------------------------------------------


def test_the_defaults_are_bigquerys_documented_limits() -> None:
    """10,000 CreateWriteStream per hour per project; 10,000 streams per BatchCommit;
    PENDING streams live 24 h uncommitted, COMMITTED 3 days idle, BUFFERED 7 days idle;
    an AppendRows request takes at most 20 MB, read as 20,000,000 bytes. A flush to an
    offset already flushed (undocumented) answers ALREADY_EXISTS, as Apache Beam reads it."""
    day = 24 * 3600.0

    assert WriteApiLimitValues() == WriteApiLimitValues(
        create_streams_per_window=10_000,
        create_window_s=3600.0,
        commit_max_streams=10_000,
        pending_lifetime_s=day,
        committed_idle_s=3 * day,
        buffered_idle_s=7 * day,
        append_request_max_bytes=20_000_000,
        repeated_flush="already_exists",
    )
    assert WRITE_API_LIMITS.snapshot() == WriteApiLimitValues()  # the suite runs on them


def test_limited_overrides_inside_the_block_and_restores_after() -> None:
    with limited(commit_max_streams=2, pending_lifetime_s=1.5) as inside:
        assert WRITE_API_LIMITS.commit_max_streams == 2
        assert WRITE_API_LIMITS.pending_lifetime_s == 1.5
        assert inside == WRITE_API_LIMITS.snapshot()
        with limited(commit_max_streams=3):
            assert WRITE_API_LIMITS.snapshot() == WriteApiLimitValues(
                commit_max_streams=3, pending_lifetime_s=1.5
            )
        assert WRITE_API_LIMITS.commit_max_streams == 2

    assert WRITE_API_LIMITS.snapshot() == WriteApiLimitValues()
    with pytest.raises(TypeError, match="no Storage Write API limit is called 'streams'"):
        limited(streams=1).__enter__()
    with pytest.raises(ValueError, match="pending_lifetime_s must be a duration"):
        limited(pending_lifetime_s=0).__enter__()
    with limited(repeated_flush="ok"):
        assert WRITE_API_LIMITS.repeated_flush == "ok"
    with pytest.raises(ValueError, match=r"repeated_flush must be one of \('already_exists'"):
        limited(repeated_flush="OK").__enter__()
    with pytest.raises(TypeError, match="repeated_flush must be one of"):
        limited(repeated_flush=1).__enter__()
    assert WRITE_API_LIMITS.snapshot() == WriteApiLimitValues()


def test_the_limits_are_read_from_onceover_localbq_variables() -> None:
    """ONCEOVER_LOCALBQ_<FIELD> sets a limit (checked; naming the variable if wrong)."""
    env = {
        "ONCEOVER_LOCALBQ_CREATE_STREAMS_PER_WINDOW": "5",
        "ONCEOVER_LOCALBQ_CREATE_WINDOW_S": "60",
        "ONCEOVER_LOCALBQ_PENDING_LIFETIME_S": "0.5",
        "ONCEOVER_LOCALBQ_BUFFERED_IDLE_S": " ",  # blank: not set
        "ONCEOVER_LOCALBQ_APPEND_REQUEST_MAX_BYTES": "10485760",
        "ONCEOVER_LOCALBQ_REPEATED_FLUSH": " OK ",  # a word: blanks and case do not matter
        "BQEMU_GRPC_PORT": "0",
    }

    assert limits.from_environment(env) == {
        "create_streams_per_window": 5,
        "create_window_s": 60.0,
        "pending_lifetime_s": 0.5,
        "append_request_max_bytes": 10_485_760,
        "repeated_flush": "ok",
    }
    for variable, value in [
        ("ONCEOVER_LOCALBQ_COMMIT_MAX_STREAMS", "10k"),
        ("ONCEOVER_LOCALBQ_COMMIT_MAX_STREAMS", "-1"),
        ("ONCEOVER_LOCALBQ_COMMITTED_IDLE_S", "0"),
        ("ONCEOVER_LOCALBQ_APPEND_REQUEST_MAX_BYTES", "20MB"),
        ("ONCEOVER_LOCALBQ_APPEND_REQUEST_MAX_BYTES", str(limits.APPEND_REQUEST_CEILING_BYTES + 1)),
        ("ONCEOVER_LOCALBQ_REPEATED_FLUSH", "ignore"),
        ("ONCEOVER_LOCALBQ_REPEATED_FLUSH", "6"),
    ]:
        with pytest.raises(ConfigurationError, match=f"{variable}='{value}' is not"):
            limits.from_environment({variable: value})
    with limited():  # restores the limits afterwards
        applied = limits.apply_environment({"ONCEOVER_LOCALBQ_COMMIT_MAX_STREAMS": "7"})
        assert applied == {"commit_max_streams": 7}
        assert WRITE_API_LIMITS.commit_max_streams == 7
        applied = limits.apply_environment({"ONCEOVER_LOCALBQ_REPEATED_FLUSH": "already_exists"})
        assert applied == {"repeated_flush": "already_exists"}
    with pytest.raises(
        ConfigurationError,
        match="ONCEOVER_LOCALBQ_REPEATED_FLUSH='yes' is not one of already_exists, ok",
    ):
        limits.from_environment({"ONCEOVER_LOCALBQ_REPEATED_FLUSH": "yes"})


# -- create_stream_quota ------------------------------------------------------------


def test_create_write_stream_over_the_quota_is_resource_exhausted_naming_it(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """CreateWriteStream requests: N streams per hour per project; the next call fails
    with RESOURCE_EXHAUSTED naming the quota. The _default stream is not counted."""
    table_id = create_table(rest, dataset)
    default = f"{table_path(write, table_id)}/streams/_default"
    with limited(create_streams_per_window=3):
        created = [create(write, table_id, kind) for kind in (PENDING, COMMITTED, BUFFERED)]
        with pytest.raises(exceptions.ResourceExhausted) as refused:
            create(write, table_id, COMMITTED)
        # The _default stream needs no CreateWriteStream and still takes rows.
        write.get_write_stream(name=default)
        (response,) = append_all(write, [append_request(default, rows(0, 4), offset=None)])
        counted = create_stream_calls(rest.project)

    assert len({stream.name for stream in created}) == 3
    message = refused.value.message
    assert "Exceeds quota limit 'CreateWriteStream requests' of 3 streams per hour" in message
    assert message.endswith(f"Entity: {table_path(write, table_id)}")
    assert counted == 3  # the refused call is not counted
    assert not response.error.code
    assert count(rest, table_id) == (4, 4)
    assert create_stream_calls(rest.project) == 0  # limited() starts and ends at zero


@pytest.mark.alone
def test_the_create_quota_is_a_rolling_window(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A call is counted for one window after it was made, then frees its slot."""
    table_id = create_table(rest, dataset)
    window_s = 0.4
    with limited(create_streams_per_window=2, create_window_s=window_s):
        first_at = time.monotonic()
        create(write, table_id, COMMITTED)
        create(write, table_id, COMMITTED)
        with pytest.raises(exceptions.ResourceExhausted, match=r"per 0\.4 seconds"):
            create(write, table_id, COMMITTED)
        refused_at = time.monotonic()

        wait_clock(first_at + window_s + 0.05)  # both counted calls leave the window
        later = create(write, table_id, COMMITTED)
        counted = create_stream_calls(rest.project)

    assert refused_at - first_at < window_s, "too slow to test the window"
    assert later.name
    assert counted == 1


# -- commit_stream_limit ------------------------------------------------------------


def test_a_batch_commit_of_more_streams_than_the_limit_commits_nothing(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BatchCommitWriteStreams takes at most N streams per call; over it the call fails
    with INVALID_ARGUMENT and no stream is committed."""
    table_id = create_table(rest, dataset)
    streams = [create(write, table_id, PENDING).name for _ in range(3)]
    for index, name in enumerate(streams):
        append_all(write, [append_request(name, rows(index * 10, 10), offset=0)])
        write.finalize_write_stream(name=name)

    with limited(commit_max_streams=2):
        with pytest.raises(exceptions.InvalidArgument) as refused:
            commit(write, table_id, *streams)
        rows_after_refusal = count(rest, table_id)
        first_two = commit(write, table_id, *streams[:2])
    last = commit(write, table_id, streams[2])

    assert "names 3 streams; at most 2 streams can be committed" in refused.value.message
    assert rows_after_refusal == (0, 0)
    assert not first_two.stream_errors
    assert not last.stream_errors
    assert count(rest, table_id) == (30, 30)


def test_by_default_one_batch_commit_takes_at_most_10000_streams(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    names = [f"{table_path(write, table_id)}/streams/{i:016x}" for i in range(10_001)]

    with pytest.raises(exceptions.InvalidArgument, match="at most 10000 streams"):
        commit(write, table_id, *names)
    at_the_limit = commit(write, table_id, *names[:10_000])  # looked at: none exists

    assert len(at_the_limit.stream_errors) == 10_000
    assert {e.code for e in at_the_limit.stream_errors} == {Code.STREAM_NOT_FOUND}


# -- stream_lifetimes ---------------------------------------------------------------


@pytest.mark.alone
def test_a_pending_stream_not_committed_within_its_lifetime_is_deleted(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A PENDING stream not committed within its lifetime (BigQuery: 24 h) is deleted:
    BatchCommit reports STREAM_NOT_FOUND and commits nothing; Get, Finalize and
    AppendRows answer NOT_FOUND. A stream committed in time stays."""
    table_id = create_table(rest, dataset)
    committed_in_time = create(write, table_id, PENDING).name
    append_all(write, [append_request(committed_in_time, rows(100, 3), offset=0)])
    write.finalize_write_stream(name=committed_in_time)
    assert not commit(write, table_id, committed_in_time).stream_errors
    lifetime_s = 0.5

    with limited(pending_lifetime_s=lifetime_s):
        created_at = time.monotonic()
        late = create(write, table_id, PENDING).name
        (appended,) = append_all(write, [append_request(late, rows(0, 5), offset=0)])
        assert write.finalize_write_stream(name=late).row_count == 5
        wait_for("the uncommitted stream is deleted", lambda: gone(write, late))
        deleted_at = time.monotonic()

        response = types.BatchCommitWriteStreamsResponse.pb(commit(write, table_id, late))
        with pytest.raises(exceptions.NotFound) as finalize:
            write.finalize_write_stream(name=late)
        with pytest.raises(exceptions.NotFound) as append:
            append_all(write, [append_request(late, rows(5, 5), offset=5)])
        kept = types.WriteStream.pb(write.get_write_stream(name=committed_in_time))

    assert not appended.error.code
    assert deleted_at - created_at >= lifetime_s
    assert [(e.code, e.entity) for e in response.stream_errors] == [(Code.STREAM_NOT_FOUND, late)]
    assert not response.HasField("commit_time")
    assert unary_storage_errors(finalize.value) == [(Code.STREAM_NOT_FOUND, late)]
    assert unary_storage_errors(append.value) == [(Code.STREAM_NOT_FOUND, late)]
    assert kept.HasField("commit_time")
    assert count(rest, table_id) == (3, 3)


@pytest.mark.alone
def test_appending_does_not_extend_a_pending_streams_lifetime(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """The lifetime counts from creation; a connection left open on the stream gets
    NOT_FOUND with STREAM_NOT_FOUND in-stream once it is over."""
    table_id = create_table(rest, dataset)
    lifetime_s = 0.4
    with limited(pending_lifetime_s=lifetime_s):
        created_at = time.monotonic()
        stream = create(write, table_id, PENDING).name

        def requests() -> Iterator[types.AppendRowsRequest]:
            yield append_request(stream, rows(0, 5), offset=0)
            wait_clock(created_at + lifetime_s + 0.05)
            yield append_request(stream, rows(5, 5), offset=5, with_schema=False)

        first, second = write.append_rows(requests())

    assert first.append_result.offset == 0
    assert second.error.code == NOT_FOUND
    assert storage_errors(second.error.details) == [(Code.STREAM_NOT_FOUND, stream)]
    assert gone(write, stream)


@pytest.mark.alone
@pytest.mark.parametrize(
    ("kind", "idle_limit"),
    [(COMMITTED, "committed_idle_s"), (BUFFERED, "buffered_idle_s")],
    ids=["committed", "buffered"],
)
def test_an_idle_stream_is_deleted_and_its_committed_rows_stay(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str, kind: int, idle_limit: str
) -> None:
    """A COMMITTED stream without appends for 3 days (BUFFERED: 7 days) is deleted:
    appending to it answers NOT_FOUND with STREAM_NOT_FOUND; rows committed stay."""
    table_id = create_table(rest, dataset)
    idle_s = 0.3
    with limited(**{idle_limit: idle_s}):
        stream = create(write, table_id, kind).name
        appended_at = time.monotonic()  # at most the server's time of the append
        append_all(write, [append_request(stream, rows(0, 5), offset=0)])
        wait_for("the idle stream is deleted", lambda: gone(write, stream))
        deleted_at = time.monotonic()
        with pytest.raises(exceptions.NotFound) as append:
            append_all(write, [append_request(stream, rows(5, 5), offset=5)])
        with pytest.raises(exceptions.NotFound) as flush:
            flush_rows(write, stream, 5)

    assert deleted_at - appended_at >= idle_s
    assert unary_storage_errors(append.value) == [(Code.STREAM_NOT_FOUND, stream)]
    assert unary_storage_errors(flush.value) == [(Code.STREAM_NOT_FOUND, stream)]
    assert count(rest, table_id) == ((5, 5) if kind == COMMITTED else (0, 0))


@pytest.mark.alone
def test_appends_keep_a_committed_stream_alive(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """Idle means no append: a stream appended to more often than its idle limit lives
    on past it."""
    table_id = create_table(rest, dataset)
    idle_s = 0.6
    with limited(committed_idle_s=idle_s):
        created_at = time.monotonic()
        stream = create(write, table_id, COMMITTED).name
        offsets = []
        for offset in (0, 5, 10):
            (response,) = append_all(write, [append_request(stream, rows(offset, 5), offset)])
            offsets.append(response.append_result.offset)
            wait_clock(time.monotonic() + idle_s / 2)
        alive_at = time.monotonic()
        fetched = write.get_write_stream(name=stream)

    assert alive_at - created_at > idle_s
    assert offsets == [0, 5, 10]
    assert fetched.name == stream
    assert count(rest, table_id) == (15, 15)


# -- append_request_limit -----------------------------------------------------------


def one_row(row_id: int, name_bytes: int) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array([row_id], pa.int64()), pa.array(["n" * name_bytes])], schema=ARROW_SCHEMA
    )


def exactly(size: int, stream: str, row_id: int, offset: int) -> types.AppendRowsRequest:
    """An append of one row whose serialized request takes exactly ``size`` bytes: the
    row's name takes most of it, ``trace_id`` (which the server ignores) the rest."""
    request = append_request(stream, one_row(row_id, 0), offset)
    name_bytes = size - types.AppendRowsRequest.pb(request).ByteSize() - 64
    request = append_request(stream, one_row(row_id, name_bytes), offset)
    raw = types.AppendRowsRequest.pb(request)
    missing = size - raw.ByteSize()
    for length in range(missing - 1, missing - 6, -1):  # a tag, a varint length, the text
        raw.trace_id = "t" * length
        if raw.ByteSize() == size:
            return request
    raise AssertionError(f"no trace_id makes the request {size} bytes")


def test_a_request_up_to_20_mb_is_taken_and_a_larger_one_refused_in_the_stream(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "The size of a single AppendRowsRequest must be less than 20 MB in size. Requests
    larger than this return an error, typically INVALID_ARGUMENT": a request of
    20,000,000 bytes is appended, one byte more is refused in the stream naming both
    sizes and the stream, and the connection takes the next request. Both are well
    over bqemulator's own 10 MiB cap and its gRPC server's ~11 MB."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED).name
    at_the_limit = exactly(20_000_000, stream, 0, offset=0)
    over_it = exactly(20_000_001, stream, 1, offset=1)

    responses = append_all(write, [at_the_limit, over_it, append_request(stream, rows(1, 3), 1)])

    taken, refused, next_one = responses
    assert not taken.error.code
    assert taken.append_result.offset == 0
    assert refused.error.code == INVALID_ARGUMENT
    assert refused.error.message == (
        f"AppendRows request too large: 20000001 limit 20000000 Entity: {stream}"
    )
    assert storage_errors(refused.error.details) == []  # BigQuery documents no StorageError
    assert next_one.append_result.offset == 1  # the refused row took no offset
    assert count(rest, table_id) == (4, 4)


def test_the_request_limit_is_read_on_every_request(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """``append_request_max_bytes`` applies to the next request, on a connection already
    open too; the default 10 MiB of bqemulator no longer refuses anything below it."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED).name
    with limited(append_request_max_bytes=1_000):
        small, large = append_all(write, [
            exactly(1_000, stream, 0, offset=0),
            exactly(1_001, stream, 1, offset=1),
        ])  # fmt: skip
    over_bqemulators_own_cap = exactly(12 * 1024 * 1024, stream, 2, offset=1)
    (taken,) = append_all(write, [over_bqemulators_own_cap])

    assert small.append_result.offset == 0
    assert large.error.code == INVALID_ARGUMENT
    assert "AppendRows request too large: 1001 limit 1000" in large.error.message
    assert taken.append_result.offset == 1
    assert count(rest, table_id) == (2, 2)


# -- linear_column_alignment / wide_proto_rows: tables of 10,000 columns -------------

WIDE_COLUMNS = 10_000
"""BigQuery's "Maximum columns in a table"."""


def wide_table(rest: bigquery.Client, dataset: str) -> tuple[str, list[bigquery.SchemaField]]:
    """``id`` and 9,999 STRING columns (the widest kind for upb: 16 bytes a field)."""
    fields = [bigquery.SchemaField("id", "INT64")] + [
        bigquery.SchemaField(f"c{i:04d}", "STRING") for i in range(1, WIDE_COLUMNS)
    ]
    table_id = f"{dataset}.wide"
    rest.create_table(bigquery.Table(table_id, schema=fields))
    return table_id, fields


def wide_batch(fields: list[bigquery.SchemaField], first_id: int, count_: int) -> pa.RecordBatch:
    ids = list(range(first_id, first_id + count_))
    columns = [pa.array(ids, pa.int64())] + [
        pa.array([f"{field.name}-{i}" for i in ids]) for field in fields[1:]
    ]
    return pa.RecordBatch.from_arrays(columns, names=[f.name for f in fields])


def read_back(rest: bigquery.Client, table_id: str) -> list[tuple[object, ...]]:
    picked = ["id", "c0001", "c2999", "c3000", "c3001", "c6000", "c9999"]
    query = f"SELECT {', '.join(picked)} FROM `{table_id}` ORDER BY id"
    return [tuple(row.values()) for row in rest.query_and_wait(query)]


def expected_values(ids: range) -> list[tuple[object, ...]]:
    names = ["c0001", "c2999", "c3000", "c3001", "c6000", "c9999"]
    return [(i, *(f"{name}-{i}" for name in names)) for i in ids]


def test_an_arrow_append_to_a_10000_column_table_is_not_quadratic_in_its_columns(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BigQuery takes tables of up to 10,000 columns; bqemulator lined one such row up
    with the table by a list lookup per column, quadratic in the columns (the patch
    ``linear_column_alignment``)."""
    table_id, fields = wide_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED).name
    batch = wide_batch(fields, 0, 2)
    started = time.monotonic()

    (response,) = append_all(write, [append_request(stream, batch, offset=0)])

    elapsed = time.monotonic() - started
    assert not response.error.code
    # Far above what the patched lookup costs, far below what the quadratic one did.
    assert elapsed < 15.0, f"{elapsed:.1f} s for one append"
    assert read_back(rest, table_id) == expected_values(range(2))


def test_proto_rows_of_a_10000_column_table_are_decoded(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A proto writer schema too wide for one upb message class (here 9,999 STRING
    fields) is decoded in parts; every column lands, the parts' borders included."""
    from onceover_jobs.sink.rows.proto_rows import proto_schema, serialize_rows

    table_id, fields = wide_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED).name
    batch = wide_batch(fields, 0, 2)
    request = types.AppendRowsRequest(
        write_stream=stream,
        offset=0,
        proto_rows=types.AppendRowsRequest.ProtoData(
            writer_schema=proto_schema(fields, batch.schema),
            rows=types.ProtoRows(serialized_rows=serialize_rows(batch, fields)),
        ),
    )

    (response,) = append_all(write, [request])

    assert not response.error.code, response.error.message
    assert response.append_result.offset == 0
    assert read_back(rest, table_id) == expected_values(range(2))


# -- storage_error_details ----------------------------------------------------------


def test_in_stream_errors_carry_a_storage_error_naming_the_stream(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """AppendRowsResponse.error is a google.rpc.Status whose details hold a StorageError
    (OFFSET_ALREADY_EXISTS, OFFSET_OUT_OF_RANGE, STREAM_FINALIZED) naming the stream."""
    table_id = create_table(rest, dataset)
    stream = create(write, table_id, COMMITTED).name

    responses = append_all(write, [
        append_request(stream, rows(0, 10), offset=0),
        append_request(stream, rows(0, 10), offset=0),
        append_request(stream, rows(20, 10), offset=20),
    ])  # fmt: skip
    write.finalize_write_stream(name=stream)
    (after_finalize,) = append_all(write, [append_request(stream, rows(10, 10), offset=10)])

    errors = [(r.error.code, storage_errors(r.error.details)) for r in responses]
    assert errors == [
        (0, []),
        (ALREADY_EXISTS, [(Code.OFFSET_ALREADY_EXISTS, stream)]),
        (OUT_OF_RANGE, [(Code.OFFSET_OUT_OF_RANGE, stream)]),
    ]
    assert after_finalize.error.code == FAILED_PRECONDITION
    assert storage_errors(after_finalize.error.details) == [(Code.STREAM_FINALIZED, stream)]
    assert count(rest, table_id) == (10, 10)


def test_failed_calls_carry_a_storage_error_in_their_status_details(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A failed Get/Finalize/Flush/CreateWriteStream or AppendRows connection sends a
    google.rpc.Status with the StorageError in grpc-status-details-bin."""
    table_id = create_table(rest, dataset)
    parent = table_path(write, table_id)
    unknown = f"{parent}/streams/0123456789abcdef"
    committed = create(write, table_id, COMMITTED).name
    pending = create(write, table_id, PENDING).name
    write.finalize_write_stream(name=pending)
    commit(write, table_id, pending)
    calls: list[tuple[type[exceptions.GoogleAPICallError], Callable[[], object], Any]] = [
        (exceptions.NotFound, lambda: write.get_write_stream(name=unknown),
         (Code.STREAM_NOT_FOUND, unknown)),
        (exceptions.NotFound, lambda: write.finalize_write_stream(name=unknown),
         (Code.STREAM_NOT_FOUND, unknown)),
        (exceptions.NotFound, lambda: append_all(write, [append_request(unknown, rows(0, 1), 0)]),
         (Code.STREAM_NOT_FOUND, unknown)),
        (exceptions.InvalidArgument, lambda: flush_rows(write, committed, 1),
         (Code.INVALID_STREAM_TYPE, committed)),
        (exceptions.FailedPrecondition, lambda: write.finalize_write_stream(name=pending),
         (Code.STREAM_ALREADY_COMMITTED, pending)),
        (exceptions.NotFound, lambda: create(write, f"{dataset}.missing", COMMITTED),
         (Code.TABLE_NOT_FOUND, table_path(write, f"{dataset}.missing"))),
    ]  # fmt: skip

    for expected, call, storage_error in calls:
        with pytest.raises(expected) as failed:
            call()
        assert unary_storage_errors(failed.value) == [storage_error]


# -- the patches are installed; a separate local BigQuery reads the environment -------


@pytest.mark.parametrize(
    "name",
    [
        "create_stream_quota",
        "commit_stream_limit",
        "stream_lifetimes",
        "append_request_limit",
        "storage_error_details",
        "buffered_flush",
        "linear_column_alignment",
        "wide_proto_rows",
        "missing_stream_answers",
        "pending_buffer",
        "idle_connections",
        "throughput_quota",
        "arrow_rows",
    ],
)
def test_every_limit_patch_is_installed_once(name: str) -> None:
    assert patches.install().count(name) == 1


def test_a_separately_launched_local_bigquery_reads_the_variables_at_start(
    subprocess_env: dict[str, str],
) -> None:
    """``onceover up`` starts ``onceover bigquery``, whose install reads them: a wrong
    value stops it before it serves, naming the variable."""
    env = {**subprocess_env, "ONCEOVER_LOCALBQ_PENDING_LIFETIME_S": "a day"}

    finished = subprocess.run(
        [sys.executable, "-m", "onceover_tools", "bigquery", "--ready-json",
         "--rest-port", "0", "--grpc-port", "0"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert finished.returncode == 2
    assert finished.stdout == ""  # no ready line
    assert "ONCEOVER_LOCALBQ_PENDING_LIFETIME_S='a day' is not a number of seconds" in (
        finished.stderr
    )


# -- missing_stream_answers --------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "raised", "storage_error"),
    [
        ("not_found", exceptions.NotFound, True),
        ("invalid_argument", exceptions.InvalidArgument, True),
        ("failed_precondition", exceptions.FailedPrecondition, True),
        ("permission_denied", exceptions.PermissionDenied, False),
    ],
)
def test_a_missing_stream_is_answered_in_each_shape_real_bigquery_uses(
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    bq_config: Any,
    dataset: str,
    shape: str,
    raised: type[exceptions.GoogleAPICallError],
    storage_error: bool,
) -> None:
    """Real BigQuery answers "this stream does not exist" as NOT_FOUND, as INVALID_ARGUMENT
    (Beam PR #16906: "the stream doesn't exist or has already been finalized"), as
    FAILED_PRECONDITION with the StorageError (java-bigquerystorage PR #1559: "can be
    preconditioned_failure"), or as PERMISSION_DENIED "Permission 'TABLES_UPDATE_DATA'
    denied on resource '...' (or it may not exist)." (python-bigquery-storage #238). The
    setting gives each; the sink reads the first three as a stream that is gone, and never
    the fourth, which it names as both."""
    from onceover_jobs.sink.wire.retry import RetryPolicy
    from onceover_jobs.sink.wire.stream_calls import stream_exists
    from onceover_jobs.sink.wire.unary import CallDeniedError
    from onceover_jobs.sink.wire.write_api import write_api

    table_id = create_table(rest, dataset)
    unknown = f"{table_path(write, table_id)}/streams/0123456789abcdef"
    calls: list[Callable[[], object]] = [
        lambda: write.get_write_stream(name=unknown, retry=None),
        lambda: write.finalize_write_stream(name=unknown, retry=None),
        lambda: append_all(write, [append_request(unknown, rows(0, 1), 0)]),
    ]
    sink_client = write_api(bq_config)
    with limited(missing_stream_answer=shape):
        for call in calls:
            with pytest.raises(raised) as failed:
                call()
            expected = [(Code.STREAM_NOT_FOUND, unknown)] if storage_error else []
            assert unary_storage_errors(failed.value) == expected
            if not storage_error:
                assert failed.value.message == (
                    f"Permission 'TABLES_UPDATE_DATA' denied on resource '{unknown}' "
                    "(or it may not exist)."
                )
        policy = RetryPolicy(deadline_s=5)
        if storage_error:
            assert stream_exists(sink_client, policy, unknown) is False
        else:
            with pytest.raises(CallDeniedError, match="does not say which") as denied:
                stream_exists(sink_client, policy, unknown)
            assert "roles/bigquery.dataEditor" in str(denied.value)


# -- pending_buffer ------------------------------------------------------------------


def test_a_finalized_pending_streams_rows_are_dropped_after_the_buffer_time(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "After the stream is finalized and before it is committed, the data can remain in
    the buffer for up to 4 hours" (write-api-batch). A stream committed in time keeps its
    rows; one committed later commits none of them, and its commit still succeeds (the
    answer a caller must guard against: BigQuery documents none)."""
    table_id = create_table(rest, dataset)
    with limited(pending_buffer_s=1.0):
        late = create(write, table_id, PENDING).name
        append_all(write, [append_request(late, rows(0, 5), 0)])
        write.finalize_write_stream(name=late)
        finalized = time.monotonic()
        in_time = create(write, table_id, PENDING).name
        append_all(write, [append_request(in_time, rows(5, 5), 0)])
        write.finalize_write_stream(name=in_time)
        assert commit(write, table_id, in_time).commit_time
        assert count(rest, table_id) == (5, 5)

        # What is waited for is the buffer's time itself: BigQuery's clock, not a race.
        passed = lambda: time.monotonic() - finalized > 1.2 or None  # noqa: E731
        wait_until("the buffer's time to pass", passed, 5)
        answer = commit(write, table_id, late)
    assert answer.commit_time
    assert not answer.stream_errors
    assert count(rest, table_id) == (5, 5)  # the late stream's rows are gone


# -- idle_connections ------------------------------------------------------------------


def test_a_connection_idle_past_its_time_is_closed_with_aborted(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BigQuery ends an AppendRows connection that has had no request for 10 minutes:
    ABORTED, "Closing the stream because it has been inactive for 600 seconds. Entity:
    <stream>" (python-bigquery-storage #593; java-bigquerystorage PR #2942: "An idle
    connection will be closed by the server after 10 minutes of inactivity"). The rows
    answered stay; the stream takes the next offset on a new connection."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    table_id = create_table(rest, dataset)
    stream = create(write, table_id, COMMITTED).name
    requests: queue.Queue[types.AppendRowsRequest | None] = queue.Queue()

    def sent() -> Iterator[types.AppendRowsRequest]:
        while (request := requests.get()) is not None:
            yield request

    with limited(connection_idle_s=0.5):
        requests.put(append_request(stream, rows(0, 5), 0))
        responses = iter(write.append_rows(sent()))
        assert acknowledged_offset(next(responses)) == 0
        began = time.monotonic()
        with ThreadPoolExecutor(1) as reader:
            ended = reader.submit(next, responses)  # nothing more is sent
            try:
                with pytest.raises(exceptions.Aborted) as closed:
                    ended.result(timeout=5)  # bounded: without the patch it never ends
            finally:
                requests.put(None)
        waited = time.monotonic() - began
    assert closed.value.message == (
        f"Closing the stream because it has been inactive for 0.5 seconds. Entity: {stream}"
    )
    assert 0.4 < waited < 5
    (answer,) = append_all(write, [append_request(stream, rows(5, 5), 5)])
    assert acknowledged_offset(answer) == 5
    assert count(rest, table_id) == (10, 10)


# -- throughput_quota ------------------------------------------------------------------


def test_appends_over_the_throughput_quota_are_refused_until_it_refills(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BigQuery refuses an append over the project's throughput quota with
    RESOURCE_EXHAUSTED, "Exceeds 'AppendRows throughput' quota, user_id: ... (status:
    INSUFFICIENT_TOKENS) ... Entity: <stream>" (Beam PR #25073), and "all append
    operations are rejected while a quota is being refilled" (Beam PR #31837). Refused
    requests take no offset; once refilled the same offset is taken."""
    table_id = create_table(rest, dataset)
    stream = create(write, table_id, COMMITTED).name
    small = append_request(stream, rows(0, 5), 0)
    size = len(types.AppendRowsRequest.serialize(small))
    budget = 3 * size + size // 2  # three requests of the size, not four
    with limited(append_bytes_per_window=budget, append_window_s=60.0, append_refill_s=0.5):
        answers = append_all(
            write, [append_request(stream, rows(5 * i, 5), 5 * i) for i in range(5)]
        )
        codes = [types.AppendRowsResponse.pb(a).error.code for a in answers]
        assert codes[:3] == [0, 0, 0]
        assert codes[3:] == [RESOURCE_EXHAUSTED_CODE] * 2  # over it, then while it refills
        message = types.AppendRowsResponse.pb(answers[3]).error.message
        assert message.startswith("Exceeds 'AppendRows throughput' quota, user_id: ")
        assert "(status: INSUFFICIENT_TOKENS)" in message
        assert message.endswith(f"Entity: {stream}")
        began = time.monotonic()
        refilled = lambda: time.monotonic() > began + 0.6 or None  # noqa: E731
        wait_until("the quota to refill", refilled, 5)
        (again,) = append_all(write, [append_request(stream, rows(15, 5), 15)])
    assert acknowledged_offset(again) == 15
    assert count(rest, table_id) == (20, 20)


# -- arrow_rows ------------------------------------------------------------------------


def test_a_project_set_to_refuse_arrow_refuses_arrow_rows_and_takes_proto(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A project without Arrow ingestion (the Python client's "only selected for
    allowlisted customers" until 2.33) refuses an ``arrow_rows`` append; it takes
    ``proto_rows`` as ever. The refused request takes no offset."""
    from onceover_jobs.sink.modes.staging import row_encoder

    from tests.helpers.writeapi import SCHEMA

    table_id = create_table(rest, dataset)
    stream = create(write, table_id, COMMITTED).name
    proto = row_encoder("proto", lambda: SCHEMA, ARROW_SCHEMA)
    encoded = proto.encode(rows(0, 5))
    as_proto = types.AppendRowsRequest(write_stream=stream, offset=0)
    proto.schema_payload(as_proto)
    encoded.apply(as_proto)
    with limited(arrow_rows="refused"):
        (refused,) = append_all(write, [append_request(stream, rows(0, 5), 0)])
        (taken,) = append_all(write, [as_proto])
    error = types.AppendRowsResponse.pb(refused).error
    assert error.code == 3  # INVALID_ARGUMENT
    assert error.message == f"Arrow format is not supported for this project. Entity: {stream}"
    assert acknowledged_offset(taken) == 0  # the refused request took no offset
    assert count(rest, table_id) == (5, 5)


# -- schema_update_lag -----------------------------------------------------------------


def test_a_column_added_by_a_schema_update_is_refused_by_appends_until_the_write_api_sees_it(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "If the BigQuery table schema is updated, users will be able to ingest data on the
    new schema after some time (in order of minutes)" (Google's JsonStreamWriter); until
    then BigQuery answers "Input schema has more fields than BigQuery schema, extra
    fields: ..." and appends nothing. Rows of the old columns are taken meanwhile."""
    table_id = create_table(rest, dataset)
    table = rest.get_table(table_id)
    table.schema = [*table.schema, bigquery.SchemaField("note", "STRING")]
    wider = pa.schema([*ARROW_SCHEMA, pa.field("note", pa.string())])
    noted = pa.record_batch([*rows(0, 3).columns, pa.array(["a", "b", "c"])], schema=wider)
    stream = create(write, table_id, COMMITTED).name
    with limited(schema_update_lag_s=60.0):
        rest.update_table(table, ["schema"])
        (refused,) = append_all(write, [append_request(stream, noted, 0)])
        (taken,) = append_all(write, [append_request(stream, rows(0, 2), 0)])
    error = types.AppendRowsResponse.pb(refused).error
    assert error.code == INVALID_ARGUMENT
    assert error.message.startswith(
        "Input schema has more fields than BigQuery schema, extra fields: 'note'"
    )
    assert acknowledged_offset(taken) == 0  # the refused request took no offset
    # The lag over (the setting back to 0): the same stream takes the new column.
    (later,) = append_all(write, [append_request(stream, noted.slice(2), 2)])
    assert acknowledged_offset(later) == 2
    got = rest.query_and_wait(f"SELECT id, note FROM `{table_id}` ORDER BY id")
    assert [(r["id"], r["note"]) for r in got] == [(0, None), (1, None), (2, "c")]
