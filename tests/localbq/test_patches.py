"""Each launcher patch, pinned by the documented BigQuery behaviour it restores.

Every test talks to the local BigQuery over its real REST and gRPC endpoints; a
test failing here means the local BigQuery no longer behaves like BigQuery where
the sink relies on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import pyarrow as pa
import pytest
from google.api_core import exceptions
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types, writer
from onceover_tools.localbq import LocalBigQuery, LocalBigQueryOptions, patches
from onceover_tools.localbq.limits import limited

from tests.helpers.writeapi import (
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
BUFFERED = types.WriteStream.Type.BUFFERED
Code = types.StorageError.StorageErrorCode
STREAM_ALREADY_COMMITTED = Code.STREAM_ALREADY_COMMITTED


# -- optional_spatial -------------------------------------------------------------


class _RecordingConnection:
    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, sql: str) -> None:
        self.statements.append(sql)
        if sql.startswith("LOAD"):
            raise OSError(
                'Extension "spatial" not found. Install it first using "INSTALL spatial".'
            )


class _Engine:
    def __init__(self) -> None:
        self.connection = _RecordingConnection()


def test_spatial_extension_is_never_downloaded() -> None:
    """Nothing downloads at start: no INSTALL, no automatic extension install."""
    from bqemulator.storage.engine import DuckDBEngine

    patches.install()
    engine = _Engine()

    DuckDBEngine._load_spatial(engine)  # type: ignore[arg-type]

    assert not [s for s in engine.connection.statements if s.upper().startswith("INSTALL")]
    assert "SET autoinstall_known_extensions = false" in engine.connection.statements


def test_the_server_starts_without_the_spatial_extension(local_bigquery: LocalBigQuery) -> None:
    connection = local_bigquery.server._engine.connection
    loaded = connection.execute(
        "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'spatial'"
    ).fetchall()
    autoinstall = connection.execute(
        "SELECT current_setting('autoinstall_known_extensions')"
    ).fetchone()

    assert loaded in ([], [(False,)])
    assert autoinstall == (False,)


# -- no_snapshot_per_write --------------------------------------------------------


def test_appends_copy_no_snapshot_and_queries_still_see_every_append(
    local_bigquery: LocalBigQuery,
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    dataset: str,
) -> None:
    """BigQuery appends do not copy the table; a query after an append sees it."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED)
    engine = local_bigquery.server._engine

    def snapshots() -> int:
        # Nothing in this project takes USER snapshots, so any table here is an AUTO one.
        return len(
            engine.connection.execute(
                "SELECT 1 FROM duckdb_tables() WHERE schema_name = '_bqemulator_snapshots'"
            ).fetchall()
        )

    for offset in (0, 100, 200):
        append_all(write, [append_request(stream.name, rows(offset, 100), offset=offset)])
        # The same query text each time: a stale query cache would answer 100.
        assert count(rest, table_id) == (offset + 100, offset + 100)

    assert snapshots() == 0


# -- stream_times -----------------------------------------------------------------


