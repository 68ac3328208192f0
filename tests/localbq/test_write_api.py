"""A Storage Write API round trip with the official Python clients, over real gRPC and REST."""

from __future__ import annotations

from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types

from tests.helpers.writeapi import (
    append_all,
    append_request,
    commit,
    count,
    create_stream,
    create_table,
    rows,
)

PENDING = types.WriteStream.Type.PENDING
COMMITTED = types.WriteStream.Type.COMMITTED
ALREADY_EXISTS, OUT_OF_RANGE = 6, 11


def test_pending_rows_are_invisible_until_committed(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, PENDING)

    responses = append_all(write, [
        append_request(stream.name, rows(0, 100), offset=0),
        append_request(stream.name, rows(100, 50), offset=100, with_schema=False),
    ])  # fmt: skip

    assert [r.append_result.offset for r in responses] == [0, 100]
    assert count(rest, table_id) == (0, 0)
    assert write.finalize_write_stream(name=stream.name).row_count == 150
    assert count(rest, table_id) == (0, 0)

    committed = commit(write, table_id, stream.name)

    assert not committed.stream_errors
    assert count(rest, table_id) == (150, 150)


def test_repeated_offset_is_already_exists_and_a_gap_is_out_of_range(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    stream = create_stream(write, table_id, COMMITTED)

    responses = append_all(write, [
        append_request(stream.name, rows(0, 10), offset=0),
        append_request(stream.name, rows(0, 10), offset=0),  # the retry of a lost ack
        append_request(stream.name, rows(20, 10), offset=20),  # rows 10..19 never sent
        append_request(stream.name, rows(10, 10), offset=10),  # the connection stays open
    ])  # fmt: skip

    assert [r.error.code for r in responses] == [0, ALREADY_EXISTS, OUT_OF_RANGE, 0]
    assert responses[3].append_result.offset == 10
    assert count(rest, table_id) == (20, 20)


def test_a_batch_commit_with_an_unfinalized_stream_commits_nothing(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    table_id = create_table(rest, dataset)
    finalized, still_open = (create_stream(write, table_id, PENDING) for _ in range(2))
    append_all(write, [append_request(finalized.name, rows(0, 5), offset=0)])
    append_all(write, [append_request(still_open.name, rows(5, 5), offset=0)])
    write.finalize_write_stream(name=finalized.name)

    response = commit(write, table_id, finalized.name, still_open.name)

    assert [e.entity for e in response.stream_errors] == [still_open.name]
    assert count(rest, table_id) == (0, 0)
