"""``change_data_capture``: UPSERT and DELETE rows on ``_default`` change a keyed table.

BigQuery ("Stream table updates with change data capture"): "the pseudocolumn
``_CHANGE_TYPE`` indicates the type of change to be processed for each row ... only
accepts the values ``UPSERT`` and ``DELETE``"; prerequisites: "You must use the Storage
Write API in the default stream", "You must use the protobuf format as the ingestion
format. The Apache Arrow format isn't supported", "You must declare primary keys for the
destination table". Ordering ("Manage custom ordering"): by default "the record most
recently ingested with the latest timestamp takes precedence"; with
``_CHANGE_SEQUENCE_NUMBER`` BigQuery applies records "based on the larger
``_CHANGE_SEQUENCE_NUMBER`` between two matching records with the same primary key", a
``STRING`` "written in hexadecimal, separated into sections by a forward slash ``/``.
Each section can be expressed in at most 16 hexadecimal characters, and up to four
sections are allowed", "both uppercase and lowercase"; it "compares ... by comparing the
first section, then comparing the next section only if the previous sections were
equal", "as unsigned numeric values" ('FFF/ABC' > 'ABC', 'ABC' > 'BA/FFFFFFFF'); "If two
``_CHANGE_SEQUENCE_NUMBER`` values are identical, then the record with the latest
BigQuery system ingestion time has precedence". "Pseudocolumns ``_CHANGE_TYPE`` and
``_CHANGE_SEQUENCE_NUMBER`` are not queryable columns". bqemulator 1.4.0 dropped both
pseudo-columns as unknown proto fields and appended every row, so each change became one
more row.

The patch, for an AppendRows request whose proto writer schema (the connection's, sticky)
has a ``_CHANGE_TYPE`` field (names matched in any case):

- refuses it whole, in the stream, INVALID_ARGUMENT, nothing applied, the connection
  open, when it is not on the ``_default`` stream or the table has no primary key (the
  ``primary_keys`` store: ``tables.insert``'s ``tableConstraints`` or DDL,
  ``ddl_primary_keys``): :data:`NOT_IN_CDC_MODE`, the wording users report from BigQuery
  (googleapis/google-cloud-dotnet#11527, googleapis/nodejs-bigquery-storage#470) followed
  by the prerequisite missing (this launcher's words);
- refuses it whole with ``row_errors`` (``row_errors``' :data:`ROW_ERRORS_MESSAGE`, one
  ``FIELDS_ERROR`` per bad row) when a row's ``_CHANGE_TYPE`` is not exactly ``UPSERT`` or
  ``DELETE`` (unset or empty included: "Mixing rows that have ``UPSERT`` or ``DELETE``
  values ... with rows that have ``INSERT`` or unspecified values ... results in the
  following validation error: ``The given value is not a valid CHANGE_TYPE``"), when its
  ``_CHANGE_SEQUENCE_NUMBER`` is not 1 to 4 ``/``-separated sections of 1 to 16 hex digits,
  or (with the ``row_errors`` setting on) when an UPSERT row breaks a column's rules; the
  messages after "Field <pseudo-column>: " are this launcher's;
- otherwise applies the rows in order, per key (the key columns' values, NULL equal to
  NULL): a change wins over the key's last applied one when either has no sequence
  number (ingestion order) or its sequence number is greater or equal (the later ingest
  wins a tie). Sequence numbers compare section by section as unsigned integers; when
  one runs out of sections with all before equal, the one with more sections is the
  greater (the documents give no example of this case: "the next section only if the
  previous sections were equal" read as tuple order). An UPSERT that wins replaces every
  row of its key with itself (all columns; the pseudo-columns are never stored); a DELETE
  that wins removes them. Rows the table held before (plain appends, DML) have no
  sequence number: any change of their key wins. The table's rows change under the
  process-wide DuckDB lock, so a query sees a request's changes all or none: what
  BigQuery answers with ``max_staleness`` 0 (the default, "BigQuery must apply each
  streamed row modification up to the query start time").

Deleted keys: BigQuery keeps a DELETE "To apply CDC ``DELETE`` operations that arrive out
of order, BigQuery maintains a delete retention window of two days" ("Deleted data
considerations"), so an older UPSERT arriving later does not bring the row back within
it. The patch keeps, for every key a change was applied to (deleted keys too), the
sequence number of its last applied change (or that it had none), for as long as the
table lives in this process (no two-day window: a local BigQuery's tables live for
minutes); a table made again under the same name (another creation time) starts afresh.
Plain appends (a writer schema without ``_CHANGE_TYPE``) are taken as before. Arrow rows
whose writer schema has ``_CHANGE_TYPE`` are refused in the stream, INVALID_ARGUMENT,
:data:`ARROW_REFUSAL` (the prerequisite quoted). Tables with active CDC "don't support
... Mutating data manipulation language (DML) statements such as ``DELETE``, ``UPDATE``,
and ``MERGE``" (Limitations): an UPDATE, DELETE or MERGE job on a table that took a CDC
change in this process fails, 400 invalidQuery, :data:`DML_REFUSAL` (this launcher's
wording). Not done: refusing plain and CDC appends mixed on one connection across
requests, the 16-column and 2,000-column limits, ``max_staleness`` above 0 and
``upsert_stream_apply_watermark``.

Pinned by ``tests/localbq/test_cdc_patch.py`` (the docs' example, ordering, ties, deleted
keys, every refusal, plain appends, and the same calls without the patch).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches import primary_keys
from onceover_tools.localbq.patches.one_duckdb_user_at_a_time import _duckdb_lock
from onceover_tools.localbq.patches.row_errors import ROW_ERRORS_MESSAGE
from onceover_tools.localbq.patches.wrapping import wrap

CHANGE_TYPE = "_CHANGE_TYPE"
CHANGE_SEQUENCE_NUMBER = "_CHANGE_SEQUENCE_NUMBER"
CHANGE_TYPES = ("UPSERT", "DELETE")
NOT_IN_CDC_MODE = "The given value is not a valid CHANGE_TYPE in insert mode: {value}."
"""BigQuery's refusal of a ``_CHANGE_TYPE`` its stream or table does not take, as users
report it; the patch adds which prerequisite is missing and the stream."""
ARROW_REFUSAL = (
    "_CHANGE_TYPE needs the protobuf format as the ingestion format: "
    "The Apache Arrow format isn't supported. Entity: {stream}"
)
INVALID_CHANGE_TYPE = "The given value is not a valid CHANGE_TYPE: {value!r}"
INVALID_SEQUENCE_NUMBER = (
    "{value!r} is not a valid change sequence number: up to four '/'-separated sections "
    "of 1 to 16 hexadecimal digits"
)
DML_REFUSAL = (
    "{statement} is not supported on table {table}: tables with active change data "
    "capture don't support mutating DML statements"
)
_SEQUENCE_NUMBER = re.compile(r"^[0-9A-Fa-f]{1,16}(?:/[0-9A-Fa-f]{1,16}){0,3}$")

SequenceNumber = tuple[int, ...]
Key = tuple[Any, ...]
TableAt = tuple[str, str, str, str]
"""(project, dataset, table, creation time): a table, not a name a later table reuses."""

_state_lock = threading.Lock()  # taken inside the DuckDB lock, never around it
_applied: dict[TableAt, dict[Key, SequenceNumber | None]] = {}
"""Per table, per key a change was applied to: the sequence number of the last applied
change (None: it had none). Deleted keys stay, so an older change does not win later."""


def sequence_number(text: str) -> SequenceNumber | None:
    """``text`` read as a ``_CHANGE_SEQUENCE_NUMBER`` (one int per section), or None when
    it is not one."""
    if not _SEQUENCE_NUMBER.match(text):
        return None
    return tuple(int(section, 16) for section in text.split("/"))


def wins(new: SequenceNumber | None, last: SequenceNumber | None) -> bool:
    """Whether a change with sequence number ``new``, ingested after the key's last
    applied change (``last``), takes precedence over it."""
    return new is None or last is None or new >= last


@dataclass(frozen=True)
class _Changes:
    """The pseudo-columns of one request's rows, by row."""

    change_types: tuple[Any, ...]
    sequence_numbers: tuple[Any, ...]


