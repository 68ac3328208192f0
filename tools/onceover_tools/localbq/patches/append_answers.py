"""The seam through which patches answer some AppendRows requests themselves, in order.

bqemulator's AppendRows handler reads a connection's requests one at a time and answers
each with exactly one response before it reads the next. :func:`answering_first` wraps it
so that a patch sees every request first (its bytes, and the stream the connection is on)
and may answer it in the stream itself (an error response: the request takes no offset
and the connection stays open, as BigQuery's in-stream errors do); the others go to
bqemulator, one at a time, so the answers keep the requests' order. Used by
``append_request_limit`` (a request too large) and ``throughput_quota`` (a project over
its quota).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

from onceover.errors import LocalBigQueryVersionError

Answer = Callable[[bytes, str], "bytes | None"]
"""Given a request's bytes and the connection's stream (``""`` until a request names
one), the response to send in its place, or None to let bqemulator answer it."""
Handler = Callable[..., Generator[bytes, None, None]]


def leading_write_stream(request_bytes: bytes) -> str:
    """``write_stream`` of a serialized ``AppendRowsRequest`` when it is there, without
    parsing the rest: field 1, which protobuf writers put first (fields go out in
    number order). ``""`` when the request does not start with it."""
    if request_bytes[:1] != b"\x0a":  # field 1, length-delimited
        return ""
    length, shift, position = 0, 0, 1
    while position < min(len(request_bytes), 6):
        byte = request_bytes[position]
        length |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            name = request_bytes[position : position + length]
            return name.decode("utf-8", "replace") if len(name) == length else ""
        shift += 7
    return ""


class _OneAtATime:
    """The requests bqemulator's AppendRows handler reads: each one it is handed.

    The handler answers every request it reads with exactly one response before it
    reads the next; so the wrapper hands it one request, takes its one response, and
    answers a request itself in between, in order.
    """

    def __init__(self) -> None:
        self._next: bytes | None = None
        self._closed = False

    def hand(self, request_bytes: bytes) -> None:
        self._next = request_bytes

    def close(self) -> None:
        self._closed = True

    def __iter__(self) -> _OneAtATime:
        return self

    def __next__(self) -> bytes:
        request_bytes, self._next = self._next, None
        if request_bytes is not None:
            return request_bytes
        if self._closed:
            raise StopIteration
        raise LocalBigQueryVersionError(
            "bqemulator's AppendRows handler read a request before answering the last "
            "one; the launcher's AppendRows patches need to be re-checked"
        )


def answering_first(answer: Answer) -> Callable[[Handler], Handler]:
    """A ``make_wrapper`` for :func:`~onceover_tools.localbq.patches.wrapping.wrap` of
    ``BigQueryWriteHandler._handle_append_rows``: ``answer`` sees each request first."""

    def make_handle(original: Handler) -> Handler:
        def _handle_append_rows(
            handler: Any, request_iterator: Iterator[bytes], context: Any
        ) -> Generator[bytes, None, None]:
            admitted = _OneAtATime()
            responses = original(handler, admitted, context)
            stream = ""  # the connection's, from its first request that names one
            try:
                for request_bytes in request_iterator:
                    stream = stream or leading_write_stream(request_bytes)
                    answered = answer(request_bytes, stream)
                    if answered is not None:
                        yield answered
                        continue
                    admitted.hand(request_bytes)
                    try:
                        yield next(responses)
                    except StopIteration:  # bqemulator ended the call (stream not found)
                        return
                admitted.close()
                yield from responses  # nothing more to read: the handler returns
            finally:
                responses.close()

        return _handle_append_rows

    return make_handle
