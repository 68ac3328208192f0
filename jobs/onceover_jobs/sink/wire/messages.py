"""The Storage Write API's unary messages in protobuf's wire format, without its client.

The driver's commit and a task's stream calls (create, get, finalize, flush, batch
commit) send a few strings and numbers and read a few back. google-cloud-bigquery-storage
would do it with its generated client, whose import takes seconds and pulls pandas in
wherever pandas is installed (docs/journal/profiling.md, "Writers"); a fresh Python worker paid
it before its first commit. Here each message is its fields, by number, as
``google/cloud/bigquery/storage/v1/storage.proto`` and ``stream.proto`` number them::

    CreateWriteStreamRequest        1 parent, 2 write_stream (WriteStream: 2 type)
    GetWriteStreamRequest           1 name
    FinalizeWriteStreamRequest      1 name
    FlushRowsRequest                1 write_stream, 2 offset (google.protobuf.Int64Value: 1 value)
    BatchCommitWriteStreamsRequest  1 parent, 2 write_streams (repeated)

    WriteStream                     1 name, 2 type, 3 create_time, 4 commit_time (Timestamp)
    FinalizeWriteStreamResponse     1 row_count
    FlushRowsResponse               1 offset
    BatchCommitWriteStreamsResponse 1 commit_time, 2 stream_errors (repeated StorageError)
    StorageError                    1 code, 2 entity, 3 error_message
    google.protobuf.Timestamp       1 seconds, 2 nanos

Fields a reader does not know are skipped, as protobuf does. ``tests/sink/test_write_api.py``
checks every message against the client library's own classes, both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

STREAM_TYPES = {"COMMITTED": 1, "PENDING": 2, "BUFFERED": 3}
"""``WriteStream.Type`` by name."""

STORAGE_ERROR_CODES = (
    "STORAGE_ERROR_CODE_UNSPECIFIED",
    "TABLE_NOT_FOUND",
    "STREAM_ALREADY_COMMITTED",
    "STREAM_NOT_FOUND",
    "INVALID_STREAM_TYPE",
    "INVALID_STREAM_STATE",
    "STREAM_FINALIZED",
    "SCHEMA_MISMATCH_EXTRA_FIELDS",
    "OFFSET_ALREADY_EXISTS",
    "OFFSET_OUT_OF_RANGE",
    "CMEK_NOT_PROVIDED",
    "INVALID_CMEK_PROVIDED",
    "CMEK_ENCRYPTION_ERROR",
    "KMS_SERVICE_ERROR",
    "KMS_PERMISSION_DENIED",
)
"""``StorageError.StorageErrorCode`` names, by number."""


def storage_error_name(code: int) -> str:
    """A ``StorageErrorCode``'s name (``STORAGE_ERROR_<n>`` for one this list lacks)."""
    return STORAGE_ERROR_CODES[code] if 0 <= code < len(STORAGE_ERROR_CODES) else (
        f"STORAGE_ERROR_{code}"
    )  # fmt: skip


# -- writing -------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint (the rows' encoder in proto_rows.py uses it too)."""
    value &= (1 << 64) - 1  # a negative int64 goes as its two's complement, in ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _text(field: int, value: str) -> bytes:
    """A string field; proto3 leaves an empty one out."""
    return _length(field, value.encode()) if value else b""


def _length(field: int, data: bytes) -> bytes:
    return tag(field, _LENGTH) + varint(len(data)) + data


def _number(field: int, value: int) -> bytes:
    """An integer or enum field; proto3 leaves a zero out."""
    return tag(field, _VARINT) + varint(value) if value else b""


def create_write_stream_request(parent: str, stream_type: str) -> bytes:
    return _text(1, parent) + _length(2, _number(2, STREAM_TYPES[stream_type]))


def get_write_stream_request(name: str) -> bytes:
    return _text(1, name)


def finalize_write_stream_request(name: str) -> bytes:
    return _text(1, name)


def flush_rows_request(stream: str, offset: int) -> bytes:
    # The offset is a wrapper message, sent even for offset 0 (its presence is the point).
    return _text(1, stream) + _length(2, _number(1, offset))