_ARROW = _Changes((), ())
"""Marks a request of Arrow rows whose writer schema has ``_CHANGE_TYPE``."""

_current = threading.local()
"""The pseudo-columns of the request being handled on this thread, read between
bqemulator's decoding of its rows and its append (the same thread, one after the other)."""


def _pseudo_columns(names: Sequence[str]) -> tuple[str | None, str | None]:
    """The writer schema's names of ``_CHANGE_TYPE`` and ``_CHANGE_SEQUENCE_NUMBER``."""
    by_folded = {name.casefold(): name for name in names}
    return by_folded.get(CHANGE_TYPE.casefold()), by_folded.get(CHANGE_SEQUENCE_NUMBER.casefold())


def _changes_of(request: Any, decoder: Any, arrow_schema_bytes: bytes | None) -> _Changes | None:
    pb = type(request).pb(request)
    if pb.HasField("proto_rows") and decoder is not None:
        change_type, sequence = _pseudo_columns(decoder.field_names)
        if change_type is None:
            return None
        decoded = [decoder.decode(row) for row in pb.proto_rows.rows.serialized_rows]
        return _Changes(
            tuple(row.get(change_type) for row in decoded),
            tuple(row.get(sequence) if sequence else None for row in decoded),
        )
    if pb.HasField("arrow_rows") and arrow_schema_bytes:
        import pyarrow as pa

        names = pa.ipc.read_schema(pa.py_buffer(arrow_schema_bytes)).names
        return _ARROW if _pseudo_columns(names)[0] is not None else None
    return None


