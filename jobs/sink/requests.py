"""Turns a partition's Arrow batches into append requests under the size cap (invariant 2).

Requests are cut from the partition's rows in order. Each is encoded once (Arrow IPC
or proto rows) and split in halves while it is over the cap, so no request comes near
BigQuery's 10,000,000-byte limit. A retried task in ``committed`` mode first cuts the
requests its earlier attempt may have sent at exactly the recorded boundaries (same
offset, same row count), so an ALREADY_EXISTS for them is an identical retry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from jobs.sink.errors import AppendRejectedError, NonDeterministicInputError

REQUEST_OVERHEAD_BYTES = 2_000
"""Room for the request envelope (stream name, offset, writer schema)."""


@dataclass(frozen=True)
class EncodedRows:
    rows: int
    bytes: int
    apply: Callable[[Any], None]
    """Sets the rows on a raw ``AppendRowsRequest`` protobuf."""
    digest: str = ""
    """Of the encoded rows: the same rows encode to the same digest (committed mode
    records it, so a retry can tell its rows are the ones sent at those offsets)."""


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

        return EncodedRows(batch.num_rows, len(data), apply, digest_of(data))


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
    encoded: EncodedRows


def split_to_cap(
    batch: pa.RecordBatch, encoder: RowEncoder, max_bytes: int, *, first_offset: int
) -> Iterator[EncodedRows]:
    """Encode ``batch`` as requests of at most ``max_bytes`` each, in row order."""
    budget = max_bytes - REQUEST_OVERHEAD_BYTES
    if batch.nbytes > budget and batch.num_rows > 1:
        # Cut first by the in-memory size, so a huge batch is not encoded whole.
        per_row = max(1, batch.nbytes // batch.num_rows)
        step = max(1, int(budget * 0.8) // per_row)
        if step < batch.num_rows:
            for start in range(0, batch.num_rows, step):
                yield from split_to_cap(
                    batch.slice(start, step), encoder, max_bytes, first_offset=first_offset + start
                )
            return
    encoded = encoder.encode(batch)
    if encoded.bytes <= budget:
        yield encoded
        return
    if batch.num_rows == 1:
        raise AppendRejectedError(
            f"the row at offset {first_offset} takes {encoded.bytes:,} bytes encoded, "
            f"over the request cap of {max_bytes:,} bytes (request.max_bytes); "
            "BigQuery cannot take a row that large in one append"
        )
    half = batch.num_rows // 2
    yield from split_to_cap(batch.slice(0, half), encoder, max_bytes, first_offset=first_offset)
    yield from split_to_cap(batch.slice(half), encoder, max_bytes, first_offset=first_offset + half)


def plan_requests(
    batches: Iterable[pa.RecordBatch],
    encoder: RowEncoder,
    max_bytes: int,
    *,
    start_row: int = 0,
    recorded: Sequence[tuple[int, int]] = (),
) -> Iterator[Request]:
    """The partition's append requests, starting at ``start_row``.

    ``recorded`` holds (offset, rows) of requests an earlier attempt may have sent;
    they are cut again at exactly those boundaries before normal cutting resumes.
    """
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
        yield Request(offset, encoder.encode(batch))
        offset += rows
    for batch in cursor.batches():
        for encoded in split_to_cap(batch, encoder, max_bytes, first_offset=offset):
            yield Request(offset, encoded)
            offset += encoded.rows
