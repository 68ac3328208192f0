"""``row_errors``: a request with rows that break a column's rules is refused whole.

bqemulator dropped ``maxLength``, ``precision``, ``scale`` and ``roundingMode`` from a
schema given to tables.insert (kept ``mode``; measured on 2026-11-25: tables.get and the
catalog had none of them) and appended every row unchecked: 7 characters in a STRING(5)
column, 12345.67 in a NUMERIC(5, 2) column, NULL in a REQUIRED column were all stored; a
NULL in a RECORD's REQUIRED member failed the whole request with pyarrow's cast error and
no ``row_errors``. BigQuery enforces a column's rules when a value is written to it (see
:mod:`onceover_tools.localbq.row_rules`) and (``storage.proto``,
``AppendRowsResponse.row_errors``) "If a request failed due to corrupted rows, no rows in
the batch will be appended. The API will return row level error info, so that the caller
can remove the bad rows and retry the request." The patch keeps the four members
(tables.insert / update / patch and a load job's explicit schema; tables.get answers them,
int64s as strings; a member is kept only on the types it is documented for), lines appends
up with an Arrow schema that allows NULL everywhere (REQUIRED is checked per row instead),
and checks every AppendRows request to a stream that would take it (any stream type, Arrow
and proto rows alike; a request the stream refuses for its offset or state is answered as
before): ``STRING(L)`` at most L characters, ``BYTES(L)`` at most L bytes,
``NUMERIC``/``BIGNUMERIC(P, S)`` rounded to S digits by ``roundingMode`` (half away from
zero unless ``ROUND_HALF_EVEN``) and then in range (defaults: NUMERIC(38, 9), BIGNUMERIC
scale 38), REQUIRED columns and RECORD members (when the RECORD has a value) not NULL or
missing. A request with a bad row is refused whole: ``error`` INVALID_ARGUMENT
:data:`ROW_ERRORS_MESSAGE` (BigQuery's wording, as users report it) and one ``RowError``
per bad row (its index in the request, ``FIELDS_ERROR``, its first problem in column
order: "Field <column path>: <rule broken>", this launcher's wording); nothing is
appended, the offset does not move, the connection stays open. Not checked: NULL elements
of REPEATED columns, parameters of tables created by DDL (bqemulator's DDL drops them
before this patch sees them). The setting ``row_errors`` of
:mod:`onceover_tools.localbq.limits` (``ONCEOVER_LOCALBQ_ROW_ERRORS=off``,
``limited(row_errors="off")``) turns the checks off, read per request; the schema members
and the nullable Arrow schema stay.

Pinned by ``tests/localbq/test_row_errors.py``, among them
``test_tables_keep_max_length_precision_scale_rounding_mode_and_required``,
``test_bad_rows_refuse_the_whole_request_and_the_good_rows_can_be_sent_again``,
``test_nothing_is_stored_and_the_offset_stays_after_a_refusal`` and
``test_with_the_patch_off_bad_rows_are_taken_as_bqemulator_took_them``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap

ROW_ERRORS_MESSAGE = (
    "Errors found while processing rows. Please refer to the row_errors field for details. "
    "The list may not be complete because of the size limitations. Entity: {stream}"
)
"""BigQuery's message in the ``error`` of an append refused for bad rows (as users have
reported it, e.g. googleapis/python-bigquery-storage#717)."""

_SCHEMA_PARAMETERS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("maxLength", "max_length", frozenset({"STRING", "BYTES"})),
    ("precision", "precision", frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"})),
    ("scale", "scale", frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"})),
    (
        "roundingMode",
        "rounding_mode",
        frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"}),
    ),
)
"""``TableFieldSchema`` members bqemulator's REST parser dropped: (REST name, catalog
name, the types they apply to). Each is documented as invalid on other types."""


def _parameter(raw: dict[str, Any], rest_name: str) -> int | str | None:
    value = raw.get(rest_name)
    if value is None or value == "":
        return None
    if rest_name == "roundingMode":
        return str(value).upper()
    try:
        return int(value)  # int64 members arrive as JSON strings or numbers
    except (TypeError, ValueError):
        return None  # left out, as bqemulator did


def _with_parameters(field: Any, raw: dict[str, Any]) -> Any:
    """``field`` (parsed from ``raw``) with the parameters ``raw`` gives for its type."""
    kind = str(raw.get("type", "STRING")).upper()
    update: dict[str, Any] = {}
    for rest_name, name, kinds in _SCHEMA_PARAMETERS:
        value = _parameter(raw, rest_name)
        if value is not None and kind in kinds:
            update[name] = value
    return field.model_copy(update=update) if update else field


def apply() -> None:
    """Keep the column rules of a table's schema and refuse, with ``row_errors``, an
    AppendRows request any row of which breaks them."""
    _schema_parameters()
    _nullable_append_targets()
    _append_row_checks()


def _schema_parameters() -> None:
    """tables.insert / update / patch (and a load job's explicit schema) keep
    ``maxLength``, ``precision``, ``scale`` and ``roundingMode``; tables.get answers them."""
    from bqemulator.api.routes import tables

    def make_parse(original: Callable[..., Any]) -> Callable[..., Any]:
        def _parse_schema_fields(raw_fields: list[dict[str, Any]]) -> tuple[Any, ...]:
            # The original recurses through this module-level name: members come back
            # with their parameters already.
            parsed = original(raw_fields)
            return tuple(
                _with_parameters(field, raw) for field, raw in zip(parsed, raw_fields, strict=True)
            )

        return _parse_schema_fields

    def make_to_rest(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def _field_to_rest(field: Any) -> dict[str, Any]:
            out = original(field)
            for rest_name, name, _kinds in _SCHEMA_PARAMETERS:
                value = getattr(field, name, None)
                if value is not None:
                    # REST carries int64 members as strings, as BigQuery answers them.
                    out[rest_name] = value if rest_name == "roundingMode" else str(value)
            return out

        return _field_to_rest

    # Both are looked up by name at each call (and by the load-job executor on import).
    wrap(tables, "_parse_schema_fields", make_parse)
    wrap(tables, "_field_to_rest", make_to_rest)


def _nullable_field(field: Any) -> Any:
    """``field`` (a ``pyarrow.Field``) and every member inside it nullable."""
    import pyarrow as pa

    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_nullable_field(kind.field(i)) for i in range(kind.num_fields)])
    elif pa.types.is_list(kind):
        kind = pa.list_(_nullable_field(kind.value_field))
    elif pa.types.is_large_list(kind):
        kind = pa.large_list(_nullable_field(kind.value_field))
    return field.with_type(kind).with_nullable(True)


