"""``column_defaults``: columns keep their DEFAULT, and an append may ask for it.

BigQuery: a column's ``defaultValueExpression`` "is the default value of the field"
(``TableFieldSchema``), kept by tables.insert / update / patch and answered by
tables.get. The Storage Write API fills a column the writer's schema leaves out with
that value when the connection asks for it: ``AppendRowsRequest.
default_missing_value_interpretation`` = ``DEFAULT_VALUE`` "is applied to all requests on
the connection from that point forward, until a subsequent AppendRowsRequest sets it to
a different value"; ``missing_value_interpretations`` (top-level column names) overrides
it "only [for] the current request"; a column neither names is NULL. bqemulator dropped
the expression from the table and filled every missing column with NULL.

The patch keeps ``defaultValueExpression`` on every field, tracks the two settings per
connection, and fills a top-level column absent from the writer's schema (Arrow or
proto) with its default, evaluated once per request through bqemulator's own SQL
translation (so a literal, ``CURRENT_TIMESTAMP()`` or ``CURRENT_DATE()``; a default that
differs per row, such as ``GENERATE_UUID()``, gets one value per request here). Fields
unset inside a present column stay NULL, as before.

Pinned by ``tests/localbq/test_patches.py``:
``test_a_column_left_out_of_the_writer_schema_gets_its_default_when_asked``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

_DEFAULT_VALUE = 2
"""``AppendRowsRequest.MissingValueInterpretation.DEFAULT_VALUE`` (``NULL_VALUE`` is 1)."""


@dataclass
class _Connection:
    """What one AppendRows connection has said so far."""

    handler: Any
    stream: str = ""
    interpretation: int = 0
    """The connection's ``default_missing_value_interpretation`` (0: never set)."""
    writer_columns: frozenset[str] = field(default_factory=frozenset)
    """Casefolded top-level names of the writer's schema."""


_current = threading.local()
"""The connection whose request is being read: a connection's requests are read on the
thread that pulls its responses."""


def apply() -> None:
    _keep_default_expressions()
    _fill_defaults()


def _keep_default_expressions() -> None:
    from bqemulator.api.routes import tables

    def make_parse(original: Callable[..., Any]) -> Callable[..., Any]:
        def _parse_schema_fields(raw_fields: list[dict[str, Any]]) -> tuple[Any, ...]:
            parsed = original(raw_fields)  # recurses through this name: members have theirs
            return tuple(
                f.model_copy(update={"default_value_expression": raw["defaultValueExpression"]})
                if raw.get("defaultValueExpression")
                else f
                for f, raw in zip(parsed, raw_fields, strict=True)
            )

        return _parse_schema_fields

    def make_to_rest(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def _field_to_rest(f: Any) -> dict[str, Any]:
            out = original(f)
            if f.default_value_expression:
                out["defaultValueExpression"] = f.default_value_expression
            return out

        return _field_to_rest

    wrap(tables, "_parse_schema_fields", make_parse)
    wrap(tables, "_field_to_rest", make_to_rest)


def _fill_defaults() -> None:
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def make_handle(
        original: Callable[..., Generator[bytes, None, None]],
    ) -> Callable[..., Generator[bytes, None, None]]:
        def _handle_append_rows(
            handler: Any, request_iterator: Iterator[bytes], context: Any
        ) -> Generator[bytes, None, None]:
            connection = _Connection(handler)
            responses = original(handler, request_iterator, context)
            try:
                while True:
                    _current.connection = connection
                    try:
                        response = next(responses)
                    except StopIteration:
                        return
                    finally:
                        _current.connection = None
                    yield response
            finally:
                responses.close()

        return _handle_append_rows

    def make_rows(original: Callable[..., Any]) -> Callable[..., Any]:
        def _rows_for_request(
            request: Any, proto_decoder: Any, arrow_schema_bytes: Any, target_schema: Any
        ) -> Any:
            rows, decoder, schema_bytes = original(
                request, proto_decoder, arrow_schema_bytes, target_schema
            )
            connection: _Connection | None = getattr(_current, "connection", None)
            if connection is None:
                return rows, decoder, schema_bytes
            return _filled(connection, request, rows), decoder, schema_bytes

        return _rows_for_request

    wrap(BigQueryWriteHandler, "_handle_append_rows", make_handle)
    # _handle_append_rows calls the module-level name at each request.
    wrap(write_servicer, "_rows_for_request", make_rows)


def _filled(connection: _Connection, request: Any, rows: Any) -> Any:
    """``rows`` (lined up with the table, NULL where the writer sent nothing) with each
    column the writer's schema leaves out set to its default where the connection or
    the request asks for it."""
    pb = type(request).pb(request)
    connection.stream = pb.write_stream or connection.stream
    if pb.default_missing_value_interpretation:
        connection.interpretation = pb.default_missing_value_interpretation
    if pb.HasField("proto_rows") and pb.proto_rows.HasField("writer_schema"):
        descriptor = pb.proto_rows.writer_schema.proto_descriptor
        connection.writer_columns = frozenset(f.name.casefold() for f in descriptor.field)
    elif pb.HasField("arrow_rows") and pb.arrow_rows.HasField("writer_schema"):
        import pyarrow as pa

        serialized = pb.arrow_rows.writer_schema.serialized_schema
        schema = pa.ipc.read_schema(pa.py_buffer(serialized))
        connection.writer_columns = frozenset(name.casefold() for name in schema.names)
    per_column = {
        name.casefold(): value for name, value in pb.missing_value_interpretations.items()
    }
    if not rows.num_rows or not connection.stream:
        return rows
    wanted = [
        name
        for name in rows.column_names
        if name.casefold() not in connection.writer_columns
        and per_column.get(name.casefold(), connection.interpretation) == _DEFAULT_VALUE
    ]
    if not wanted:
        return rows
    defaults = _defaults(connection)
    for name in wanted:
        expression = defaults.get(name.casefold())
        if expression is not None:
            index = rows.column_names.index(name)
            column = _evaluated(connection.handler, expression, rows.schema.field(index).type)
            rows = rows.set_column(index, rows.schema.field(index), column.repeat(rows.num_rows))
    return rows


def _defaults(connection: _Connection) -> dict[str, str]:
    """The table's top-level columns with a DEFAULT, by casefolded name."""
    from bqemulator.streaming.write_stream import parse_stream_name

    project, dataset, table, _ = parse_stream_name(connection.stream)
    meta = connection.handler._ctx.catalog.get_table(project, dataset, table)
    if meta is None:
        return {}
    return {
        f.name.casefold(): f.default_value_expression
        for f in meta.schema_.fields
        if f.default_value_expression
    }


class _Value:
    """One evaluated default, repeated for a request's rows."""

    def __init__(self, scalar: Any) -> None:
        self.scalar = scalar

    def repeat(self, count: int) -> Any:
        import pyarrow as pa

        return pa.array([self.scalar.as_py()] * count, type=self.scalar.type)


def _evaluated(handler: Any, expression: str, kind: Any) -> _Value:
    """``expression`` (GoogleSQL) evaluated by the local BigQuery's engine, as ``kind``."""
    from bqemulator.sql.translator import SQLTranslator

    sql = SQLTranslator().translate(f"SELECT {expression} AS v").unwrap()  # raises if bad
    table = handler._ctx.engine.fetch_arrow(str(sql))
    return _Value(table.column(0).cast(kind)[0])