def _row_problems(changes: _Changes) -> dict[int, str]:
    problems: dict[int, str] = {}
    for index, (kind, number) in enumerate(
        zip(changes.change_types, changes.sequence_numbers, strict=True)
    ):
        if kind not in CHANGE_TYPES:
            problems[index] = f"Field {CHANGE_TYPE}: " + INVALID_CHANGE_TYPE.format(value=kind)
        elif number not in (None, "") and (
            not isinstance(number, str) or sequence_number(number) is None
        ):
            problems[index] = f"Field {CHANGE_SEQUENCE_NUMBER}: " + INVALID_SEQUENCE_NUMBER.format(
                value=number
            )
    return problems


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def is_active(catalog: Any, project: str, dataset: str, table: str) -> bool:
    """Whether the table (the one of that name now) took a CDC change in this process."""
    meta = catalog.get_table(project, dataset, table)
    if meta is None:
        return False
    with _state_lock:
        return (project, dataset, table, str(meta.creation_time)) in _applied


def apply() -> None:
    """Apply ``_CHANGE_TYPE`` rows on ``_default`` as CDC; refuse what BigQuery refuses."""
    _read_pseudo_columns()
    _apply_changes()
    _refuse_mutating_dml()


def _read_pseudo_columns() -> None:
    from bqemulator.grpc_api import write_servicer

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _rows_for_request(
            request: Any, proto_decoder: Any, arrow_schema_bytes: Any, target_schema: Any
        ) -> Any:
            _current.changes = None  # nothing left over from a request that failed to decode
            rows, decoder, schema_bytes = original(
                request, proto_decoder, arrow_schema_bytes, target_schema
            )
            _current.changes = _changes_of(request, decoder, schema_bytes)
            return rows, decoder, schema_bytes

        return _rows_for_request

    # _handle_append_rows calls the module-level name at each request.
    wrap(write_servicer, "_rows_for_request", make)