def batch_commit_request(parent: str, streams: Sequence[str]) -> bytes:
    return _text(1, parent) + b"".join(_length(2, name.encode()) for name in streams)


# -- reading -------------------------------------------------------------------------------


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("a protobuf message ends inside a number")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> dict[int, list[int | bytes]]:
    """A message's fields by number: integers (varints and fixed-size ones, unsigned) or
    bytes (strings and nested messages), each repeated field's values in order."""
    found: dict[int, list[int | bytes]] = {}
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, at = _read_varint(data, at)
        elif wire == _LENGTH:
            size, at = _read_varint(data, at)
            value, at = data[at : at + size], at + size
            if at > len(data):
                raise ValueError("a protobuf message ends inside a field")
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            value, at = int.from_bytes(data[at : at + width], "little"), at + width
        else:  # groups (3, 4) are proto2's and never in these messages
            raise ValueError(f"wire type {wire} of field {field} is not read here")
        found.setdefault(field, []).append(value)
    return found


def _int64(found: dict[int, list[int | bytes]], field: int) -> int:
    value = found.get(field, [0])[-1]  # the last value of a field wins, as in protobuf
    assert isinstance(value, int), f"field {field} is not a number"
    return value - (1 << 64) if value >= 1 << 63 else value


def _str(found: dict[int, list[int | bytes]], field: int) -> str:
    value = found.get(field, [b""])[-1]
    assert isinstance(value, bytes), f"field {field} is not a string"
    return value.decode()


def _timestamp_text(found: dict[int, list[int | bytes]], field: int) -> str | None:
    """A ``google.protobuf.Timestamp`` field as ISO text (what proto-plus's datetime
    gives with ``isoformat()``); None when it is unset."""
    if field not in found:
        return None
    body = found[field][-1]
    assert isinstance(body, bytes), f"field {field} is not a message"
    stamp = fields(body)
    seconds, nanos = _int64(stamp, 1), _int64(stamp, 2)
    if not seconds and not nanos:
        return None  # the epoch itself: no commit happens there, so none happened
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return moment.replace(microsecond=nanos // 1000).isoformat()


@dataclass(frozen=True)
class StreamFacts:
    """What ``GetWriteStream`` (and ``CreateWriteStream``) answer of a stream."""

    name: str
    type: int
    create_time: str | None
    commit_time: str | None
    """Set once a PENDING stream is committed (equal to ``create_time`` for a
    COMMITTED one); None: not committed."""


@dataclass(frozen=True)
class StorageErrorFacts:
    code: str
    """The ``StorageErrorCode`` by name (``STREAM_ALREADY_COMMITTED``)."""
    entity: str
    message: str


@dataclass(frozen=True)
class CommitAnswer:
    """``BatchCommitWriteStreams``' answer: a commit time, or the errors of the streams
    that kept it from committing (then nothing was committed)."""

    commit_time: str | None
    stream_errors: tuple[StorageErrorFacts, ...]


def write_stream(data: bytes) -> StreamFacts:
    found = fields(data)
    return StreamFacts(
        name=_str(found, 1),
        type=_int64(found, 2),
        create_time=_timestamp_text(found, 3),
        commit_time=_timestamp_text(found, 4),
    )


def row_count(data: bytes) -> int:
    """``FinalizeWriteStreamResponse.row_count``."""
    return _int64(fields(data), 1)


def flushed_offset(data: bytes) -> int:
    """``FlushRowsResponse.offset``."""
    return _int64(fields(data), 1)


def storage_error(data: bytes) -> StorageErrorFacts:
    found = fields(data)
    return StorageErrorFacts(
        code=storage_error_name(_int64(found, 1)),
        entity=_str(found, 2),
        message=_str(found, 3),
    )


def commit_answer(data: bytes) -> CommitAnswer:
    found = fields(data)
    errors = tuple(storage_error(e) for e in found.get(2, []) if isinstance(e, bytes))
    return CommitAnswer(commit_time=_timestamp_text(found, 1), stream_errors=errors)
