"""FlushRows answers, read as Apache Beam reads them and mapped to what the ledger knows
(onceover_jobs.sink.wire.flush; docs/sink.md, "FlushRows"): against the local BigQuery's
own answers, and, for the shape Beam reads on real BigQuery that the local one does not
give (INVALID_ARGUMENT for a finalized stream), against that answer as the client sees it."""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_jobs.sink.errors import CallRejectedError, StreamFinalizedError, StreamTruncatedError
from onceover_jobs.sink.wire.flush import flush_batch, flush_stream
from onceover_jobs.sink.wire.retry import RetryPolicy
from onceover_jobs.sink.wire.write_api import write_api

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import StreamCommit
from tests.helpers.writeapi import (
    append_all,
    append_request,
    count,
    create_stream,
    create_table,
    rows,
)

BUFFERED = types.WriteStream.Type.BUFFERED
POLICY = RetryPolicy(deadline_s=5)


def _buffered(write: BigQueryWriteClient, table: str, appended: int) -> str:
    stream = create_stream(write, table, BUFFERED).name
    append_all(write, [append_request(stream, rows(0, appended), 0)])
    return stream


def test_a_repeated_flush_is_done_and_a_flush_past_the_end_is_a_truncated_stream(
    bq_config: BigQueryConfig, write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    stream = _buffered(write, table, 10)
    client = write_api(bq_config)
    flush_stream(client, POLICY, stream, 9, label="batch 0")
    flush_stream(client, POLICY, stream, 9, label="batch 0")  # ALREADY_EXISTS: flushed
    assert count(rest, table) == (10, 10)
    with pytest.raises(StreamTruncatedError, match="holds fewer rows than the ledger") as cut:
        flush_stream(client, POLICY, stream, 14, label="batch 1")
    assert "beyond the end of the stream" in str(cut.value)


def test_a_finalized_stream_is_done_only_if_the_ledger_saw_it_flushed(
    bq_config: BigQueryConfig, write: BigQueryWriteClient, rest: bigquery.Client, dataset: str
) -> None:
    """Finalized after the batch's flush (the ledger's slot says so): done. Finalized
    before it: the rows past the last flush are never visible, and the batch stops,
    named, never published blind."""
    table = create_table(rest, dataset)
    client = write_api(bq_config)
    flushed, unflushed = _buffered(write, table, 10), _buffered(write, table, 10)
    flush_stream(client, POLICY, flushed, 9, label="batch 0")
    for stream in (flushed, unflushed):
        write.finalize_write_stream(name=stream)
    batch = [StreamCommit(flushed, 10, 0, 0, 0), StreamCommit(unflushed, 10, 0, 1, 0)]
    seen: list[str] = []

    with pytest.raises(StreamFinalizedError, match="was finalized") as stopped:
        flush_batch(client, POLICY, batch, label="batch 0", then=lambda s: seen.append(s.stream),
                    flushed_before=lambda s: s.stream == flushed)  # fmt: skip

    assert seen == [flushed]  # the ledger's flush stands; the other is never claimed
    assert unflushed in str(stopped.value)
    assert "never visible" in str(stopped.value)
    assert count(rest, table) == (10, 10)


class _Answering:
    """A Write API client whose FlushRows answers as given."""

    def __init__(self, error: CallRejectedError) -> None:
        self.error = error

    def flush_rows(self, stream: str, offset: int, *, timeout: float) -> int:
        raise self.error


@pytest.mark.parametrize(
    ("grpc_code", "storage_code", "raised"),
    [
        ("INVALID_ARGUMENT", None, StreamFinalizedError),  # as Beam reads real BigQuery
        ("OUT_OF_RANGE", "STREAM_FINALIZED", StreamFinalizedError),  # the local BigQuery
        ("OUT_OF_RANGE", "OFFSET_OUT_OF_RANGE", StreamTruncatedError),
        ("OUT_OF_RANGE", None, StreamTruncatedError),
    ],
)
def test_each_refusal_of_a_flush_is_read_as_beam_reads_it(
    grpc_code: str, storage_code: str | None, raised: type[Exception]
) -> None:
    error = CallRejectedError(
        f"FlushRows: {grpc_code}", what="FlushRows", grpc_code=grpc_code,
        storage_code=storage_code, server_message="as BigQuery said",
    )  # fmt: skip
    client: Any = _Answering(error)
    with pytest.raises(raised):
        flush_stream(client, POLICY, "projects/p/datasets/d/tables/t/streams/s", 9, label="b")


def test_already_exists_by_its_storage_code_is_flushed_whatever_grpc_code() -> None:
    error = CallRejectedError(
        "FlushRows", what="FlushRows", grpc_code="FAILED_PRECONDITION",
        storage_code="OFFSET_ALREADY_EXISTS",
    )  # fmt: skip
    client: Any = _Answering(error)
    flush_stream(client, POLICY, "projects/p/datasets/d/tables/t/streams/s", 9, label="b")
