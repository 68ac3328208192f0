"""Small Storage Write API helpers for tests: tables, Arrow requests, raw appends."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_jobs.sink.job.options import parse_options
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import WriteIdentity
from onceover_jobs.sink.rows.schema import plan_write

from onceover.bigquery import BigQueryConfig

SCHEMA = [bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("name", "STRING")]
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def create_table(rest: bigquery.Client, dataset: str, name: str = "t") -> str:
    table_id = f"{dataset}.{name}"
    rest.create_table(bigquery.Table(table_id, schema=SCHEMA))
    return table_id


def create_refusing_table(rest: bigquery.Client, table_id: str, key: str = "id") -> str:
    """``key INT64 REQUIRED, name STRING(5)``: BigQuery (and the local one, launcher
    patch ``row_errors``) refuses a row whose name is longer than 5 characters."""
    schema = [
        bigquery.SchemaField(key, "INT64", mode="REQUIRED"),
        bigquery.SchemaField("name", "STRING", max_length=5),
    ]
    rest.create_table(bigquery.Table(table_id, schema=schema))
    return table_id


def count_distinct(rest: bigquery.Client, table_id: str, key: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT key)`` of ``table_id``, asked of BigQuery."""
    row = next(iter(rest.query_and_wait(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT `{key}`) AS k FROM `{table_id}`"
    )))  # fmt: skip
    return int(row["n"]), int(row["k"])


def table_path(write: BigQueryWriteClient, table_id: str) -> str:
    project, dataset, table = table_id.split(".")
    return write.table_path(project, dataset, table)


def create_stream(write: BigQueryWriteClient, table_id: str, kind: int) -> types.WriteStream:
    return write.create_write_stream(
        parent=table_path(write, table_id), write_stream=types.WriteStream(type_=kind)
    )


def rows(start: int, count: int) -> pa.RecordBatch:
    ids = list(range(start, start + count))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"r{i}" for i in ids])],
                           schema=ARROW_SCHEMA)  # fmt: skip


def append_request(
    stream: str, batch: pa.RecordBatch, offset: int | None, *, with_schema: bool = True
) -> types.AppendRowsRequest:
    arrow = types.AppendRowsRequest.ArrowData(
        rows=types.ArrowRecordBatch(serialized_record_batch=batch.serialize().to_pybytes())
    )
    if with_schema:
        arrow.writer_schema = types.ArrowSchema(
            serialized_schema=batch.schema.serialize().to_pybytes()
        )
    fields: dict[str, Any] = {"write_stream": stream, "arrow_rows": arrow}
    if offset is not None:
        fields["offset"] = offset
    return types.AppendRowsRequest(**fields)


def append_all(
    write: BigQueryWriteClient, requests: Iterable[types.AppendRowsRequest]
) -> list[types.AppendRowsResponse]:
    """Send ``requests`` on one AppendRows connection; return every response, in order."""
    return list(write.append_rows(iter(list(requests))))


def acknowledged_offset(response: types.AppendRowsResponse) -> int:
    offset: int = types.AppendRowsResponse.pb(response).append_result.offset.value
    return offset


def commit(
    write: BigQueryWriteClient, table_id: str, *streams: str
) -> types.BatchCommitWriteStreamsResponse:
    """``BatchCommitWriteStreams`` of ``streams`` into ``table_id``."""
    return write.batch_commit_write_streams(
        request=types.BatchCommitWriteStreamsRequest(
            parent=table_path(write, table_id), write_streams=list(streams)
        )
    )


def count(rest: bigquery.Client, table_id: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT id)`` of ``table_id``, asked of BigQuery."""
    return count_distinct(rest, table_id, "id")


def streaming_job(
    bq_config: BigQueryConfig, table: str, checkpoint: Path, **options: str
) -> SinkJob:
    """A job of the streaming sink on ``table`` (query ``query-1``), as the driver plans
    it, for tests that call the committer or a task directly."""
    parsed = parse_options(
        {"table": table, "checkpointLocation": str(checkpoint), "run_id": "run-1", **options},
        default_project=None,
        streaming=True,
    )
    return SinkJob(
        options=parsed, bigquery=bq_config, plan=plan_write(table, ARROW_SCHEMA, SCHEMA),
        table_fields=tuple(f.to_api_repr() for f in SCHEMA),
        write=WriteIdentity("streaming", "query-1", table, None),
    )  # fmt: skip
