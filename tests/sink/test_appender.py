"""The appender's retry policy (invariant 1) and request cap (invariant 2), against the
local BigQuery: outcomes are counted in the table, not taken from the appender."""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import AppendRejectedError, DuplicateAppendError, RetryDeadlineError
from onceover_jobs.sink.wire.appender import PlannedAppend, StreamAppender
from onceover_jobs.sink.wire.requests import ArrowEncoder, plan_requests
from onceover_jobs.sink.wire.retry import RetryPolicy

from tests.helpers.writeapi import (
    ARROW_SCHEMA,
    append_all,
    append_request,
    count,
    create_stream,
    create_table,
)
from tests.helpers.writeapi import rows as make_rows

COMMITTED = types.WriteStream.Type.COMMITTED


class Heard:
    def __init__(self) -> None:
        self.acked: list[int | None] = []
        self.existing: list[int | None] = []
        self.gaps: list[int | None] = []
        self.errors: list[tuple[str, bool]] = []
        self.throttles: list[tuple[int | None, str]] = []

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None:
        self.acked.append(append.offset)

    def already_exists(self, append: PlannedAppend) -> None:
        self.existing.append(append.offset)

    def out_of_range(self, append: PlannedAppend, message: str) -> None:
        self.gaps.append(append.offset)

    def error(self, append: PlannedAppend | None, code: str, message: str, retrying: bool) -> None:
        self.errors.append((code, retrying))

    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        self.throttles.append((append.offset, message))


