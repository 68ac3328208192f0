"""``missingValue=default``: a table's column the DataFrame lacks gets its DEFAULT.

BigQuery fills a column the writer's schema leaves out with NULL, unless the connection
asks for the column's default: ``AppendRowsRequest.default_missing_value_interpretation``
= ``DEFAULT_VALUE``, which "is applied to all requests on the connection from that point
forward". So it rides on the first request of each connection, with the writer schema
(a reconnect sends both again), and every later request of the connection gets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from onceover_jobs.sink.wire.requests import EncodedRows, RowEncoder, raw_request

if TYPE_CHECKING:
    from google.cloud.bigquery import SchemaField


class DefaultsEncoder:
    """``inner``, whose connections ask BigQuery for the columns' defaults."""

    def __init__(self, inner: RowEncoder) -> None:
        from google.cloud.bigquery_storage_v1 import types

        self.inner = inner
        self.interpretation = int(types.AppendRowsRequest.MissingValueInterpretation.DEFAULT_VALUE)

    def schema_payload(self, request: Any) -> None:
        self.inner.schema_payload(request)
        raw_request(request).default_missing_value_interpretation = self.interpretation

    def encode(self, batch: pa.RecordBatch) -> EncodedRows:
        return self.inner.encode(batch)


def with_defaults(inner: RowEncoder, missing_value: str) -> RowEncoder:
    """``inner``, asking for defaults when ``missing_value`` is ``default``."""
    return DefaultsEncoder(inner) if missing_value == "default" else inner


def defaults_left_out(arrow_schema: pa.Schema, fields: Sequence[SchemaField]) -> list[str]:
    """The table's top-level columns with a DEFAULT that the DataFrame lacks."""
    given = {name.casefold() for name in arrow_schema.names}
    return [
        f.name
        for f in fields
        if getattr(f, "default_value_expression", None) and f.name.casefold() not in given
    ]
