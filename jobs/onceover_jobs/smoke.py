"""Smoke job: Spark makes rows, one PENDING stream writes them, BigQuery counts them.

    python -m onceover_jobs.smoke [--table DATASET.TABLE] [--rows N] [--rows-per-request N]

It checks the whole path the real sink will take: Spark on this machine, Arrow
batches, a PENDING stream with explicit offsets, finalize with ``row_count``,
``BatchCommitWriteStreams``, then ``COUNT(*)`` and ``COUNT(DISTINCT id)`` in
BigQuery. The table is the job's own: it is dropped and created again on each run.
Exits 0 only when BigQuery holds exactly the rows written.
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from dataclasses import dataclass

import pyarrow as pa
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types, writer

from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from onceover.console import configure_logging, run
from onceover.errors import OnceoverError
from onceover_jobs.spark import spark_session

logger = logging.getLogger(__name__)

TABLE_RE = re.compile(
    r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]\.)?[A-Za-z0-9_]{1,1024}\.[A-Za-z0-9_-]{1,1024}$"
)

MAX_REQUEST_BYTES = 8_000_000
"""Appends stay well under BigQuery's 10,000,000-byte request limit."""

SCHEMA = [
    bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("customer", "STRING"),
    bigquery.SchemaField("amount", "FLOAT64"),
    bigquery.SchemaField("event_time", "TIMESTAMP"),
]


@dataclass(frozen=True)
class SmokeResult:
    table: str
    rows_written: int
    requests: int
    rows_counted: int
    distinct_ids: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rows_counted == self.rows_written == self.distinct_ids


def generate_rows(rows: int) -> pa.Table:
    """``rows`` rows with unique ``id`` 0..rows-1, made by Spark, as Arrow."""
    spark = spark_session("onceover-smoke")
    frame = spark.range(rows, numPartitions=2).selectExpr(
        "id",
        "concat('customer-', CAST(id % 97 AS STRING)) AS customer",
        "CAST(id % 10000 AS DOUBLE) / 100 AS amount",
        "timestamp_seconds(1767225600 + id) AS event_time",
    )
    table = frame.toArrow()
    spark.stop()
    return table


def request_batches(table: pa.Table, rows_per_request: int) -> list[pa.RecordBatch]:
    """Split ``table`` so that no request carries more than :data:`MAX_REQUEST_BYTES`."""
    bytes_per_row = max(1, table.nbytes // max(1, table.num_rows))
    size = max(1, min(rows_per_request, MAX_REQUEST_BYTES // bytes_per_row))
    batches: list[pa.RecordBatch] = table.combine_chunks().to_batches(max_chunksize=size)
    return batches


def write_pending(
    config: BigQueryConfig, table_id: str, table: pa.Table, rows_per_request: int
) -> int:
    """Append ``table`` to a new PENDING stream with offsets, finalize, commit; returns requests."""
    client = write_client(config)
    project, dataset, name = table_id.split(".")
    parent = client.table_path(project, dataset, name)
    stream = client.create_write_stream(
        parent=parent, write_stream=types.WriteStream(type_=types.WriteStream.Type.PENDING)
    )
    template = types.AppendRowsRequest(
        write_stream=stream.name,
        arrow_rows=types.AppendRowsRequest.ArrowData(
            writer_schema=types.ArrowSchema(serialized_schema=table.schema.serialize().to_pybytes())
        ),
    )
    append_stream = writer.AppendRowsStream(client, template)
    offset = 0
    batches = request_batches(table, rows_per_request)
    try:
        futures = []
        for batch in batches:
            request = types.AppendRowsRequest(
                offset=offset,
                arrow_rows=types.AppendRowsRequest.ArrowData(
                    rows=types.ArrowRecordBatch(
                        serialized_record_batch=batch.serialize().to_pybytes()
                    )
                ),
            )
            futures.append((offset, append_stream.send(request)))
            offset += batch.num_rows
        for expected, future in futures:
            acknowledged = future.result().append_result.offset
            if acknowledged != expected:
                raise OnceoverError(f"append acknowledged offset {acknowledged}, sent {expected}")
    finally:
        if append_stream.is_active:  # an error response already closed it
            append_stream.close()
    finalized = client.finalize_write_stream(name=stream.name)
    if finalized.row_count != table.num_rows:
        raise OnceoverError(
            f"stream {stream.name} finalized with {finalized.row_count} rows, "
            f"{table.num_rows} were appended"
        )
    response = client.batch_commit_write_streams(
        request=types.BatchCommitWriteStreamsRequest(parent=parent, write_streams=[stream.name])
    )
    if response.stream_errors:
        raise OnceoverError(f"commit failed: {response.stream_errors[0].error_message}")
    return len(batches)


def run_smoke(
    config: BigQueryConfig, table_ref: str, rows: int, rows_per_request: int
) -> SmokeResult:
    """Create the table afresh, write ``rows`` rows through a PENDING stream, count them."""
    started = time.perf_counter()
    bq = bigquery_client(config)
    table_id = (
        table_ref if table_ref.count(".") == 2 else f"{config.resolved_project()}.{table_ref}"
    )
    dataset_id = table_id.rsplit(".", 1)[0]
    bq.create_dataset(dataset_id, exists_ok=True)
    bq.delete_table(table_id, not_found_ok=True)
    bq.create_table(bigquery.Table(table_id, schema=SCHEMA))

    data = generate_rows(rows)
    requests = write_pending(config, table_id, data, rows_per_request)

    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM `{table_id}`"
    counted = next(iter(bq.query_and_wait(query)))
    return SmokeResult(
        table=table_id,
        rows_written=data.num_rows,
        requests=requests,
        rows_counted=int(counted["n"]),
        distinct_ids=int(counted["ids"]),
        seconds=time.perf_counter() - started,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_jobs.smoke", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--table",
        default="onceover_demo.smoke",
        help="[PROJECT.]DATASET.TABLE, dropped and created (default %(default)s)",
    )
    parser.add_argument("--rows", type=int, default=10_000, help="rows to write")
    parser.add_argument("--rows-per-request", type=int, default=2_500,
                        help="rows per append request, at most (default %(default)s)")  # fmt: skip
    args = parser.parse_args(argv)
    if not TABLE_RE.match(args.table):
        parser.error(f"--table {args.table!r} is not DATASET.TABLE or PROJECT.DATASET.TABLE")
    if args.rows <= 0 or args.rows_per_request <= 0:
        parser.error("--rows and --rows-per-request must be positive")
    configure_logging(logging.WARNING)

    result = run_smoke(BigQueryConfig.from_env(), args.table, args.rows, args.rows_per_request)
    print(
        f"Wrote {result.rows_written:,} rows to {result.table} through one PENDING stream "
        f"({result.requests} appends with offsets, one commit) in {result.seconds:.1f} s."
    )
    print(f"BigQuery counted {result.rows_counted} rows ({result.distinct_ids} distinct ids).")
    if not result.ok:
        raise OnceoverError(
            f"BigQuery holds {result.rows_counted} rows and {result.distinct_ids} distinct ids "
            f"in {result.table}; {result.rows_written} were written"
        )
    return 0


if __name__ == "__main__":
    run(main, prog="onceover_jobs.smoke")
