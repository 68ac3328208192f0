"""Invariant 2 at BigQuery's request limit: every request the sink sends, the writer
schema included, stays under ``request.max_bytes``, on a 10,000-column table whose
schema alone takes hundreds of kilobytes, in both row formats, and when a reconnect or
a retried task sends a request again as the first of a new connection (which carries
the schema again).

The local BigQuery refuses any request over the sink's cap (``append_request_limit``,
set to ``request.max_bytes`` in each test), so a request sized without the schema
fails the task. Each test also records what the appender put on the wire, and counts
the rows and ids BigQuery holds. The rows are few and wide: a long ``payload`` string
sizes each request, the other 9,998 columns hold small values of five types. The
tasks run as Spark runs them (``write_partition``), committed mode, default options.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import AppendRejectedError
from onceover_jobs.sink.job.options import (
    BIGQUERY_MAX_REQUEST_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    MAX_REQUEST_BYTES_LIMIT,
    parse_options,
)
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import WriteIdentity
from onceover_jobs.sink.modes.staging import TaskContextInfo, encoder_for
from onceover_jobs.sink.protocol.task import write_partition
from onceover_jobs.sink.rows.schema import plan_write, to_bigquery_arrow
from onceover_jobs.sink.wire import appender
from onceover_jobs.sink.wire.requests import (
    REQUEST_OVERHEAD_BYTES,
    ArrowEncoder,
    plan_requests,
    request_budget,
    schema_bytes,
)
from onceover_tools.localbq.limits import limited

from onceover.bigquery import BigQueryConfig
from tests.helpers.writeapi import count

COLUMNS = 10_000
FILLER_TYPES = (
    ("INT64", pa.int64()),
    ("STRING", pa.string()),
    ("FLOAT64", pa.float64()),
    ("BOOL", pa.bool_()),
    ("TIMESTAMP", pa.timestamp("us", tz="UTC")),
)
FILLERS = [
    (f"col_{i:05d}", *FILLER_TYPES[i % len(FILLER_TYPES)]) for i in range(2, COLUMNS)
]  # fmt: skip
FIELDS = [
    bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("payload", "STRING"),
    *(bigquery.SchemaField(name, bq_type) for name, bq_type, _ in FILLERS),
]
ARROW_SCHEMA = pa.schema(
    [("id", pa.int64()), ("payload", pa.string()), *((n, t) for n, _, t in FILLERS)]
)
NEAR = 0.99
"""A request "near the cap" takes at least this share of it."""
UNDER_BY = 20_000
"""How far under the budget of rows the one-row batch is sized: close, clear of rounding."""
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def filler(arrow_type: pa.DataType, ids: list[int]) -> pa.Array:
    if pa.types.is_int64(arrow_type):
        return pa.array(ids, arrow_type)
    if pa.types.is_string(arrow_type):
        return pa.array([f"v{i}" for i in ids], arrow_type)
    if pa.types.is_floating(arrow_type):
        return pa.array([i / 4 for i in ids], arrow_type)
    if pa.types.is_boolean(arrow_type):
        return pa.array([i % 2 == 0 for i in ids], arrow_type)
    return pa.array([T0 + datetime.timedelta(seconds=i) for i in ids], arrow_type)


def wide_rows(first_id: int, rows: int, payload_bytes: int) -> pa.RecordBatch:
    """``rows`` rows of every column, ids from ``first_id``, each with a payload of
    ``payload_bytes``."""
    ids = list(range(first_id, first_id + rows))
    columns = [pa.array(ids, pa.int64()), pa.array(["p" * payload_bytes] * rows, pa.string())]
    columns += [filler(arrow_type, ids) for _, _, arrow_type in FILLERS]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def wide_job(
    bq_config: BigQueryConfig, table: str, checkpoint: Path, row_format: str = "arrow"
) -> SinkJob:
    """The streaming sink's job on the wide table as the driver plans it
    (``onceover_jobs.sink.datasource.prepare_job``): committed mode, the default request cap."""
    parsed = parse_options(
        {"table": table, "checkpointLocation": str(checkpoint), "mode": "committed",
         "row_format": row_format, "retry.deadline_s": "30", "run_id": "run-1"},
        default_project=None,
        streaming=True,
    )  # fmt: skip
    return SinkJob(
        options=parsed, bigquery=bq_config, plan=plan_write(table, ARROW_SCHEMA, FIELDS),
        table_fields=tuple(f.to_api_repr() for f in FIELDS),
        write=WriteIdentity("streaming", "query-1", table, None),
    )  # fmt: skip


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    table_id = f"{dataset}.wide"
    rest.create_table(bigquery.Table(table_id, schema=FIELDS))
    return table_id


# -- sizing rows against the budget --------------------------------------------------


def _varint_bytes(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _payload_adds(row_format: str, rows: int, payload: int) -> int:
    """What a payload of ``payload`` bytes a row adds to the encoded rows: Arrow pads
    the string data to 8 bytes; a proto row holds the string's length as a varint."""
    if row_format == "arrow":
        return -(-rows * payload // 8) * 8
    return rows * (payload + _varint_bytes(payload) - 1)


@dataclass(frozen=True)
class Sized:
    batch: pa.RecordBatch
    encoded_bytes: int


def sized(job: SinkJob, first_id: int, rows: int, at_most: int) -> Sized:
    """``rows`` rows whose encoded size in the job's row format is at most ``at_most``,
    and within a few bytes a row of it (one encoding: 10,000 proto columns take
    seconds)."""
    converted = to_bigquery_arrow(wide_rows(first_id, rows, 0), job.plan)
    base = encoder_for(job).encode(converted).bytes
    payload = (at_most - base) // rows
    while base + _payload_adds(job.options.row_format, rows, payload) > at_most:
        payload -= 1
    size = base + _payload_adds(job.options.row_format, rows, payload)
    assert at_most - size < 16 * rows
    return Sized(wide_rows(first_id, rows, payload), size)


@dataclass(frozen=True)
class Workload:
    """Two batches sized against the budget of every request (cap - schema - envelope).

    ``whole``: one row just under the budget: the largest request that may carry the
    schema, sent whole, the schema with it as the first of a connection, near the cap.
    ``split``: two rows over the budget by half the schema: a request under the cap
    without the schema and over it with; they must go as two requests.
    """

    whole: Sized
    split: Sized

    @property
    def batches(self) -> list[pa.RecordBatch]:
        return [self.whole.batch, self.split.batch]


@functools.cache
def workload(row_format: str) -> Workload:
    """The same for every test of a row format (sizing encodes the rows)."""
    job = wide_job(BigQueryConfig(), "sizing.only.wide", Path("unused"), row_format)
    budget = request_budget(encoder_for(job), job.options.max_request_bytes)
    return Workload(
        whole=sized(job, 0, 1, budget.rows_bytes - UNDER_BY),
        split=sized(job, 1, 2, budget.rows_bytes + budget.schema_bytes // 2),
    )


# -- what went on the wire -----------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    bytes: int
    with_schema: bool


@pytest.fixture
def on_the_wire(monkeypatch: pytest.MonkeyPatch) -> list[Sent]:
    """Every AppendRows request the appender sends: its serialized size (what the local
    BigQuery measures) and whether it carries the writer schema."""
    sent: list[Sent] = []
    original = appender._Connection.send

    def send(connection: appender._Connection, request: object) -> None:
        raw = types.AppendRowsRequest.pb(request)
        rows = raw.arrow_rows if raw.HasField("arrow_rows") else raw.proto_rows
        sent.append(Sent(raw.ByteSize(), rows.HasField("writer_schema")))
        original(connection, request)

    monkeypatch.setattr(appender._Connection, "send", send)
    return sent


# -- tests ---------------------------------------------------------------------------


def test_the_cap_defaults_under_bigquerys_limit_with_headroom() -> None:
    assert BIGQUERY_MAX_REQUEST_BYTES == 20_000_000
    assert DEFAULT_MAX_REQUEST_BYTES == 19_000_000
    assert DEFAULT_MAX_REQUEST_BYTES < MAX_REQUEST_BYTES_LIMIT < BIGQUERY_MAX_REQUEST_BYTES


@pytest.mark.parametrize("row_format", ["arrow", "proto"])
def test_a_10000_column_table_takes_requests_near_the_cap_and_none_over_it(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    table: str,
    tmp_path: Path,
    on_the_wire: list[Sent],
    row_format: str,
) -> None:
    job = wide_job(bq_config, table, tmp_path, row_format)
    cap = job.options.max_request_bytes
    schema = schema_bytes(encoder_for(job))
    work = workload(row_format)

    with limited(append_request_max_bytes=cap):  # any request over the cap is refused
        result = write_partition(job, work.batches, TaskContextInfo(0, 0, 1))

    assert cap == DEFAULT_MAX_REQUEST_BYTES
    assert schema > 150_000  # the wide schema is a real share of the cap
    # The two-row batch fits under the cap without the schema, not with it.
    assert work.split.encoded_bytes + REQUEST_OVERHEAD_BYTES <= cap
    assert work.split.encoded_bytes + REQUEST_OVERHEAD_BYTES + schema > cap
    assert result.rows == 3
    # The one-row batch whole, first, with the schema; the two-row batch in two.
    assert [s.with_schema for s in on_the_wire] == [True, False, False]
    assert max(s.bytes for s in on_the_wire) <= cap
    assert on_the_wire[0].bytes >= NEAR * cap
    assert count(rest, table) == (3, 3)


@pytest.mark.parametrize(
    ("action", "attempts"), [("drop", 1), ("error", 2)], ids=["reconnect", "retried-task"]
)
def test_a_request_sent_again_on_a_new_connection_carries_the_schema_under_the_cap(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    table: str,
    tmp_path: Path,
    on_the_wire: list[Sent],
    monkeypatch: pytest.MonkeyPatch,
    action: str,
    attempts: int,
) -> None:
    """The response to the near-cap request (the first of its connection, with the
    schema) is lost. ``drop``: the appender reconnects and sends it again; ``error``:
    the task fails, and its retry sends it again, the ledger not knowing it
    acknowledged. Either way it goes first on a new connection, with the schema again,
    under the cap; BigQuery answers ALREADY_EXISTS and holds the row once."""
    job = wide_job(bq_config, table, tmp_path)
    cap = job.options.max_request_bytes
    rows = [workload("arrow").whole.batch]
    monkeypatch.setenv(failpoints.ENV, f"append.response={action}@1")
    failpoints.reset()

    with limited(append_request_max_bytes=cap):
        if attempts == 2:
            with pytest.raises(Exception, match=r"append\.response"):
                write_partition(job, rows, TaskContextInfo(0, 0, 1))
        result = write_partition(job, rows, TaskContextInfo(0, attempts - 1, 1))

    assert failpoints.fired() == [("append.response", action, 1)]
    assert result.rows == 1
    first, again = on_the_wire  # the one request, and the same sent again
    assert first.with_schema
    assert again.with_schema
    assert again.bytes == first.bytes
    assert NEAR * cap <= again.bytes <= cap
    assert count(rest, table) == (1, 1)


def test_a_schema_that_leaves_no_room_for_a_row_is_refused_before_anything_is_sent() -> None:
    encoder = ArrowEncoder(ARROW_SCHEMA)
    schema = schema_bytes(encoder)
    cap = schema + REQUEST_OVERHEAD_BYTES  # nothing left for rows

    planned = plan_requests([wide_rows(0, 1, 0)], encoder, cap, table="p.d.wide")
    with pytest.raises(AppendRejectedError) as refused:
        next(planned)

    text = str(refused.value)
    assert "the table p.d.wide" in text
    assert f"takes {schema:,} bytes" in text
    assert f"request cap of {cap:,} bytes (request.max_bytes" in text
    assert refused.value.table == "p.d.wide"
    assert refused.value.stream is None  # nothing was sent
