"""Turns a partition's Arrow batches into append requests under the size cap (invariant 2).

Requests are cut from the partition's rows in order. Each is encoded once (Arrow IPC
or proto rows) and split in halves while it is over its budget, so no request comes
near BigQuery's 20,000,000-byte limit. The cap (``request.max_bytes``) bounds the whole
request on the wire: the encoded rows, the envelope (stream name, offset, protobuf
framing: :data:`REQUEST_OVERHEAD_BYTES`) and the writer schema (a serialized Arrow
schema or a proto descriptor, measured: :func:`schema_bytes`). The first request of
every connection carries the schema, and after a reconnect that is whichever request
is sent again first, so every request is budgeted as if it carried it
(:class:`RequestBudget`); at 10,000 columns the schema alone takes hundreds of
kilobytes. A schema that leaves no room for rows is refused before any row is sent.

A retried task in ``committed`` mode first cuts the requests its earlier attempt may
have sent at exactly the recorded boundaries (same offset, same row count), so an
ALREADY_EXISTS for them is an identical retry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, TypeAlias

import pyarrow as pa

from onceover_jobs.sink.errors import AppendRejectedError, NonDeterministicInputError

REQUEST_OVERHEAD_BYTES = 2_000
"""Room for the request envelope besides the rows and the writer schema: the stream name
(up to about 1,900 bytes), the offset and the protobuf framing of the fields."""


Encoded: TypeAlias = bytes  # named apart: EncodedRows has a field called bytes


@dataclass(frozen=True)
class EncodedRows:
    rows: int
    bytes: int
    apply: Callable[[Any], None]
    """Sets the rows on a raw ``AppendRowsRequest`` protobuf."""
    parts: Sequence[Encoded] = ()
    """The encoded rows, as :attr:`digest` reads them."""
    refused: tuple[tuple[int, str], ...] = ()
    """Rows the encoder found no BigQuery value for: (index in the batch, message naming
    the field, as BigQuery's row errors do). A request with any is never sent as it is:
    the appender hands them to its row-error handler first
    (:mod:`onceover_jobs.sink.wire.appender`)."""
    canonical: Callable[[], Sequence[Encoded]] | None = None
    """The rows in their Arrow form, for :attr:`digest`, when they are sent in another
    (proto rows); None: ``parts`` are that form."""

    @cached_property
    def digest(self) -> str:
        """Of the rows, in their Arrow form whatever format they are sent in: the same rows
        digest the same (committed mode records it, so a retry can tell its rows are the
        ones sent at those offsets), also when a retry sends them as proto rows after
        BigQuery refused Arrow (onceover_jobs.sink.modes.row_format). Hashed when first
        asked for: the other modes never ask (a refused request's event aside), and
        SHA-256 of every byte sent is not free."""
        return digest_of(*(self.canonical() if self.canonical is not None else self.parts))


def digest_of(*parts: bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()[:32]


class RowEncoder(Protocol):
    def schema_payload(self, request: Any) -> None:
        """Sets the writer schema on the first request of a connection."""

    def encode(self, batch: pa.RecordBatch) -> EncodedRows: ...


class ArrowEncoder:
    """``arrow_rows``: one serialized Arrow record batch per request."""

    def __init__(self, schema: pa.Schema) -> None:
        self.serialized_schema = schema.serialize().to_pybytes()

    def schema_payload(self, request: Any) -> None:
        pb = raw_request(request)
        pb.arrow_rows.writer_schema.serialized_schema = self.serialized_schema

    def encode(self, batch: pa.RecordBatch) -> EncodedRows:
        data = compact(batch).serialize().to_pybytes()

        def apply(request: Any) -> None:
            raw_request(request).arrow_rows.rows.serialized_record_batch = data

        return EncodedRows(batch.num_rows, len(data), apply, (data,))


def compact(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` in buffers of its own: a slice of a larger batch serializes otherwise
    than the same rows gathered from other batches, and the digest must not tell them
    apart (nor carry more than the rows)."""
    columns = [pa.concat_arrays([column]) for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def raw_request(request: Any) -> Any:
    from google.cloud.bigquery_storage_v1 import types

    return types.AppendRowsRequest.pb(request)


class RowCursor:
    """Reads a stream of record batches by row count, across batch boundaries."""

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self._batches = iter(batches)
        self._current: pa.RecordBatch | None = None

    def _fill(self) -> bool:
        while self._current is None or self._current.num_rows == 0:
            try:
                self._current = next(self._batches)
            except StopIteration:
                self._current = None
                return False
        return True

    def take(self, rows: int) -> pa.RecordBatch | None:
        """The next ``rows`` rows as one batch (fewer at the end; None when exhausted)."""
        pieces: list[pa.RecordBatch] = []
        wanted = rows
        while wanted > 0 and self._fill():
            assert self._current is not None
            piece = self._current.slice(0, wanted)
            self._current = self._current.slice(piece.num_rows)
            pieces.append(piece)
            wanted -= piece.num_rows
        if not pieces:
            return None
        if len(pieces) == 1:
            return pieces[0]
        return pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]

    def skip(self, rows: int) -> int:
        """Drop ``rows`` rows; returns how many there were."""
        skipped = 0
        while skipped < rows:
            batch = self.take(min(rows - skipped, 1 << 20))
            if batch is None:
                break
            skipped += batch.num_rows
        return skipped

    def batches(self) -> Iterator[pa.RecordBatch]:
        while self._fill():
            assert self._current is not None
            batch, self._current = self._current, None
            yield batch


@dataclass(frozen=True)
class Request:
    offset: int
    """The partition offset of the request's first row."""
    encoded: EncodedRows
    rows: pa.RecordBatch
    """The rows encoded: what a row error's index points into."""


def schema_bytes(encoder: RowEncoder) -> int:
    """What the writer schema adds to a request on the wire: the serialized size of a
    request that carries only the schema (Arrow: the serialized schema; proto: the
    descriptor), framing included."""
    from google.cloud.bigquery_storage_v1 import types

    request = types.AppendRowsRequest()
    encoder.schema_payload(request)
    return int(raw_request(request).ByteSize())


@dataclass(frozen=True)
class RequestBudget:
    """How many bytes of encoded rows one request may carry under the cap."""

    max_bytes: int
    """The cap of a whole request on the wire (``request.max_bytes``)."""
    schema_bytes: int
    """The writer schema's share, counted in every request: any request can be the
    first of a connection (after a reconnect, the first one re-sent)."""

    @property
    def rows_bytes(self) -> int:
        return self.max_bytes - REQUEST_OVERHEAD_BYTES - self.schema_bytes


def request_budget(
    encoder: RowEncoder, max_bytes: int, *, table: str | None = None
) -> RequestBudget:
    """The budget of requests of ``encoder``'s rows under ``max_bytes``.

    Raises :class:`AppendRejectedError` when the writer schema leaves no room for a
    row: nothing can be written under this cap, and nothing was sent.
    """
    budget = RequestBudget(max_bytes, schema_bytes(encoder))
    if budget.rows_bytes <= 0:
        target = f"the table {table}" if table else "the table"
        raise AppendRejectedError(
            f"the writer schema of {target} takes {budget.schema_bytes:,} bytes in a "
            f"request, which leaves no room for a row under the request cap of "
            f"{max_bytes:,} bytes (request.max_bytes, with {REQUEST_OVERHEAD_BYTES:,} bytes "
            "for the envelope); the first request of every connection carries the schema. "
            "Raise request.max_bytes, or write fewer columns; nothing was sent",
            table=table,
        )
    return budget


def split_to_cap(
    batch: pa.RecordBatch, encoder: RowEncoder, budget: RequestBudget, *, first_offset: int
) -> Iterator[tuple[pa.RecordBatch, EncodedRows]]:
    """Encode ``batch`` as requests of at most ``budget.rows_bytes`` of rows each, in row
    order: every request, schema and envelope included, stays under ``budget.max_bytes``."""
    room = budget.rows_bytes
    if batch.nbytes > room and batch.num_rows > 1:
        # Cut first by the in-memory size, so a huge batch is not encoded whole.
        per_row = max(1, batch.nbytes // batch.num_rows)
        step = max(1, int(room * 0.8) // per_row)
        if step < batch.num_rows:
            for start in range(0, batch.num_rows, step):
                yield from split_to_cap(
                    batch.slice(start, step), encoder, budget, first_offset=first_offset + start
                )
            return
    encoded = encoder.encode(batch)
    if encoded.bytes <= room:
        yield batch, encoded
        return
    if batch.num_rows == 1:
        raise AppendRejectedError(
            f"the row at offset {first_offset} takes {encoded.bytes:,} bytes encoded, "
            f"over the {room:,} bytes a request has for rows under the cap of "
            f"{budget.max_bytes:,} bytes (request.max_bytes) once the writer schema "
            f"({budget.schema_bytes:,} bytes) and the envelope ({REQUEST_OVERHEAD_BYTES:,}) "
            "are counted; BigQuery cannot take a row that large in one append"
        )
    half = batch.num_rows // 2
    yield from split_to_cap(batch.slice(0, half), encoder, budget, first_offset=first_offset)
    yield from split_to_cap(batch.slice(half), encoder, budget, first_offset=first_offset + half)


def plan_requests(
    batches: Iterable[pa.RecordBatch],
    encoder: RowEncoder,
    max_bytes: int,
    *,
    start_row: int = 0,
    recorded: Sequence[tuple[int, int]] = (),
    table: str | None = None,
) -> Iterator[Request]:
    """The partition's append requests, starting at ``start_row``.

    Each request's rows fit the :class:`RequestBudget` of ``max_bytes``; a writer
    schema that leaves no room for rows raises before the first request (naming
    ``table`` when given). ``recorded`` holds (offset, rows) of requests an earlier
    attempt may have sent; they are cut again at exactly those boundaries before
    normal cutting resumes.
    """
    budget = request_budget(encoder, max_bytes, table=table)
    cursor = RowCursor(batches)
    if cursor.skip(start_row) != start_row:
        raise NonDeterministicInputError(
            f"the partition has fewer rows than the {start_row} its earlier attempt "
            "recorded as written"
        )
    offset = start_row
    for recorded_offset, rows in recorded:
        if recorded_offset != offset:
            raise AppendRejectedError(
                f"recorded request at offset {recorded_offset} does not follow offset {offset}"
            )
        batch = cursor.take(rows)
        if batch is None or batch.num_rows != rows:
            raise NonDeterministicInputError(
                f"the partition has fewer rows than its earlier attempt sent at offsets "
                f"{offset}..{offset + rows - 1}"
            )
        yield Request(offset, encoder.encode(batch), batch)
        offset += rows
    for batch in cursor.batches():
        for piece, encoded in split_to_cap(batch, encoder, budget, first_offset=offset):
            yield Request(offset, encoded, piece)
            offset += encoded.rows
