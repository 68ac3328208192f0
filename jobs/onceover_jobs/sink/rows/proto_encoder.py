"""``row_format=proto``: the request encoder for projects without Arrow ingestion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from onceover_jobs.sink.rows.proto_rows import proto_schema, serialize_rows
from onceover_jobs.sink.wire.requests import EncodedRows, compact

_PER_ROW_FRAMING = 6
"""Tag and length prefix of each serialized row inside ``ProtoRows`` (upper bound)."""


class ProtoEncoder:
    """``proto_rows``: a self-contained descriptor once per connection, then encoded rows."""

    def __init__(self, fields: Sequence[Any], arrow_schema: pa.Schema) -> None:
        from google.cloud.bigquery_storage_v1 import types

        self.fields = list(fields)
        self.schema_pb = types.ProtoSchema.pb(proto_schema(self.fields, arrow_schema))

    def schema_payload(self, request: Any) -> None:
        from onceover_jobs.sink.wire.requests import raw_request

        raw_request(request).proto_rows.writer_schema.CopyFrom(self.schema_pb)

    def encode(self, batch: pa.RecordBatch) -> EncodedRows:
        from onceover_jobs.sink.wire.requests import raw_request

        rows = serialize_rows(batch, self.fields)
        size = sum(len(row) for row in rows) + _PER_ROW_FRAMING * len(rows)

        def apply(request: Any) -> None:
            raw_request(request).proto_rows.rows.serialized_rows.extend(rows)

        def arrow_form() -> tuple[bytes]:
            # The digest's form: as the Arrow encoder sends these rows (requests.EncodedRows).
            return (compact(batch).serialize().to_pybytes(),)

        return EncodedRows(batch.num_rows, size, apply, rows, canonical=arrow_form)
