"""What BigQuery said went wrong, and about what: the ``StorageError`` of a failure.

The Storage Write API puts a ``google.cloud.bigquery.storage.v1.StorageError`` (a code
such as ``STREAM_FINALIZED`` or ``OFFSET_ALREADY_EXISTS``, the entity, a message) in
the ``details`` of the ``google.rpc.Status`` it fails with. That status reaches the
client in one of three shapes, and :func:`storage_error_of` reads each:

(a) an in-stream ``AppendRowsResponse.error``: the ``Status`` itself, its ``details``
    holding the ``StorageError`` packed in an ``Any``;
(b) a ``grpc.RpcError`` (a call that ended with that status): the same ``Status``,
    serialized in the trailing metadata under ``grpc-status-details-bin``;
(c) a ``google.api_core`` ``GoogleAPICallError`` (what a GAPIC method raises): its
    ``details`` (google-api-core unpacks only ``google.rpc`` error details, so a
    ``StorageError`` stays an ``Any`` there) or else its ``response``, the call of (b).

The gRPC code says how to react (retry or not); the ``StorageError`` code says what
exactly is wrong, which the messages name and the appender acts on (a finalized
stream is unusable for good; an offset error is the offset path of invariant 1).

What the answer means (:func:`reading_of`) is read from all three, as Google's clients
read it, because real BigQuery answers one fact in several shapes:

* a stream or table that does not exist: NOT_FOUND ("Requested entity was not found.
  Entity: projects/.../streams/_default", Beam issue #37140), but also INVALID_ARGUMENT or
  FAILED_PRECONDITION with a ``StorageError`` ``STREAM_NOT_FOUND`` (Google's Java client
  keys its ``StreamNotFound`` on the ``StorageError`` alone, "because we are not sure
  what kind of status code it actually would return", java-bigquerystorage PR #1559;
  Beam reads INVALID_ARGUMENT as "the stream doesn't exist or has already been
  finalized", PR #16906), or one of those codes with only a message saying so;
* PERMISSION_DENIED, "Permission 'TABLES_UPDATE_DATA' denied on resource '...' (or it
  may not exist)." (python-bigquery-storage #238): BigQuery does not tell a caller
  without access from a resource that is missing, so neither can the sink. It is never
  read as "gone" (which would let a stream's rows be given up for lost), only named.

Also here: :func:`table_of` and :func:`target_text`, which name the table of a
stream in messages (``projects/p/datasets/d/tables/t/streams/s`` → ``p.d.t``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

STORAGE_ERROR_TYPE = "google.cloud.bigquery.storage.v1.StorageError"
"""The full name of the proto message, as in an ``Any``'s type URL."""
STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailing-metadata key gRPC carries a serialized ``google.rpc.Status`` under."""

_NAME_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/datasets/(?P<dataset>[^/]+)/tables/(?P<table>[^/]+)"
    r"(?:/streams/(?P<stream>[^/]+))?$"
)


@dataclass(frozen=True)
class StorageErrorInfo:
    """One ``StorageError``, with its code by name (``STREAM_FINALIZED``)."""

    code: str
    entity: str
    message: str

    def __str__(self) -> str:
        about = f" on {self.entity}" if self.entity else ""
        return f"StorageError {self.code}{about}: {self.message}"


def storage_error_of(failure: object) -> StorageErrorInfo | None:
    """The ``StorageError`` in ``failure``: a ``google.rpc.Status``, a ``grpc.RpcError``
    or a ``GoogleAPICallError``; None when it carries none (or is none of these)."""
    from google.rpc import status_pb2  # type: ignore[import-untyped]

    if isinstance(failure, status_pb2.Status):
        return from_status(failure)
    from google.api_core.exceptions import GoogleAPICallError

    if isinstance(failure, GoogleAPICallError):
        return from_api_error(failure)
    import grpc

    if isinstance(failure, grpc.RpcError):
        return from_rpc_error(failure)
    return None


def from_status(status: Any) -> StorageErrorInfo | None:
    """From a ``google.rpc.Status`` (raw protobuf), e.g. ``AppendRowsResponse.error``."""
    if status is None:
        return None
    return _first(status.details)


def from_rpc_error(exc: object) -> StorageErrorInfo | None:
    """From the ``grpc-status-details-bin`` trailing metadata of a failed gRPC call."""
    from google.protobuf.message import DecodeError
    from google.rpc import status_pb2

    trailing = getattr(exc, "trailing_metadata", None)
    if not callable(trailing):
        return None
    try:
        metadata = trailing() or ()
    except Exception:  # a call object without metadata has no StorageError
        return None
    for key, value in metadata:
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return from_status(status_pb2.Status.FromString(value))
            except DecodeError:
                return None  # not a Status after all: the gRPC code is all there is
    return None


def from_api_error(exc: Any) -> StorageErrorInfo | None:
    """From a ``GoogleAPICallError``: its ``details``, else the call in its ``response``."""
    found = _first(getattr(exc, "details", None) or ())
    if found is not None:
        return found
    response = getattr(exc, "response", None)
    return from_rpc_error(response) if response is not None else None


def _first(details: Iterable[Any]) -> StorageErrorInfo | None:
    for detail in details:
        found = _from_detail(detail)
        if found is not None:
            return found
    return None


def _from_detail(detail: Any) -> StorageErrorInfo | None:
    """One entry of ``Status.details``: an ``Any``, or an already unpacked message
    (raw protobuf or proto-plus). Read with :mod:`onceover_jobs.sink.wire.messages`, so
    no client library is imported for it."""
    from google.protobuf import any_pb2

    if isinstance(detail, any_pb2.Any):
        if detail.type_url.rpartition("/")[2] != STORAGE_ERROR_TYPE:
            return None
        return _info(detail.value)
    raw = type(detail).pb(detail) if hasattr(type(detail), "pb") else detail  # proto-plus
    descriptor = getattr(raw, "DESCRIPTOR", None)
    if getattr(descriptor, "full_name", None) == STORAGE_ERROR_TYPE:
        return _info(raw.SerializeToString())
    return None


def _info(serialized: bytes) -> StorageErrorInfo:
    """From a serialized ``StorageError``."""
    from onceover_jobs.sink.wire.messages import storage_error

    facts = storage_error(serialized)
    return StorageErrorInfo(code=facts.code, entity=facts.entity, message=facts.message)


# -- what an answer means ----------------------------------------------------------

Reading = Literal["missing", "denied_or_missing"]

MISSING_CODES = frozenset({"STREAM_NOT_FOUND", "TABLE_NOT_FOUND"})
"""``StorageError`` codes of a stream or table that does not exist, whatever gRPC code."""
_MISSING_WORDS = ("not found", "does not exist", "doesn't exist", "no longer exists")
_ABOUT_A_RESOURCE = ("stream", "entity", "table")
_MISSING_AS = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION"})
"""The gRPC codes real BigQuery also answers a missing stream with (module docstring)."""

READINGS: dict[Reading, str] = {
    "missing": "BigQuery says it does not exist (a stream expired, or was never created)",
    "denied_or_missing": (
        "BigQuery answers so both when the caller lacks bigquery.tables.updateData on the "
        "table and when the stream or table does not exist, and does not say which: check "
        "that the table exists and that the job's credentials have roles/bigquery.dataEditor "
        "on it (or on its dataset)"
    ),
}
"""How messages say what an answer means."""


def reading_of(grpc_code: str, message: str, storage: StorageErrorInfo | None) -> Reading | None:
    """What a failure answered with ``grpc_code`` (by name), ``message`` and ``storage``
    means, when it means one of :data:`READINGS` (module docstring); None otherwise."""
    if grpc_code == "PERMISSION_DENIED":
        return "denied_or_missing"
    if grpc_code == "NOT_FOUND":
        return "missing"
    if storage is not None:
        return "missing" if storage.code in MISSING_CODES else None
    lowered = message.lower()
    if (
        grpc_code in _MISSING_AS
        and any(words in lowered for words in _MISSING_WORDS)
        and any(word in lowered for word in _ABOUT_A_RESOURCE)
    ):
        return "missing"
    return None


# -- names ------------------------------------------------------------------------


def table_of(name: str | None) -> str | None:
    """``project.dataset.table`` of a stream or table resource name; None for others."""
    match = _NAME_RE.match(name or "")
    if match is None:
        return None
    return f"{match['project']}.{match['dataset']}.{match['table']}"


def target_text(name: str | None) -> str:
    """A stream or table name as messages put it: the stream with its table."""
    if not name:
        return "an unnamed stream or table"
    match = _NAME_RE.match(name)
    if match is None:
        return name
    table = f"{match['project']}.{match['dataset']}.{match['table']}"
    if match["stream"] is None:
        return f"table {table}"
    return f"stream {name} (table {table})"
