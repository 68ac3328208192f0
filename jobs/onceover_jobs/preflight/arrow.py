"""Check 5: BigQuery takes the job's Arrow rows.

Arrow ingestion (``arrow_rows``) is generally available since 2025-10-27, but older
client documentation called it allowlisted, and a project or an endpoint may still
refuse it. The check appends one row to a PENDING stream of the table at offset 0, and
never finalizes or commits it: the row is never visible, and BigQuery deletes the stream
once it expires (PENDING streams live 24 hours). It costs one CreateWriteStream of the
project's quota.

The row: every REQUIRED column with a zero value (0, '', false, 1970-01-01, ...); when
there is none, one NULLABLE column left NULL. A REQUIRED column of a type with no simple
zero (RECORD, RANGE, INTERVAL) leaves the check undone (a warning).
"""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from onceover.bigquery import BigQueryConfig
from onceover_jobs.preflight.report import Check, fail, ok, warn
from onceover_jobs.sink.job.options import SinkOptions
from onceover_jobs.sink.rows.schema import TARGET_TYPES, standard_type

if TYPE_CHECKING:
    from google.cloud.bigquery import SchemaField, Table

NAME = "arrow"
PROTO_FIX = (
    "give the write .option('row_format', 'proto'): the sink then sends protocol-buffer "
    "rows, which every project takes"
)
_ZERO: dict[str, Any] = {
    "STRING": "", "BYTES": b"", "INT64": 0, "FLOAT64": 0.0, "BOOL": False,
    "NUMERIC": decimal.Decimal(0), "BIGNUMERIC": decimal.Decimal(0),
    "DATE": datetime.date(1970, 1, 1),
    "TIMESTAMP": datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),
    "DATETIME": datetime.datetime(1970, 1, 1), "JSON": "null", "GEOGRAPHY": "POINT(0 0)",
}  # fmt: skip
"""A value of each type that BigQuery takes in a REQUIRED column."""


def probe_row(fields: list[SchemaField]) -> pa.RecordBatch | str:
    """One row the table takes, or why none can be made (a column named)."""
    columns: dict[str, pa.Array] = {}
    for field in fields:
        kind, mode = standard_type(field), str(field.mode or "NULLABLE").upper()
        if mode != "REQUIRED":
            continue
        if kind not in _ZERO:
            return f"its REQUIRED column {field.name} is a {kind}"
        columns[field.name] = pa.array([_ZERO[kind]], TARGET_TYPES[kind])
    if not columns:
        nullable = [f for f in fields if str(f.mode or "NULLABLE").upper() == "NULLABLE"]
        simple = [f for f in nullable if standard_type(f) in TARGET_TYPES]
        if not simple:
            return "it has no column of a simple type to leave NULL"
        columns[simple[0].name] = pa.nulls(1, TARGET_TYPES[standard_type(simple[0])])
    return pa.RecordBatch.from_pydict(columns)


def check_arrow(config: BigQueryConfig, options: SinkOptions, table: Table | None) -> Check:
    if options.row_format != "arrow":
        return ok(NAME, f"not used: the job sends {options.row_format} rows")
    if table is None:
        return _no_table(options)
    row = probe_row(list(table.schema))
    if isinstance(row, str):
        return warn(NAME, f"not checked: no probe row for {options.table}: {row}")
    refused = append_probe(config, options, row)
    if refused is None:
        return ok(NAME, f"one Arrow row appended to a PENDING stream of {options.table}, "
                        "never committed (it expires unseen)")  # fmt: skip
    if refused_for_the_format(refused):
        return fail(NAME, f"BigQuery refused an Arrow append to {options.table}: {refused}",
                    PROTO_FIX)  # fmt: skip
    return fail(
        NAME,
        f"BigQuery refused a one-row append to {options.table}: {refused}",
        f"fix what the answer names; if it is about Arrow rows, {PROTO_FIX}",
    )


def _no_table(options: SinkOptions) -> Check:
    if options.creation.disposition == "CREATE_NEVER":
        return warn(NAME, f"not checked: {options.table} does not exist")
    return warn(
        NAME,
        f"not checked: {options.table} does not exist yet (the write creates it, and its "
        "first append is the check)",
        f"if that write is refused for its Arrow rows, {PROTO_FIX}",
    )


def refused_for_the_format(answer: str) -> bool:
    """Whether a refused append (``"CODE: message"``) is about the Arrow format, not the
    row or the caller: as the sink itself reads it (onceover_jobs.sink.wire.arrow_refusal)."""
    from onceover_jobs.sink.wire.arrow_refusal import refused_for_arrow

    code, _, message = answer.partition(": ")
    return refused_for_arrow(code.strip(), message)


def append_probe(config: BigQueryConfig, options: SinkOptions, row: pa.RecordBatch) -> str | None:
    """Append ``row`` at offset 0 of a new PENDING stream; None when taken, else the
    refusal (its code and message)."""
    import grpc
    from google.cloud.bigquery_storage_v1 import types

    from onceover_jobs.sink.wire.write_api import write_api

    client = write_api(config)
    parent = f"projects/{options.project}/datasets/{options.dataset}/tables/{options.table_name}"
    try:
        stream = client.create_write_stream(parent, "PENDING", timeout=60).name
        request = types.AppendRowsRequest(
            write_stream=stream,
            offset=0,
            arrow_rows=types.AppendRowsRequest.ArrowData(
                writer_schema=types.ArrowSchema(
                    serialized_schema=row.schema.serialize().to_pybytes()
                ),
                rows=types.ArrowRecordBatch(serialized_record_batch=row.serialize().to_pybytes()),
            ),
        )
        metadata = (("x-goog-request-params", f"write_stream={stream}"),)
        call = client.append_rows(iter([request]), metadata=metadata)
        try:
            for response in call:
                error = types.AppendRowsResponse.pb(response).error
                if not error.code:
                    return None
                name = next((c.name for c in grpc.StatusCode if c.value[0] == error.code), None)
                return f"{name or error.code}: {error.message}"
        finally:
            call.cancel()  # one answer is all the check reads; the connection is let go
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
        return f"{getattr(code, 'name', 'UNKNOWN')}: {details}"
    return "no answer to the append"