def _apply_changes() -> None:
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.strategies import select_strategy
    from google.cloud.bigquery_storage_v1 import types

    from onceover_tools.localbq import row_rules

    response_type = types.AppendRowsResponse.pb()
    row_error_type = types.RowError.pb()
    fields_error = types.RowError.RowErrorCode.FIELDS_ERROR

    def refused(stream: str, message: str) -> bytes:
        return bytes(
            write_servicer._error_response(
                stream, message, status_code=grpc.StatusCode.INVALID_ARGUMENT
            )
        )

    def refused_rows(stream: str, problems: dict[int, str]) -> bytes:
        response = response_type.FromString(
            refused(stream, ROW_ERRORS_MESSAGE.format(stream=stream))
        )
        response.row_errors.extend(
            row_error_type(index=index, code=fields_error, message=problems[index])
            for index in sorted(problems)
        )
        return bytes(response.SerializeToString())

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _perform_append(
            handler: Any, stream: Any, rows: Any, offset: int | None, max_buffered_rows: int
        ) -> bytes:
            changes: _Changes | None = getattr(_current, "changes", None)
            _current.changes = None
            if changes is None:  # a plain append, as before
                return original(handler, stream, rows, offset, max_buffered_rows)
            where = (stream.project_id, stream.dataset_id, stream.table_id)
            key = primary_keys.key_of(*where)
            table = handler._ctx.catalog.get_table(*where)
            not_taken = _not_in_cdc_mode(stream, changes, key if table is not None else None)
            if not_taken is not None or key is None:  # (a table without a key is refused)
                return refused(stream.name, not_taken or "")
            if offset is not None or not rows.num_rows:  # the stream's own answer
                return original(handler, stream, rows, offset, max_buffered_rows)
            problems = _row_problems(changes)
            upserts = [i for i, kind in enumerate(changes.change_types) if kind == "UPSERT"]
            if not problems and upserts and limits.WRITE_API_LIMITS.row_errors == "on":
                checked, found = row_rules.check_rows(rows.take(upserts), table.schema_.fields)
                problems = {upserts[i]: message for i, message in found.items()}
                if not problems:  # rounded decimals are stored rounded, as plain appends
                    rows = _with_rows(rows, upserts, checked)
            if problems:  # nothing applied
                return refused_rows(stream.name, problems)
            names = {name.casefold(): name for name in rows.column_names}
            key_columns = [names.get(column.casefold(), column) for column in key]
            with stream.lock:
                _apply(handler, stream, table, rows=rows, changes=changes, key_columns=key_columns)
                outcome = select_strategy(stream.stream_type).append(stream, rows, None)
            return bytes(write_servicer._ok_response(stream.name, outcome))

        return _perform_append

    # _handle_append_rows calls it on the instance at each request.
    wrap(BigQueryWriteHandler, "_perform_append", make)


def _with_rows(rows: Any, indices: list[int], replacement: Any) -> Any:
    """``rows`` with the rows at ``indices`` replaced by ``replacement``'s, in order."""
    import pyarrow as pa

    order = {index: position for position, index in enumerate(indices)}
    merged = pa.concat_tables([rows, replacement.cast(rows.schema)])
    picks = [rows.num_rows + order[i] if i in order else i for i in range(rows.num_rows)]
    return merged.take(picks)


def _not_in_cdc_mode(stream: Any, changes: _Changes, key: tuple[str, ...] | None) -> str | None:
    """Why the stream or its table takes no change rows (the refusal's message), or None."""
    from bqemulator.streaming.write_stream import WriteStreamType

    if changes is _ARROW:
        return ARROW_REFUSAL.format(stream=stream.name)
    refusal = NOT_IN_CDC_MODE.format(value=changes.change_types[0] if changes.change_types else "")
    if stream.stream_type is not WriteStreamType.DEFAULT:
        return (
            f"{refusal} Change data capture takes the _default stream only. Entity: {stream.name}"
        )
    if key is None:
        table = f"{stream.project_id}.{stream.dataset_id}.{stream.table_id}"
        return f"{refusal} Table {table} has no primary key. Entity: {stream.name}"
    return None