def test_get_write_stream_reports_create_time_and_commit_time_of_a_pending_stream(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """WriteStream.commit_time: empty on a PENDING stream until it is committed."""
    table_id = create_table(rest, dataset)
    created = create_stream(write, table_id, PENDING)
    append_all(write, [append_request(created.name, rows(0, 3), offset=0)])
    write.finalize_write_stream(name=created.name)

    before_commit = types.WriteStream.pb(write.get_write_stream(name=created.name))
    committed = types.BatchCommitWriteStreamsResponse.pb(commit(write, table_id, created.name))
    after_commit = types.WriteStream.pb(write.get_write_stream(name=created.name))

    create_time = types.WriteStream.pb(created).create_time
    assert before_commit.create_time == create_time
    assert not before_commit.HasField("commit_time")
    assert after_commit.create_time == create_time
    assert after_commit.commit_time == committed.commit_time
    assert committed.commit_time.ToDatetime() >= create_time.ToDatetime()


def test_a_committed_stream_has_commit_time_equal_to_create_time(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    created = types.WriteStream.pb(create_stream(write, table_id, COMMITTED))

    fetched = types.WriteStream.pb(write.get_write_stream(name=created.name))

    assert fetched.create_time == created.create_time
    assert fetched.commit_time == created.create_time


def test_the_default_stream_was_created_with_its_table(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """WriteStream.create_time: for the _default stream, the table's creation time."""
    table_id = create_table(rest, dataset)
    table_created = rest.get_table(table_id).created

    fetched = types.WriteStream.pb(
        write.get_write_stream(name=f"{table_path(write, table_id)}/streams/_default")
    )

    created = fetched.create_time.ToDatetime(tzinfo=UTC)
    assert table_created is not None
    assert abs((created - table_created).total_seconds()) < 0.001
    assert fetched.commit_time == fetched.create_time


# -- stream_already_committed -----------------------------------------------------


def test_committing_a_committed_stream_again_answers_stream_already_committed(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, PENDING)
    append_all(write, [append_request(stream.name, rows(0, 7), offset=0)])
    write.finalize_write_stream(name=stream.name)
    first = commit(write, table_id, stream.name)

    again = commit(write, table_id, stream.name)

    assert not first.stream_errors
    assert [(e.code, e.entity) for e in again.stream_errors] == [
        (STREAM_ALREADY_COMMITTED, stream.name)
    ]
    assert count(rest, table_id) == (7, 7)


# -- sticky_write_stream ----------------------------------------------------------


def test_requests_after_the_first_may_omit_the_stream_name(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """AppendRowsRequest.write_stream is required only in a connection's first request."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED)
    template = types.AppendRowsRequest(
        write_stream=stream.name,
        arrow_rows=types.AppendRowsRequest.ArrowData(
            writer_schema=types.ArrowSchema(
                serialized_schema=rows(0, 1).schema.serialize().to_pybytes()
            )
        ),
    )
    manager = writer.AppendRowsStream(write, template)
    try:
        futures = [
            manager.send(append_request("", rows(i * 10, 10), offset=i * 10, with_schema=False))
            for i in range(5)
        ]
        offsets = [future.result(timeout=30).append_result.offset for future in futures]
    finally:
        manager.close()

    assert offsets == [0, 10, 20, 30, 40]
    assert count(rest, table_id) == (50, 50)


# -- record_columns ---------------------------------------------------------------

RECORD_SCHEMA = [
    bigquery.SchemaField("id", "INT64"),
    bigquery.SchemaField(
        "address",
        "RECORD",
        fields=[bigquery.SchemaField("city", "STRING"), bigquery.SchemaField("zip", "INT64")],
    ),
    bigquery.SchemaField(
        "items",
        "RECORD",
        mode="REPEATED",
        fields=[bigquery.SchemaField("sku", "STRING"), bigquery.SchemaField("qty", "INT64")],
    ),
]
ADDRESS = pa.struct([("city", pa.string()), ("zip", pa.int64())])
ITEM = pa.struct([("sku", pa.string()), ("qty", pa.int64())])


def test_record_and_repeated_record_columns_accept_arrow_appends(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A RECORD column takes an Arrow struct, a REPEATED RECORD column an Arrow
    list<struct> (ArrowData: the Arrow schema converted from the table's)."""
    table_id = f"{dataset}.records"
    rest.create_table(bigquery.Table(table_id, schema=RECORD_SCHEMA))
    stream = create_stream(write, table_id, COMMITTED)
    batch = pa.record_batch(
        [
            pa.array([0, 1, 2, 3], pa.int64()),
            pa.array(
                [
                    {"city": "Lyon", "zip": 69001},
                    {"city": None, "zip": 75001},
                    None,
                    {"city": "", "zip": None},
                ],
                ADDRESS,
            ),
            pa.array(
                [
                    [{"sku": "a", "qty": 2}, {"sku": None, "qty": None}],
                    [],
                    None,
                    [{"sku": "b", "qty": -1}],
                ],
                pa.list_(ITEM),
            ),
        ],
        names=["id", "address", "items"],
    )

    responses = append_all(
        write,
        [
            append_request(stream.name, batch.slice(0, 2), offset=0),
            append_request(stream.name, batch.slice(2), offset=2, with_schema=False),
        ],
    )
    stored = rest.query_and_wait(
        "SELECT id, address.city AS city, address.zip AS zip, address IS NULL AS no_address,"
        " ARRAY(SELECT AS STRUCT i.sku, i.qty FROM UNNEST(items) AS i WITH OFFSET AS n"
        f" ORDER BY n) AS items FROM `{table_id}` ORDER BY id"
    )

    assert [acknowledged_offset(r) for r in responses] == [0, 2]
    assert [tuple(row.values()) for row in stored] == [
        (0, "Lyon", 69001, False, [{"sku": "a", "qty": 2}, {"sku": None, "qty": None}]),
        (1, None, 75001, False, []),
        (2, None, None, True, []),  # BigQuery has no NULL array: NULL reads back as []
        (3, "", None, False, [{"sku": "b", "qty": -1}]),
    ]


# -- append_rows_pool -------------------------------------------------------------


def test_32_appendrows_connections_are_served_at_once(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """Each connection stays open until all 32 have their first response."""
    connections = 32
    table_id = create_table(rest, dataset)
    streams = [create_stream(write, table_id, COMMITTED) for _ in range(connections)]
    answered = threading.Barrier(connections + 1)
    release = threading.Event()
    offsets: dict[int, int] = {}

    def connection(index: int) -> None:
        def requests() -> Iterator[types.AppendRowsRequest]:
            yield append_request(streams[index].name, rows(index * 10, 10), offset=0)
            release.wait(120)  # hold the connection (and its server thread) open

        responses = write.append_rows(requests())
        offsets[index] = acknowledged_offset(next(iter(responses)))
        answered.wait(120)
        for _ in responses:
            pass

    threads = [threading.Thread(target=connection, args=(i,), daemon=True) for i in range(32)]
    for thread in threads:
        thread.start()
    try:
        answered.wait(120)  # BrokenBarrierError if any connection is not served in time
    finally:
        release.set()
        for thread in threads:
            thread.join(60)

    assert sorted(offsets) == list(range(connections))
    assert count(rest, table_id) == (connections * 10, connections * 10)


# -- one_duckdb_user_at_a_time -----------------------------------------------------


def test_queries_and_appends_on_other_tables_run_at_once_without_hanging(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BigQuery serves queries and appends concurrently; the emulator used to deadlock.

    Four writers append 40 small requests each to tables of their own while four
    readers query those tables over REST; everything must finish before the deadline
    and every row must be counted once.
    """
    writers, appends, deadline_s = 4, 40, 120.0
    tables = [create_table(rest, dataset, f"w{i}") for i in range(writers)]
    failures: list[BaseException] = []
    stop_reading = threading.Event()

    def append(index: int) -> None:
        try:
            stream = create_stream(write, tables[index], COMMITTED).name
            for n in range(appends):
                (response,) = append_all(write, [append_request(stream, rows(n * 5, 5), n * 5)])
                assert acknowledged_offset(response) == n * 5
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    def query(index: int) -> None:
        try:
            while not stop_reading.is_set():
                count(rest, tables[index % writers])
        except BaseException as exc:
            failures.append(exc)

    appenders = [threading.Thread(target=append, args=(i,), daemon=True) for i in range(writers)]
    readers = [threading.Thread(target=query, args=(i,), daemon=True) for i in range(4)]
    deadline = time.monotonic() + deadline_s
    for thread in (*appenders, *readers):
        thread.start()
    for thread in appenders:
        thread.join(max(0.0, deadline - time.monotonic()))
    stop_reading.set()
    for thread in readers:
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in (*appenders, *readers) if t.is_alive()]
    assert not hung, f"still running after {deadline_s:.0f} s: {hung}"
    assert not failures, failures
    for table in tables:
        assert count(rest, table) == (appends * 5, appends * 5)


# -- buffered_flush ---------------------------------------------------------------
# storage.proto, FlushRowsRequest.offset: "Ending offset of the flush operation. Rows
# before this offset(including this offset) will be flushed."; FlushRowsResponse.offset:
# "The rows before this offset (including this offset) are flushed."


def flush(write: BigQueryWriteClient, stream: str, offset: int) -> int:
    """FlushRows to ``offset`` without the client's retries; the offset answered."""
    request = types.FlushRowsRequest(write_stream=stream, offset=offset)
    return int(write.flush_rows(request=request, retry=None, timeout=30).offset)


def refused_flush(
    write: BigQueryWriteClient, stream: str, offset: int
) -> tuple[type[exceptions.GoogleAPICallError], str, list[tuple[int, str]]]:
    """The error class, message and ``(StorageError code, entity)`` of a refused flush."""
    with pytest.raises(exceptions.GoogleAPICallError) as refused:
        flush(write, stream, offset)
    found = []
    for packed in refused.value.details:
        error = types.StorageError.pb()()
        assert packed.Unpack(error), f"not a StorageError: {packed.type_url}"
        found.append((error.code, error.entity))
    return type(refused.value), refused.value.message, found


def visible_ids(rest: bigquery.Client, table_id: str) -> list[int]:
    return [row["id"] for row in rest.query_and_wait(f"SELECT id FROM `{table_id}` ORDER BY id")]


def buffered_stream(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str, appended: int = 5
) -> tuple[str, str]:
    """A table and a BUFFERED stream on it with rows 0 .. ``appended`` - 1 appended."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, BUFFERED).name
    (response,) = append_all(write, [append_request(stream, rows(0, appended), offset=0)])
    assert acknowledged_offset(response) == 0
    return table_id, stream


def test_flush_rows_makes_the_rows_up_to_and_including_its_offset_visible(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """FlushRowsRequest.offset: rows before it, and the row at it, are flushed; the
    response's offset is the request's. Before any flush a BUFFERED stream's rows are
    invisible."""
    table_id, stream = buffered_stream(rest, write, dataset, appended=5)
    before = count(rest, table_id)

    first = flush(write, stream, 2)
    after_first = visible_ids(rest, table_id)
    second = flush(write, stream, 4)

    assert before == (0, 0)
    assert first == 2
    assert after_first == [0, 1, 2]
    assert second == 4
    assert visible_ids(rest, table_id) == [0, 1, 2, 3, 4]


def test_flushing_an_offset_already_flushed_answers_already_exists(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A flush to an offset already flushed (BigQuery does not document the answer):
    ALREADY_EXISTS with OFFSET_ALREADY_EXISTS naming the stream, which Apache Beam's
    StorageApiFlushAndFinalizeDoFn reads as "already flushed up to this point"; the
    last flushed offset itself counts. Nothing is flushed again."""
    table_id, stream = buffered_stream(rest, write, dataset, appended=5)
    flush(write, stream, 2)
    flush(write, stream, 4)

    answers = [refused_flush(write, stream, offset) for offset in (2, 4, 0)]

    for offset, (error, message, storage_errors) in zip((2, 4, 0), answers, strict=True):
        assert error is exceptions.AlreadyExists
        assert message == (
            f"Offset {offset} is already flushed: the stream is flushed up to offset 4 "
            f"Entity: {stream}"
        )
        assert storage_errors == [(Code.OFFSET_ALREADY_EXISTS, stream)]
    assert count(rest, table_id) == (5, 5)


def test_a_repeated_flush_can_be_set_to_answer_ok(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """``repeated_flush="ok"``: a flush to an offset already flushed answers OK with the
    requested offset and flushes nothing again; a new offset still flushes."""
    table_id, stream = buffered_stream(rest, write, dataset, appended=5)
    flush(write, stream, 2)

    with limited(repeated_flush="ok"):
        again = [flush(write, stream, offset) for offset in (2, 1)]
        after_repeats = count(rest, table_id)
        further = flush(write, stream, 4)
        repeated_last = flush(write, stream, 4)

    assert again == [2, 1]
    assert after_repeats == (3, 3)
    assert (further, repeated_last) == (4, 4)
    assert count(rest, table_id) == (5, 5)


def test_flushing_past_the_last_appended_row_is_out_of_range(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """Flushing an offset no row has reached yet: OUT_OF_RANGE "Offset N is beyond the
    end of the stream" with OFFSET_OUT_OF_RANGE; with 5 rows appended, offset 5 is past
    the end (the last row is offset 4). Nothing is flushed."""
    table_id, stream = buffered_stream(rest, write, dataset, appended=5)
    empty = create_stream(write, table_id, BUFFERED).name

    answers = {
        (stream, 5): refused_flush(write, stream, 5),
        (stream, 9): refused_flush(write, stream, 9),
        (empty, 0): refused_flush(write, empty, 0),
    }

    for (name, offset), answer in answers.items():
        assert answer == (
            exceptions.OutOfRange,
            f"Offset {offset} is beyond the end of the stream Entity: {name}",
            [(Code.OFFSET_OUT_OF_RANGE, name)],
        )
    assert count(rest, table_id) == (0, 0)
    assert flush(write, stream, 4) == 4  # the stream still flushes
    assert count(rest, table_id) == (5, 5)


def test_flushed_rows_leave_the_buffer_and_later_appends_flush_after_them(
    local_bigquery: LocalBigQuery,
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    dataset: str,
) -> None:
    """Rows flushed are in the table, so the local BigQuery keeps only the rows not yet
    flushed: a long-lived BUFFERED stream (one per Spark partition, flushed at each
    micro-batch's commit) costs the rows of one batch, not its history. A flush that
    ends inside an append keeps the rest of it; appends after a flush go on at the next
    offset and flush in turn, each row once."""
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, BUFFERED).name
    manager = local_bigquery.server._context.write_streams

    def buffered_rows() -> int:
        return sum(table.num_rows for table in manager.get(stream).buffer)

    append_all(write, [
        append_request(stream, rows(0, 2), offset=0),
        append_request(stream, rows(2, 3), offset=2, with_schema=False),
    ])  # fmt: skip
    flush(write, stream, 2)  # rows 0..2: all of the first append, one row of the second
    after_first = buffered_rows()
    (appended,) = append_all(write, [append_request(stream, rows(5, 5), offset=5)])
    flush(write, stream, 7)
    after_second = buffered_rows()
    flush(write, stream, 9)

    assert after_first == 2  # rows 3 and 4
    assert acknowledged_offset(appended) == 5
    assert after_second == 2  # rows 8 and 9
    assert buffered_rows() == 0
    assert manager.get(stream).buffer == []
    assert visible_ids(rest, table_id) == list(range(10))


def test_flush_rows_answers_as_before_for_other_streams(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """Not the patch's to change, pinned so it stays: an unknown stream answers
    NOT_FOUND (STREAM_NOT_FOUND), a stream that is not BUFFERED INVALID_ARGUMENT
    (INVALID_STREAM_TYPE), a finalized BUFFERED stream OUT_OF_RANGE (STREAM_FINALIZED)
    and flushes nothing more."""
    table_id, stream = buffered_stream(rest, write, dataset, appended=5)
    committed = create_stream(write, table_id, COMMITTED).name
    unknown = f"{table_path(write, table_id)}/streams/0123456789abcdef"
    flush(write, stream, 1)
    write.finalize_write_stream(name=stream)

    assert refused_flush(write, unknown, 0)[::2] == (
        exceptions.NotFound,
        [(Code.STREAM_NOT_FOUND, unknown)],
    )
    assert refused_flush(write, committed, 0)[::2] == (
        exceptions.InvalidArgument,
        [(Code.INVALID_STREAM_TYPE, committed)],
    )
    assert refused_flush(write, stream, 3)[::2] == (
        exceptions.OutOfRange,
        [(Code.STREAM_FINALIZED, stream)],
    )
    assert count(rest, table_id) == (2, 2)


# -- keep_host_logging ------------------------------------------------------------


def test_starting_in_process_leaves_the_host_logging_alone() -> None:
    root = logging.getLogger()
    marker = logging.NullHandler()
    root.addHandler(marker)
    handlers, level = list(root.handlers), root.level
    try:
        with LocalBigQuery(LocalBigQueryOptions()):
            assert root.handlers == handlers
            assert root.level == level
    finally:
        root.removeHandler(marker)


@pytest.mark.parametrize(
    "name",
    [
        "stream_times",
        "append_rows_pool",
        "optional_spatial",
        "one_duckdb_user_at_a_time",
        "buffered_flush",
        "column_defaults",
    ],
)
def test_every_patch_is_installed_once(name: str) -> None:
    assert patches.install().count(name) == 1


# -- range_partitioning ------------------------------------------------------------


def test_a_table_created_with_integer_range_partitioning_answers_it(
    rest: bigquery.Client, dataset: str
) -> None:
    """``tables.insert`` takes ``rangePartitioning`` (field; range start, end, interval)
    and ``tables.get`` answers it (the Table resource); an update without it keeps it."""
    table = bigquery.Table(
        f"{dataset}.ranged",
        schema=[bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("v", "STRING")],
    )
    table.range_partitioning = bigquery.RangePartitioning(
        field="id", range_=bigquery.PartitionRange(start=0, end=1_000, interval=100)
    )
    rest.create_table(table)
    got = rest.get_table(table.reference).range_partitioning
    assert got is not None
    assert got.field == "id"
    assert (got.range_.start, got.range_.end, got.range_.interval) == (0, 1_000, 100)
    fetched = rest.get_table(table.reference)
    fetched.description = "orders by id"
    rest.update_table(fetched, ["description"])
    kept = rest.get_table(table.reference).range_partitioning
    assert kept is not None
    assert kept.field == "id"
    plain = rest.create_table(bigquery.Table(f"{dataset}.plain", schema=table.schema))
    assert rest.get_table(plain.reference).range_partitioning is None


# -- primary_keys ------------------------------------------------------------------


def test_a_table_created_with_a_primary_key_answers_it(rest: bigquery.Client, dataset: str) -> None:
    """``tables.insert`` takes ``tableConstraints.primaryKey`` (NOT ENFORCED keys; CDC
    needs one) and ``tables.get`` answers it; an update without it keeps it; a table made
    again under the same name without one has none."""
    schema = [bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("region", "STRING"),
              bigquery.SchemaField("v", "STRING")]  # fmt: skip
    table = bigquery.Table(f"{dataset}.keyed", schema=schema)
    table._properties["tableConstraints"] = {"primaryKey": {"columns": ["id", "region"]}}
    rest.create_table(table)

    def key() -> list[str] | None:
        constraints = rest.get_table(table.reference).table_constraints
        if constraints is None or constraints.primary_key is None:
            return None
        return list(constraints.primary_key.columns)

    assert key() == ["id", "region"]
    fetched = rest.get_table(table.reference)
    fetched.description = "keyed by id and region"
    rest.update_table(fetched, ["description"])
    assert key() == ["id", "region"]
    rest.delete_table(table.reference)
    rest.create_table(bigquery.Table(f"{dataset}.keyed", schema=schema))
    assert key() is None


# -- duplicate_job_id --------------------------------------------------------------


def test_a_job_inserted_again_under_its_id_is_refused_and_not_run_twice(
    local_bigquery: LocalBigQuery, rest: bigquery.Client, dataset: str
) -> None:
    """ "If the BigQuery REST API receives a jobs.insert request for a job with the same
    ID, the REST API fails because the job already exists" (Google's Python client, "Design
    of query retries"): 409 ``duplicate``, and the second request's statement never runs.
    Over raw REST: the client itself answers a Conflict by fetching the first job."""
    import uuid

    import requests

    config = local_bigquery.config
    rest.create_table(bigquery.Table(f"{dataset}.t", schema=[bigquery.SchemaField("id", "INT64")]))
    job_id = f"once_{uuid.uuid4().hex}"
    assert config.rest_endpoint is not None
    url = f"{config.rest_endpoint.rstrip('/')}/bigquery/v2/projects/{config.project}/jobs"
    body: dict[str, Any] = {
        "jobReference": {"projectId": config.project, "jobId": job_id},
        "configuration": {
            "query": {"query": f"INSERT INTO `{dataset}.t` VALUES (1)", "useLegacySql": False}
        },
    }
    first = requests.post(url, json=body, timeout=30)
    assert first.status_code == 200, first.text
    rest.get_job(job_id).result()
    again = requests.post(url, json=body, timeout=30)
    assert again.status_code == 409, again.text
    error = again.json()["error"]
    assert error["errors"][0]["reason"] == "duplicate"
    assert job_id in error["message"]
    (row,) = rest.query(f"SELECT COUNT(*) AS n FROM `{dataset}.t`").result()
    assert row.n == 1  # the statement ran once
    assert rest.get_job(job_id).state == "DONE"  # the first job's record is kept


# -- missing_dataset ---------------------------------------------------------------


def test_a_table_inserted_into_a_missing_dataset_is_not_found(rest: bigquery.Client) -> None:
    """``tables.insert`` into a dataset that does not exist: 404 notFound, naming the
    dataset, at once (a 500 would be retried by the client for its whole deadline)."""
    from google.api_core.retry import Retry

    table = bigquery.Table(
        f"{rest.project}.no_such_dataset.orders", schema=[bigquery.SchemaField("id", "INT64")]
    )
    with pytest.raises(exceptions.NotFound, match="no_such_dataset"):
        rest.create_table(table, retry=Retry(timeout=5))


# -- column_defaults ---------------------------------------------------------------


def test_a_column_left_out_of_the_writer_schema_gets_its_default_when_asked(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """``default_missing_value_interpretation`` = DEFAULT_VALUE "is applied to all
    requests on the connection from that point forward"; ``missing_value_interpretations``
    overrides it for "only the current request"; a connection that asks for nothing gets
    NULL (``AppendRowsRequest``). tables.get answers the column's
    ``defaultValueExpression``."""
    table_id = f"{dataset}.regions"
    schema = [
        bigquery.SchemaField("id", "INT64"),
        bigquery.SchemaField("name", "STRING"),
        bigquery.SchemaField("region", "STRING", default_value_expression="'EU'"),
    ]
    rest.create_table(bigquery.Table(table_id, schema=schema))
    assert rest.get_table(table_id).schema[2].default_value_expression == "'EU'"
    default = f"{table_path(write, table_id)}/streams/_default"
    interpretation = types.AppendRowsRequest.MissingValueInterpretation
    asking = append_request(default, rows(0, 2), None)  # id, name: no region
    types.AppendRowsRequest.pb(
        asking
    ).default_missing_value_interpretation = interpretation.DEFAULT_VALUE
    later = append_request(default, rows(2, 2), None, with_schema=False)  # sticky
    overridden = append_request(default, rows(4, 2), None, with_schema=False)
    types.AppendRowsRequest.pb(overridden).missing_value_interpretations["region"] = (
        interpretation.NULL_VALUE
    )
    append_all(write, [asking, later, overridden])
    append_all(write, [append_request(default, rows(6, 2), None)])  # asks for nothing

    got = {
        row["id"]: row["region"]
        for row in rest.query_and_wait(f"SELECT id, region FROM `{table_id}`")
    }
    assert got == {0: "EU", 1: "EU", 2: "EU", 3: "EU", 4: None, 5: None, 6: None, 7: None}


# -- schema_update -------------------------------------------------------------------


def test_a_column_added_by_a_schema_update_takes_rows(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "You can add columns to an existing table's schema ... by using the tables.update
    or tables.patch method" and relax "REQUIRED to NULLABLE" (Modifying table schemas):
    rows appended afterwards carry the new column."""
    table_id = f"{dataset}.widened"
    rest.create_table(bigquery.Table(table_id, schema=[
        bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
        bigquery.SchemaField("name", "STRING", mode="REQUIRED"),
    ]))  # fmt: skip
    table = rest.get_table(table_id)
    table.schema = [
        bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
        bigquery.SchemaField("name", "STRING"),
        bigquery.SchemaField("amount", "FLOAT64"),
    ]
    rest.update_table(table, ["schema"])
    batch = pa.record_batch(
        [pa.array([1, 2], pa.int64()), pa.array([2.5, 4.0])],
        schema=pa.schema([("id", pa.int64()), ("amount", pa.float64())]),
    )
    default = f"{table_path(write, table_id)}/streams/_default"
    append_all(write, [append_request(default, batch, None)])
    got = rest.query_and_wait(f"SELECT id, name, amount FROM `{table_id}` ORDER BY id")
    assert [(r["id"], r["name"], r["amount"]) for r in got] == [(1, None, 2.5), (2, None, 4.0)]
