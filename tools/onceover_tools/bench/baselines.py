"""What Onceover's sink is measured against: the ways a user would load BigQuery without it.

- :func:`write_seed_approach`: the seeds' exactly-once recipe as a Spark user would write
  it. ``foreachPartition``; in each task a COMMITTED write stream, the official
  :class:`~google.cloud.bigquery_storage_v1.writer.AppendRowsStream`, one protobuf message
  built and serialized per row, 500 rows a request, explicit offsets. It gets the benefit
  of the doubt: requests are pipelined (every future awaited at the end), not sent one at
  a time as the seeds' ``append_rows`` does.
- :func:`write_streaming_inserts`: the legacy ``tabledata.insertAll`` through
  ``Client.insert_rows_json``, 500 rows a call with ``row_ids`` (best-effort dedupe),
  from ``foreachPartition``.
- :func:`onceover_tools.bench.handoff.hand_off`: no writer at all. Spark hands the rows to a
  Python data source's writers as Arrow, which count them: the floor under any Python
  sink on the same Spark, so a report shows which part of a sink's time is Spark's own.
- :func:`push_arrow_ceiling`: no Spark, no retries, no bookkeeping: one client pushes
  pre-built Arrow record batches down one COMMITTED stream on one connection. Nothing a
  job can do with the same server is faster; it is the ceiling the sink is held to.

Every writer raises when the server refused anything, so a figure is never of a write
that lost rows; the caller also counts the rows in BigQuery.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from google.cloud import bigquery
    from pyspark.sql import DataFrame, Row

    from onceover.bigquery import BigQueryConfig

ROWS_PER_REQUEST = 500
"""The seeds' ``chunk_size``; also the documented sweet spot of ``insertAll``."""
ARROW_ROWS_PER_REQUEST = 50_000
"""About 3 MB of the generated order events: well under the 10 MB request limit."""

_PROTO_TYPES = {
    "INTEGER": "TYPE_INT64",
    "INT64": "TYPE_INT64",
    "FLOAT": "TYPE_DOUBLE",
    "FLOAT64": "TYPE_DOUBLE",
    "STRING": "TYPE_STRING",
    "BOOLEAN": "TYPE_BOOL",
    "BOOL": "TYPE_BOOL",
    "TIMESTAMP": "TYPE_INT64",  # microseconds since the epoch, as the Write API takes them
}


class BaselineError(RuntimeError):
    """A baseline writer was refused by BigQuery: its figure would be of a lossy write."""


# -- the seeds' approach: AppendRowsStream, one protobuf message per row ------------------


def _descriptor(fields: list[tuple[str, str]]) -> Any:
    """A proto2 ``DescriptorProto`` for flat (name, BigQuery type) columns."""
    from google.protobuf import descriptor_pb2

    descriptor = descriptor_pb2.DescriptorProto(name="Row")
    for number, (name, kind) in enumerate(fields, start=1):
        proto_type = _PROTO_TYPES.get(kind)
        if proto_type is None:
            raise BaselineError(f"column {name!r}: {kind} is not in this baseline's type map")
        descriptor.field.add(
            name=name,
            number=number,
            type=getattr(descriptor_pb2.FieldDescriptorProto, proto_type),
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    return descriptor


def _message_class(descriptor: Any) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto(name="row.proto", message_type=[descriptor]))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("Row"))


def _proto_value(value: Any, kind: str) -> Any:
    if kind == "TIMESTAMP" and isinstance(value, datetime):
        return round(value.timestamp() * 1_000_000)  # Spark hands naive local times over
    return value


def _seed_partition(rows: Iterable[Row], table_path: str, fields: list[tuple[str, str]]) -> None:
    """One task: a COMMITTED stream, a message per row, offsets, every answer checked."""
    from google.cloud.bigquery_storage_v1 import types, writer

    from onceover.bigquery import write_client

    client = write_client()
    stream = client.create_write_stream(
        parent=table_path, write_stream=types.WriteStream(type_=types.WriteStream.Type.COMMITTED)
    )
    descriptor = _descriptor(fields)
    message_class = _message_class(descriptor)
    template = types.AppendRowsRequest(
        write_stream=stream.name,
        proto_rows=types.AppendRowsRequest.ProtoData(
            writer_schema=types.ProtoSchema(proto_descriptor=descriptor)
        ),
    )
    appends = writer.AppendRowsStream(client, template)
    futures = []
    offset = 0
    chunk: list[bytes] = []

    def send() -> None:
        nonlocal offset, chunk
        request = types.AppendRowsRequest(
            offset=offset,
            proto_rows=types.AppendRowsRequest.ProtoData(
                rows=types.ProtoRows(serialized_rows=chunk)
            ),
        )
        futures.append(appends.send(request))
        offset += len(chunk)
        chunk = []

    try:
        for row in rows:
            message = message_class()
            for name, kind in fields:
                value = row[name]
                if value is not None:
                    setattr(message, name, _proto_value(value, kind))
            chunk.append(message.SerializeToString())
            if len(chunk) == ROWS_PER_REQUEST:
                send()
        if chunk:
            send()
        for future in futures:
            response = future.result()
            if response.error.code:
                raise BaselineError(f"AppendRows answered {response.error.message}")
    finally:
        appends.close()
    client.finalize_write_stream(name=stream.name)