def _nullable_append_targets() -> None:
    """The Arrow schema an append's rows are lined up with allows NULL everywhere.

    bqemulator marked REQUIRED columns non-nullable in it. At the top level nothing
    reads the flag, but a RECORD's REQUIRED member is part of the struct type, so rows
    with a NULL there failed to cast and the whole request failed with pyarrow's
    message ("field 'country' of type string has nulls. Can't cast to non-nullable
    field"). REQUIRED is checked row by row instead (``_append_row_checks``). Always so,
    whatever the ``row_errors`` setting: a BUFFERED or PENDING stream joins its appends'
    tables, which must then share one schema.
    """
    import pyarrow as pa
    from bqemulator.grpc_api import write_servicer

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_arrow_schema(table_meta: Any) -> Any:
            schema = original(table_meta)
            return pa.schema([_nullable_field(f) for f in schema], metadata=schema.metadata)

        return _table_arrow_schema

    # _bind_stream_to_target looks the module-level function up by name at each bind.
    wrap(write_servicer, "_table_arrow_schema", make)


def _append_row_checks() -> None:
    """Check each AppendRows request's rows before the stream takes them."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType
    from google.cloud.bigquery_storage_v1 import types

    from onceover_tools.localbq import row_rules

    response_type = types.AppendRowsResponse.pb()
    row_error_type = types.RowError.pb()
    fields_error = types.RowError.RowErrorCode.FIELDS_ERROR

    def takes_rows(stream: Any, offset: int | None) -> bool:
        """Whether the stream would append a request at ``offset``; when it would not,
        its own answer (ALREADY_EXISTS, OUT_OF_RANGE, a finalized stream, an offset on
        ``_default``) comes first, as before."""
        if stream.state is not WriteStreamState.OPEN:
            return False
        if stream.stream_type is WriteStreamType.DEFAULT:
            return offset is None
        return offset is None or offset == stream.next_offset

    def refusal(stream_name: str, problems: row_rules.Problems) -> bytes:
        response = response_type.FromString(
            write_servicer._error_response(
                stream_name,
                ROW_ERRORS_MESSAGE.format(stream=stream_name),
                status_code=grpc.StatusCode.INVALID_ARGUMENT,
            )
        )
        response.row_errors.extend(
            row_error_type(index=index, code=fields_error, message=problems[index])
            for index in sorted(problems)
        )
        return bytes(response.SerializeToString())

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _perform_append(
            handler: Any,
            bound_stream: Any,
            rows_table: Any,
            offset: int | None,
            max_buffered_rows: int,
        ) -> bytes:
            if limits.WRITE_API_LIMITS.row_errors == "on" and rows_table.num_rows:
                # The stream's lock (re-entrant; the append takes it again) keeps the
                # offset checked here the one the rows are appended at.
                with bound_stream.lock:
                    if takes_rows(bound_stream, offset):
                        table = handler._ctx.catalog.get_table(
                            bound_stream.project_id, bound_stream.dataset_id, bound_stream.table_id
                        )
                        if table is not None:
                            rows_table, problems = row_rules.check_rows(
                                rows_table, table.schema_.fields
                            )
                            if problems:  # nothing appended, the offset does not move
                                return refusal(bound_stream.name, problems)
                    return original(handler, bound_stream, rows_table, offset, max_buffered_rows)
            return original(handler, bound_stream, rows_table, offset, max_buffered_rows)

        return _perform_append

    # _handle_append_rows calls it on the instance at each request.
    wrap(BigQueryWriteHandler, "_perform_append", make)