def _apply(
    handler: Any, stream: Any, table: Any, *, rows: Any, changes: _Changes, key_columns: list[str]
) -> None:
    """Apply the request's changes to the table: per key, the winning change of the
    request replaces (UPSERT) or removes (DELETE) the key's rows."""
    import pyarrow as pa
    from bqemulator.storage.sql_identifiers import quoted_table_ref, register_name

    at: TableAt = (stream.project_id, stream.dataset_id, stream.table_id, str(table.creation_time))
    keys = rows.select(key_columns).to_pylist()
    with _duckdb_lock:
        with _state_lock:
            applied = dict(_applied.get(at, {}))
        final: dict[Key, int] = {}  # key -> the index of its winning change in the request
        for index, number in enumerate(changes.sequence_numbers):
            key = tuple(keys[index][column] for column in key_columns)
            sequence = sequence_number(number) if isinstance(number, str) and number else None
            if key in applied and not wins(sequence, applied[key]):
                continue  # an older change than the one applied: BigQuery keeps the newer
            applied[key] = sequence
            final[key] = index
        if not final:
            return
        target = quoted_table_ref(stream.project_id, stream.dataset_id, stream.table_id)
        changed = rows.select(key_columns).take(pa.array(list(final.values()), pa.int64()))
        upserted = sorted(i for i in final.values() if changes.change_types[i] == "UPSERT")
        inserted = rows.take(pa.array(upserted, pa.int64()))
        engine = handler._ctx.engine
        suffix = uuid.uuid4().hex[:12]  # bqemulator's own register names' shape
        keys_name = register_name(f"__bqemu_cdc_keys_{suffix}")
        rows_name = register_name(f"__bqemu_cdc_rows_{suffix}")
        match = " AND ".join(
            f"k.{_quoted(c)} IS NOT DISTINCT FROM {_quoted(stream.table_id)}.{_quoted(c)}"
            for c in key_columns
        )
        engine.connection.register(keys_name, changed)
        engine.connection.register(rows_name, inserted)
        try:
            removed = engine.execute(
                f"DELETE FROM {target} WHERE EXISTS (SELECT 1 FROM {keys_name} AS k WHERE {match})"
            ).fetchone()
            if inserted.num_rows:
                engine.execute(f"INSERT INTO {target} SELECT * FROM {rows_name}")
        finally:
            engine.connection.unregister(keys_name)
            engine.connection.unregister(rows_name)
        with _state_lock:
            _applied[at] = applied
        meta = handler._ctx.catalog.get_table(stream.project_id, stream.dataset_id, stream.table_id)
        if meta is not None:
            count = max(0, meta.num_rows - int(removed[0] if removed else 0) + inserted.num_rows)
            handler._ctx.catalog.update_table(meta.model_copy(update={"num_rows": count}))
        # TableDataChanged: the query cache forgets the table's earlier answers.
        handler._ctx.snapshots.record_change(stream.project_id, stream.dataset_id, stream.table_id)


def _refuse_mutating_dml() -> None:
    from bqemulator.api.routes import jobs
    from bqemulator.domain.errors import InvalidQueryError
    from bqemulator.jobs import executor

    mutating = frozenset({"UPDATE", "DELETE", "MERGE"})

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        async def execute_query_job(
            project_id: str, job_id: str, bq_sql: str, query_params: Any, ctx: Any,
            *args: Any, **kwargs: Any,
        ) -> Any:  # fmt: skip
            with _state_lock:
                any_active = bool(_applied)
            tree = executor._parse_for_classification(bq_sql) if any_active else None
            statement = executor._classify_parsed_tree(tree) if tree is not None else ""
            if statement in mutating:
                for target in executor._dml_target_tables(tree, project_id):
                    if is_active(ctx.catalog, *target):
                        raise InvalidQueryError(
                            DML_REFUSAL.format(statement=statement, table=".".join(target))
                        )
            return await original(project_id, job_id, bq_sql, query_params, ctx, *args, **kwargs)

        return execute_query_job

    # The jobs routes call the name they imported, looked up in their module at each call.
    wrap(jobs, "execute_query_job", make)
