"""Rows BigQuery refuses: named, and with a dead-letter table set aside exactly once.

BigQuery checks each row of an append against the table's column rules (a value longer
than ``STRING(n)``, out of a ``NUMERIC(p, s)`` range, a NULL in a REQUIRED column, ...).
A request with a bad row is refused whole: the answer carries ``row_errors`` (the row's
index in the request, ``FIELDS_ERROR``, a message) and nothing of the request is
appended, so the caller may send the rest again at the same offset.

What the sink does with them (invariant 9):

- every refused row is named by the partition, its offset in the partition (0 = first
  row), the write's ``key`` column's value, the column BigQuery named and its message,
  in a ``rows_rejected`` event and, without a dead-letter table, in the error that fails
  the task (the first :data:`NAMED_IN_ERROR`, then a count);
- with ``dead_letter`` (a table id) the request is sent again without those rows, at the
  same offset, and the rows go to a PENDING stream of the task's own on the dead-letter table,
  finalized and returned to the driver with the partition's stream. The driver names it in the
  batch's intent and commits it with the batch (onceover_jobs.sink.protocol.committer), so the good
  rows and the set-aside rows share the batch's exactly-once identity: a retried task's or a
  replay's dead-letter stream is never committed beside the first, as its target streams are not.

The dead-letter table is created on the driver when it is missing, with
:data:`DEAD_LETTER_FIELDS`; an existing one must have those columns.
"""

from __future__ import annotations

import json
import logging
import re
from base64 import b64encode
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from onceover_jobs.sink.errors import AppendRejectedError, RowsRejectedError, SinkOptionError

if TYPE_CHECKING:
    from onceover.bigquery import BigQueryConfig
    from onceover_jobs.sink.wire.appender import PlannedAppend, RowError
    from onceover_jobs.sink.wire.requests import RowEncoder

logger = logging.getLogger(__name__)

NAMED_IN_ERROR = 20
"""Rows an error names one by one; the rest are counted."""
SAMPLES_IN_EVENT = 20
"""Rows a ``rows_rejected`` event names (its schema's limit)."""

DEAD_LETTER_FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("run_id", "STRING", "REQUIRED", "the run the row was written in"),
    ("query_id", "STRING", "NULLABLE", "the streaming query (or the run) of the write"),
    ("batch_id", "INT64", "NULLABLE", "the micro-batch; NULL for a batch write"),
    ("write", "STRING", "NULLABLE", "which write of the run or foreachBatch call"),
    ("table", "STRING", "REQUIRED", "the table BigQuery refused the row for"),
    ("partition", "INT64", "REQUIRED", "the Spark partition the row came from"),
    ("offset", "INT64", "REQUIRED", "the row's offset in its partition (0 = first row)"),
    ("key", "STRING", "NULLABLE", "the write's key column's value, as text"),
    ("column", "STRING", "NULLABLE", "the column BigQuery named, if it named one"),
    ("reason", "STRING", "REQUIRED", "BigQuery's row error message"),
    ("row", "STRING", "REQUIRED", "the row as JSON text (bytes as base64)"),
    ("set_aside_at", "TIMESTAMP", "REQUIRED", "when the task set the row aside"),
)
"""The dead-letter table's columns: (name, type, mode, description)."""

_ARROW_TYPES = {"STRING": pa.string(), "INT64": pa.int64(), "TIMESTAMP": pa.timestamp("us", "UTC")}
DEAD_LETTER_ARROW = pa.schema(
    [
        pa.field(name, _ARROW_TYPES[kind], nullable=mode != "REQUIRED")
        for name, kind, mode, _ in DEAD_LETTER_FIELDS
    ]
)
"""The dead-letter rows as the sink sends them (``arrow_rows``)."""


@dataclass(frozen=True)
class RefusedRow:
    """One row BigQuery refused, named as a user finds it again."""

    partition: int
    offset: int
    key: str | None
    column: str | None
    reason: str
    row: str
    """The row as JSON text."""

    def describe(self) -> str:
        where = f"partition {self.partition} offset {self.offset}"
        key = f" key {self.key!r}" if self.key is not None else ""
        column = f" column {self.column}" if self.column is not None else ""
        return f"{where}{key}{column}: {self.reason}"


