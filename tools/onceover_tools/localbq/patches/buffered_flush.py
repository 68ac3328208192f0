"""``buffered_flush``: FlushRows flushes up to and including its offset, once.

bqemulator's FlushRows took its offset as an exclusive bound (flushing offset N made rows
0..N-1 visible), answered a flush to an offset already flushed with OUT_OF_RANGE, and
never emptied a BUFFERED stream's buffer: each flush joined every row the stream had ever
taken, so a long-lived stream's memory and flush time grew with its history. BigQuery
(``storage.proto``: ``FlushRowsRequest.offset``, "Ending offset of the flush operation.
Rows before this offset(including this offset) will be flushed."; ``FlushRowsResponse.offset``,
"The rows before this offset (including this offset) are flushed.") flushes rows 0..N and
answers N; an offset past the last appended row answers OUT_OF_RANGE "Offset N is beyond
the end of the stream Entity: <stream>" with ``OFFSET_OUT_OF_RANGE``. The patch answers
so, and a flush to an offset already flushed (the last flushed offset included), whose
answer BigQuery does not document, as ``repeated_flush`` (of
:mod:`onceover_tools.localbq.limits`) says: ``"already_exists"`` (the default)
ALREADY_EXISTS "Offset N is already flushed: the stream is flushed up to offset M Entity:
<stream>" with ``OFFSET_ALREADY_EXISTS``, which Apache Beam's
``StorageApiFlushAndFinalizeDoFn`` reads as "already flushed up to this point" and does
not retry; ``"ok"``, OK with offset N. Either way nothing is flushed again. A negative
offset answers OUT_OF_RANGE ("before the start of the stream"). Flushed rows leave the
buffer once they are in the table (a failed insert flushes and drops nothing), so the
local BigQuery holds only rows not yet flushed and a flush costs the rows it flushes; a
flush ending inside one append keeps the rest of it as a slice of that append's memory,
freed when its last row is flushed. The flush holds the stream's lock, as an append does.
An unknown or expired stream (NOT_FOUND), one that is not BUFFERED (INVALID_ARGUMENT), a
finalized one (OUT_OF_RANGE, "Cannot flush stream in FINALIZED state") and a request
without an offset (bqemulator fails it with UNKNOWN) are answered by bqemulator as before.

Pinned by ``tests/localbq/test_patches.py``:
``test_flush_rows_makes_the_rows_up_to_and_including_its_offset_visible``,
``test_flushing_an_offset_already_flushed_answers_already_exists``,
``test_a_repeated_flush_can_be_set_to_answer_ok``,
``test_flushing_past_the_last_appended_row_is_out_of_range``,
``test_flushed_rows_leave_the_buffer_and_later_appends_flush_after_them``,
``test_flush_rows_answers_as_before_for_other_streams``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap


def _split_rows(buffer: list[Any], count: int) -> tuple[list[Any], list[Any]]:
    """A BUFFERED stream's buffer (Arrow tables in offset order) split after ``count``
    rows: the tables holding the first ``count`` rows, and the rest. A table across the
    split is sliced, not copied: its memory goes when its last row is flushed."""
    taken: list[Any] = []
    for index, table in enumerate(buffer):
        if count <= 0:
            return taken, buffer[index:]
        if table.num_rows > count:
            return [*taken, table.slice(0, count)], [table.slice(count), *buffer[index + 1 :]]
        taken.append(table)
        count -= table.num_rows
    return taken, []


def apply() -> None:
    """FlushRows: the offset is inclusive, a repeated flush answers as ``repeated_flush``
    says, and flushed rows leave the stream's buffer."""
    import grpc
    import pyarrow as pa
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.FlushRowsRequest.pb()
    response_type = types.FlushRowsResponse.pb()

    def flushed_to(offset: int) -> bytes:
        response = response_type()
        response.offset = offset
        return bytes(response.SerializeToString())

    def refuse(context: Any, code: Any, message: str) -> bytes:
        context.set_code(code)
        context.set_details(message)
        return b""

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_flush_rows(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            request = request_type.FromString(request_bytes)
            name = request.write_stream
            stream = handler.manager.get(name)
            if (
                stream is None  # NOT_FOUND, as before (stream_lifetimes: also once expired)
                or stream.stream_type is not WriteStreamType.BUFFERED  # INVALID_ARGUMENT
                or stream.state is not WriteStreamState.OPEN  # OUT_OF_RANGE, as before
                or not request.HasField("offset")  # undocumented: left to bqemulator
            ):
                return original(handler, request_bytes, context)
            offset = request.offset.value  # the last row to flush, itself included
            with stream.lock:  # as an append: the stream's lock, then the table's insert
                flushed = stream.flushed_rows  # rows 0 .. flushed - 1 are in the table
                if offset < 0:
                    return refuse(
                        context,
                        grpc.StatusCode.OUT_OF_RANGE,
                        f"Offset {offset} is before the start of the stream Entity: {name}",
                    )
                if offset >= stream.next_offset:
                    return refuse(
                        context,
                        grpc.StatusCode.OUT_OF_RANGE,
                        f"Offset {offset} is beyond the end of the stream Entity: {name}",
                    )
                if offset < flushed:
                    if limits.WRITE_API_LIMITS.repeated_flush == "ok":
                        return flushed_to(offset)
                    return refuse(
                        context,
                        grpc.StatusCode.ALREADY_EXISTS,
                        f"Offset {offset} is already flushed: the stream is flushed up to "
                        f"offset {flushed - 1} Entity: {name}",
                    )
                taken, rest = _split_rows(stream.buffer, offset + 1 - flushed)
                # Into the table first: if that fails, nothing was flushed or dropped.
                handler._flush_to_target(stream, pa.concat_tables(taken))
                stream.buffer[:] = rest
                stream.flushed_rows = offset + 1
            return flushed_to(offset)

        return _handle_flush_rows

    # service() looks the handler up on the instance at each call.
    wrap(BigQueryWriteHandler, "_handle_flush_rows", make)