def write_seed_approach(df: DataFrame, table: bigquery.Table) -> float:
    """Seconds for ``df.foreachPartition`` with the seeds' writer into ``table``."""
    fields = [(field.name, field.field_type) for field in table.schema]
    table_path = f"projects/{table.project}/datasets/{table.dataset_id}/tables/{table.table_id}"
    started = time.perf_counter()
    df.foreachPartition(lambda rows: _seed_partition(rows, table_path, fields))
    return time.perf_counter() - started


# -- legacy streaming inserts ----------------------------------------------------------


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _insert_partition(rows: Iterable[Row], table_id: str, key: str) -> None:
    from onceover.bigquery import bigquery_client

    client = bigquery_client()
    chunk: list[dict[str, Any]] = []

    def send() -> None:
        errors = client.insert_rows_json(table_id, chunk, row_ids=[str(row[key]) for row in chunk])
        if errors:
            raise BaselineError(f"insertAll refused rows: {str(errors)[:300]}")
        chunk.clear()

    for row in rows:
        chunk.append({name: _json_value(value) for name, value in row.asDict().items()})
        if len(chunk) == ROWS_PER_REQUEST:
            send()
    if chunk:
        send()


def write_streaming_inserts(df: DataFrame, table_id: str, key: str) -> float:
    """Seconds for ``df.foreachPartition`` with ``insert_rows_json`` into ``table_id``."""
    started = time.perf_counter()
    df.foreachPartition(lambda rows: _insert_partition(rows, table_id, key))
    return time.perf_counter() - started


# -- the ceiling: pre-built Arrow, one client, one stream -------------------------------


def arrow_requests(data: pa.Table, table: bigquery.Table) -> list[pa.RecordBatch]:
    """``data`` as the Write API takes it (BigQuery's Arrow types), in request-sized batches;
    built before the clock starts."""
    from onceover_jobs.sink.rows.schema import plan_write, to_bigquery_arrow

    plan = plan_write(table.full_table_id.replace(":", "."), data.schema, list(table.schema))
    return [
        to_bigquery_arrow(batch, plan)
        for batch in data.to_batches(max_chunksize=ARROW_ROWS_PER_REQUEST)
    ]


def push_arrow_ceiling(
    batches: list[pa.RecordBatch], table: bigquery.Table, config: BigQueryConfig
) -> float:
    """Seconds to append ``batches`` down one COMMITTED stream, every answer checked."""
    from google.cloud.bigquery_storage_v1 import types
    from onceover_jobs.sink.wire.requests import ArrowEncoder

    from onceover.bigquery import write_client

    client = write_client(config)
    table_path = f"projects/{table.project}/datasets/{table.dataset_id}/tables/{table.table_id}"
    encoder = ArrowEncoder(batches[0].schema)
    payloads = [encoder.encode(batch) for batch in batches]
    started = time.perf_counter()
    stream = client.create_write_stream(
        parent=table_path, write_stream=types.WriteStream(type_=types.WriteStream.Type.COMMITTED)
    )

    def requests() -> Iterator[Any]:
        offset = 0
        for number, payload in enumerate(payloads):
            request = types.AppendRowsRequest(offset=offset)
            if number == 0:
                request.write_stream = stream.name
                encoder.schema_payload(request)
            payload.apply(request)
            offset += payload.rows
            yield request

    answered = 0
    for response in client.append_rows(requests()):
        if response.error.code:
            raise BaselineError(f"AppendRows answered {response.error.message}")
        answered += 1
    if answered != len(payloads):
        raise BaselineError(f"{answered} answers to {len(payloads)} requests")
    client.finalize_write_stream(name=stream.name)
    return time.perf_counter() - started