@dataclass
class RequestRows:
    """The rows of one append request, and where each sits in its partition."""

    batch: pa.RecordBatch
    offsets: Sequence[int]
    """The partition offset of each row of ``batch``, in order: a ``range`` until rows
    are taken out, so a request no row of which is refused costs no list."""
    span: tuple[int, int]
    """The partition's rows the request was cut from, ``[start, end)``: refused rows
    taken out leave it as it was (committed mode records requests by it)."""

    @classmethod
    def starting_at(cls, batch: pa.RecordBatch, first: int) -> RequestRows:
        end = first + batch.num_rows
        return cls(batch, range(first, end), (first, end))

    def without(self, offsets: set[int]) -> RequestRows | None:
        """These rows but those at ``offsets``; None when none is left."""
        keep = [i for i, offset in enumerate(self.offsets) if offset not in offsets]
        if not keep:
            return None
        return RequestRows(
            self.batch.take(pa.array(keep, pa.int64())),
            [self.offsets[i] for i in keep],
            self.span,
        )


def describe_refused(rows: Sequence[RefusedRow], table: str) -> str:
    """The rows one by one (the first :data:`NAMED_IN_ERROR`), then how many more."""
    named = "; ".join(row.describe() for row in rows[:NAMED_IN_ERROR])
    more = len(rows) - NAMED_IN_ERROR
    tail = f"; and {more} more" if more > 0 else ""
    return f"BigQuery refused {len(rows)} rows for {table}: {named}{tail}"


def column_named(message: str, columns: Sequence[str]) -> str | None:
    """The column a row error's message names. BigQuery's row errors name the field in
    free text (there is no field for it): the name after ``Field`` when it is a column
    (``Field address.city: ...``), else the longest of ``columns`` (top-level names
    and nested ``a.b`` paths) found in it as a whole word."""
    after = re.search(r"\bField\s+([A-Za-z_][A-Za-z0-9_.]*?)[:\s]", message)
    if after is not None and after.group(1) in columns:
        return after.group(1)
    found = [
        name
        for name in columns
        if re.search(rf"(?<![A-Za-z0-9_.]){re.escape(name)}(?![A-Za-z0-9_])", message)
    ]
    return max(found, key=len) if found else None


def column_paths(fields: Sequence[dict[str, Any]], prefix: str = "") -> list[str]:
    """Every column of a table's schema (BigQuery API dicts), nested fields as ``a.b``."""
    paths: list[str] = []
    for f in fields:
        path = f"{prefix}{f['name']}"
        paths.append(path)
        paths.extend(column_paths(f.get("fields") or [], f"{path}."))
    return paths