def arm(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(failpoints.ENV, spec)
    failpoints.reset()


def appender(write: BigQueryWriteClient, stream: str, heard: Heard) -> StreamAppender:
    encoder = ArrowEncoder(ARROW_SCHEMA)
    return StreamAppender(
        write,
        stream,
        schema_payload=encoder.schema_payload,
        listener=heard,
        context="test",
        policy=RetryPolicy(deadline_s=20),
        max_inflight=3,
    )


def send(
    target: StreamAppender,
    batches: list[pa.RecordBatch],
    max_bytes: int = 8_000_000,
    start: int = 0,
) -> int:
    sent = 0
    for request in plan_requests(batches, ArrowEncoder(ARROW_SCHEMA), max_bytes, start_row=start):
        target.append(
            PlannedAppend(
                request.offset, request.encoded.rows, request.encoded.bytes, request.encoded.apply
            )
        )
        sent += request.encoded.rows
    target.flush()
    target.close()
    return sent


def test_pipelined_appends_land_every_row_once(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    heard = Heard()
    sent = send(appender(write, stream, heard), [make_rows(i * 100, 100) for i in range(20)])
    assert sent == 2000
    assert heard.acked == [i * 100 for i in range(20)]
    assert count(rest, table) == (2000, 2000)


def test_a_lost_response_is_resent_and_already_exists_counts_as_success(
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    dataset: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    arm(monkeypatch, "append.response=drop@3")
    heard = Heard()
    send(appender(write, stream, heard), [make_rows(i * 100, 100) for i in range(8)])
    # The dropped response and the two behind it in the pipeline (3 in flight) were all
    # applied; re-sent, each answers ALREADY_EXISTS and counts as acknowledged.
    assert heard.existing == [200, 300, 400]
    assert ("UNAVAILABLE", True) in heard.errors
    assert count(rest, table) == (800, 800)


def test_a_lost_request_is_resent(
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    dataset: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    arm(monkeypatch, "append.before=drop@2")
    heard = Heard()
    send(appender(write, stream, heard), [make_rows(i * 100, 100) for i in range(5)])
    assert count(rest, table) == (500, 500)


def test_already_exists_for_a_request_never_sent_before_fails(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    append_all(write, [append_request(stream, make_rows(0, 100), 0)])  # someone else wrote
    heard = Heard()
    with pytest.raises(DuplicateAppendError, match=r"offsets 0\.\.99 .* never sent before"):
        send(appender(write, stream, heard), [make_rows(500, 100)])
    assert count(rest, table) == (100, 100)


def test_a_gap_rewinds_once_then_fails_naming_the_offset(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    heard = Heard()
    with pytest.raises(AppendRejectedError, match=r"offsets 50\.\.59 .*OUT_OF_RANGE"):
        send(appender(write, stream, heard), [make_rows(0, 60)], start=50)
    assert heard.gaps == [50, 50]
    assert count(rest, table) == (0, 0)


def test_a_bad_value_is_refused_naming_the_rows(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    bad_schema = pa.schema([("id", pa.string()), ("name", pa.string())])
    encoder = ArrowEncoder(bad_schema)
    heard = Heard()
    target = StreamAppender(
        write,
        stream,
        schema_payload=encoder.schema_payload,
        listener=heard,
        context="batch 4 partition 1",
        policy=RetryPolicy(deadline_s=5),
    )
    batch = pa.record_batch([pa.array(["x"] * 3), pa.array(["a"] * 3)], schema=bad_schema)
    encoded = encoder.encode(batch)
    target.append(PlannedAppend(0, 3, encoded.bytes, encoded.apply))
    with pytest.raises(AppendRejectedError, match=r"batch 4 partition 1: .*offsets 0\.\.2"):
        target.flush()
    target.close()
    assert heard.errors
    assert heard.errors[-1][1] is False


def test_rows_near_the_request_cap_are_split_under_it(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    big = "x" * 900_000  # ~0.9 MB a row: 9 rows fit under a 9 MB cap, 10 do not
    batch = pa.record_batch(
        [pa.array(range(40), pa.int64()), pa.array([big] * 40)], schema=ARROW_SCHEMA
    )
    requests = list(plan_requests([batch], ArrowEncoder(ARROW_SCHEMA), 9_000_000))
    assert all(r.encoded.bytes <= 9_000_000 - 2_000 for r in requests)
    assert sum(r.encoded.rows for r in requests) == 40
    assert max(r.encoded.bytes for r in requests) > 6_000_000  # not needlessly small
    heard = Heard()
    send(appender(write, stream, heard), [batch], max_bytes=9_000_000)
    assert count(rest, table) == (40, 40)


def test_a_single_row_over_the_cap_is_refused_naming_it() -> None:
    batch = pa.record_batch(
        [pa.array([1, 2], pa.int64()), pa.array(["s", "y" * 200_000])], schema=ARROW_SCHEMA
    )
    with pytest.raises(AppendRejectedError, match=r"row at offset 1 .*\(request.max_bytes\)"):
        list(plan_requests([batch], ArrowEncoder(ARROW_SCHEMA), 100_000))


def test_a_connection_bigquery_closed_while_idle_is_replaced_and_every_row_lands_once(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    """A task whose rows come slowly (an upstream join, a slow source) leaves its
    connection idle; BigQuery closes it after 10 minutes with ABORTED. The next request
    goes on a new connection at the next offset: no error reported, no retry, each row
    once."""
    from onceover_tools.localbq.limits import limited

    from tests.helpers.waiting import wait_until

    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    heard = Heard()
    target = appender(write, stream, heard)
    encoder = ArrowEncoder(ARROW_SCHEMA)
    with limited(connection_idle_s=0.5):
        for start in (0, 100):
            encoded = encoder.encode(make_rows(start, 100))
            target.append(PlannedAppend(start, 100, encoded.bytes, encoded.apply))
            target.flush()
            connection = target._connection
            assert connection is not None
            closed = lambda: connection.ended.is_set() or None  # noqa: B023, E731
            wait_until("BigQuery to close the idle connection", closed, 10)
        encoded = encoder.encode(make_rows(200, 100))
        target.append(PlannedAppend(200, 100, encoded.bytes, encoded.apply))
        target.flush()
    target.close()
    assert heard.acked == [0, 100, 200]
    assert heard.errors == []  # an idle close is not a failure
    assert heard.existing == []
    assert count(rest, table) == (300, 300)


def test_appends_the_throughput_quota_refuses_wait_for_it_past_the_retry_deadline(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    """BigQuery refuses every append while its throughput quota refills (up to 10 minutes
    for the long-term quota): the stream waits for it under ``retry.throttle_s``, not the
    shorter ``retry.deadline_s``, says so once per spell, and each row lands once."""
    from onceover_tools.localbq.limits import limited

    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    heard = Heard()
    encoder = ArrowEncoder(ARROW_SCHEMA)
    target = StreamAppender(
        write, stream, schema_payload=encoder.schema_payload, listener=heard, context="test",
        policy=RetryPolicy(deadline_s=0.3, throttle_deadline_s=30, initial_backoff_s=0.05,
                           throttle_max_backoff_s=0.2),
        max_inflight=2,
    )  # fmt: skip
    first = encoder.encode(make_rows(0, 100))
    with limited(append_bytes_per_window=4 * first.bytes, append_window_s=60.0,
                 append_refill_s=1.0):  # fmt: skip
        for start in range(0, 1000, 100):
            encoded = encoder.encode(make_rows(start, 100))
            target.append(PlannedAppend(start, 100, encoded.bytes, encoded.apply))
        target.flush()
    target.close()
    assert sorted(o for o in heard.acked if o is not None) == list(range(0, 1000, 100))
    assert heard.throttles, "no throttling was heard"
    assert len(heard.throttles) <= 3  # once per spell, not per try
    assert all(code == "RESOURCE_EXHAUSTED" for code, _ in heard.errors)
    assert all(retrying for _, retrying in heard.errors)
    assert count(rest, table) == (1000, 1000)


def test_a_quota_that_does_not_refill_in_time_fails_naming_it(
    write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    from onceover_tools.localbq.limits import limited

    table = create_table(rest, dataset)
    stream = create_stream(write, table, COMMITTED).name
    encoder = ArrowEncoder(ARROW_SCHEMA)
    target = StreamAppender(
        write, stream, schema_payload=encoder.schema_payload, listener=Heard(),
        context="batch 2 partition 0",
        policy=RetryPolicy(deadline_s=0.2, throttle_deadline_s=0.5, initial_backoff_s=0.05,
                           throttle_max_backoff_s=0.1),
    )  # fmt: skip
    encoded = encoder.encode(make_rows(0, 100))
    with limited(append_bytes_per_window=0, append_refill_s=30.0):
        target.append(PlannedAppend(0, 100, encoded.bytes, encoded.apply))
        with pytest.raises(RetryDeadlineError) as failed:
            target.flush()
    said = str(failed.value)
    assert "BigQuery's throughput quota refused rows at offsets 0..99" in said
    assert "(retry.throttle_s 0.5 s)" in said
    assert "Exceeds 'AppendRows throughput' quota" in said  # BigQuery's own words
    assert "Ask for more AppendRows throughput quota" in said
    assert count(rest, table) == (0, 0)