def row_json(batch: pa.RecordBatch, index: int) -> str:
    """Row ``index`` of ``batch`` as JSON text: what the dead-letter table keeps."""
    (row,) = batch.slice(index, 1).to_pylist()
    return json.dumps(row, default=_jsonable, ensure_ascii=False, sort_keys=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return b64encode(value).decode()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _key_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return b64encode(value).decode()
    return str(value)


@dataclass
class RowRefusals:
    """A task's handler of row errors (:class:`~onceover_jobs.sink.wire.appender.StreamAppender`'s
    ``on_row_errors``): names the rows, keeps them for the dead-letter table (or fails
    the task without one) and returns the request without them."""

    table: str
    partition: int
    key: str | None
    columns: Sequence[str]
    encoder: RowEncoder
    dead_letter_table: str | None
    reported: Callable[[PlannedAppend, list[RefusedRow]], None]
    """Told of every refusal before anything else happens (the ``rows_rejected`` event)."""
    recorded: Callable[[list[RefusedRow]], None] | None = None
    """Told before the rest of a request is sent (committed mode keeps them in the
    ledger: the rest lands at the refused request's offset, and a retry must know)."""
    refused: list[RefusedRow] = field(default_factory=list)

    def __call__(self, append: PlannedAppend, errors: Sequence[RowError]) -> PlannedAppend | None:
        from onceover_jobs.sink.wire.appender import PlannedAppend

        source = append.source
        if not isinstance(source, RequestRows):
            raise AppendRejectedError(
                f"BigQuery refused rows of {append.describe} of {self.table}, but the "
                "request's rows were not kept to name them: "
                + "; ".join(f"row {e.index}: {e.message}" for e in errors[:NAMED_IN_ERROR]),
                table=self.table,
                grpc_code="INVALID_ARGUMENT",
            )
        bad = self._named(source, errors)
        self.reported(append, bad)
        if self.dead_letter_table is None:
            raise RowsRejectedError(
                describe_refused(bad, self.table)
                + ". Nothing of the request was appended. Fix the rows, or set the "
                "dead_letter option to a table where the sink sets them aside and writes "
                "the rest exactly once",
                table=self.table,
                rows=bad,
            )
        if self.recorded is not None:
            self.recorded(bad)
        self.refused.extend(bad)
        kept = source.without({row.offset for row in bad})
        if kept is None:
            return None
        encoded = self.encoder.encode(kept.batch)
        return PlannedAppend(
            offset=append.offset,
            rows=encoded.rows,
            bytes=encoded.bytes,
            rows_payload=encoded.apply,
            encoded=encoded,
            source=kept,
        )

    def again(
        self, source: RequestRows, earlier: dict[int, tuple[str | None, str]]
    ) -> RequestRows | None:
        """A retried task's request, without the rows BigQuery refused when an earlier
        attempt sent it (``earlier``: column and reason by partition offset, from the
        ledger), which are set aside again from this attempt's input (they are the same
        rows: the request's digest matched). None when no row is left."""
        rows = source.batch
        keys = self._keys(rows)
        for index, offset in enumerate(source.offsets):
            if offset in earlier:
                column, reason = earlier[offset]
                self.refused.append(
                    RefusedRow(
                        self.partition,
                        offset,
                        _key_text(keys[index]) if keys is not None else None,
                        column,
                        reason,
                        row_json(rows, index),
                    )
                )
        return source.without(set(earlier))

    def _keys(self, rows: pa.RecordBatch) -> list[Any] | None:
        if self.key is None or self.key not in rows.schema.names:
            return None
        return list(rows.column(self.key).to_pylist())

    def _named(self, source: RequestRows, errors: Sequence[RowError]) -> list[RefusedRow]:
        rows = source.batch
        by_index: dict[int, list[str]] = {}
        for error in errors:
            if not 0 <= error.index < rows.num_rows:
                raise AppendRejectedError(
                    f"BigQuery named row {error.index} of a request of {rows.num_rows} rows "
                    f"for {self.table} ({error.message}); nothing can be set aside safely",
                    table=self.table,
                    grpc_code="INVALID_ARGUMENT",
                )
            by_index.setdefault(error.index, []).append(error.message)
        keys = self._keys(rows)
        named = []
        for index in sorted(by_index):
            reason = "; ".join(by_index[index])
            named.append(
                RefusedRow(
                    partition=self.partition,
                    offset=source.offsets[index],
                    key=_key_text(keys[index]) if keys is not None else None,
                    column=column_named(reason, self.columns),
                    reason=reason,
                    row=row_json(rows, index),
                )
            )
        return named


def dead_letter_batch(
    rows: Sequence[RefusedRow],
    *,
    run_id: str,
    query_id: str | None,
    batch_id: int | None,
    write: str | None,
    table: str,
) -> pa.RecordBatch:
    """The dead-letter table's rows for ``rows``, as Arrow."""
    at = datetime.now(UTC)
    columns: dict[str, list[Any]] = {
        "run_id": [run_id] * len(rows),
        "query_id": [query_id] * len(rows),
        "batch_id": [batch_id] * len(rows),
        "write": [write] * len(rows),
        "table": [table] * len(rows),
        "partition": [r.partition for r in rows],
        "offset": [r.offset for r in rows],
        "key": [r.key for r in rows],
        "column": [r.column for r in rows],
        "reason": [r.reason for r in rows],
        "row": [r.row for r in rows],
        "set_aside_at": [at] * len(rows),
    }
    return pa.RecordBatch.from_pydict(columns, schema=DEAD_LETTER_ARROW)


def dead_letter_schema() -> list[Any]:
    """The dead-letter table's columns as BigQuery's SchemaFields."""
    from google.cloud.bigquery import SchemaField

    return [
        SchemaField(name, kind, mode=mode, description=description)
        for name, kind, mode, description in DEAD_LETTER_FIELDS
    ]


def ensure_dead_letter_table(config: BigQueryConfig, table_id: str) -> None:
    """Create the dead-letter table if it is missing; an existing one must have every
    column of :data:`DEAD_LETTER_FIELDS` with its type (more columns are fine)."""
    from google.api_core.exceptions import Conflict, NotFound
    from google.cloud.bigquery import Table

    from onceover.bigquery import bigquery_client

    client = bigquery_client(config)
    try:
        try:
            existing = client.get_table(table_id)
        except NotFound:
            schema = dead_letter_schema()
            try:
                client.create_table(Table(table_id, schema=schema))
                logger.info("created the dead-letter table %s", table_id)
            except Conflict:  # another driver created it first
                pass
            return
        have = {f.name.lower(): f.field_type.upper() for f in existing.schema}
        same = {"INT64": {"INT64", "INTEGER"}, "STRING": {"STRING"}, "TIMESTAMP": {"TIMESTAMP"}}
        problems = [
            f"{name} missing" if name not in have else f"{name} is {have[name]}, not {kind}"
            for name, kind, _, _ in DEAD_LETTER_FIELDS
            if have.get(name) not in same[kind]
        ]
        if problems:
            raise SinkOptionError(
                "dead_letter",
                f"{table_id} exists but is no dead-letter table: "
                + "; ".join(problems)
                + ". Name a new table (the sink creates it) or one with the documented "
                "columns (docs/guides/bad-rows.md)",
            )
    finally:
        client.close()
