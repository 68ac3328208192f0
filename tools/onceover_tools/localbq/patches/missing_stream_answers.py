"""``missing_stream_answers``: a stream that does not exist answered in real BigQuery's shapes.

bqemulator (with ``storage_error_details``) answers a call on a stream it does not know
one way: NOT_FOUND with a ``StorageError`` ``STREAM_NOT_FOUND``. Real BigQuery answers the
same fact in several: NOT_FOUND ("Requested entity was not found. Entity: ...", Apache
Beam issue #37140); INVALID_ARGUMENT, which Beam reads as "the stream doesn't exist or has
already been finalized" (Beam PR #16906); FAILED_PRECONDITION with the ``StorageError``
("we are not sure what kind of status code it actually would return (can be
preconditioned_failure)", java-bigquerystorage PR #1559, which therefore keys on the
``StorageError`` alone); and PERMISSION_DENIED, "Permission 'TABLES_UPDATE_DATA' denied on
resource '...' (or it may not exist)." (python-bigquery-storage issue #238), with no
``StorageError``, for a resource the caller cannot see.

The setting ``missing_stream_answer`` (:mod:`onceover_tools.localbq.limits`; default
``"not_found"``, the answer as before) turns that one answer of GetWriteStream,
FinalizeWriteStream, FlushRows and an AppendRows connection into another of these shapes:
the code (and for ``permission_denied`` the message, without the ``StorageError``) in the
call's status and in its ``grpc-status-details-bin`` trailer alike, as clients require
the two to agree. Applied after ``storage_error_details``, whose answer it reshapes.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_missing_stream_is_answered_in_each_shape_real_bigquery_uses``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap

STATUS_DETAILS_KEY = "grpc-status-details-bin"
DENIED = "Permission 'TABLES_UPDATE_DATA' denied on resource '{name}' (or it may not exist)."
"""Real BigQuery's PERMISSION_DENIED text for a resource the caller cannot see."""


class _HeldContext:
    """A servicer context whose status is held until the handler returns, so it can be
    reshaped before gRPC sends it."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self.code: Any = None
        self.details: str | None = None
        self.trailing: tuple[tuple[str, str | bytes], ...] | None = None

    def set_code(self, code: Any) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        self.trailing = tuple(metadata)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def send(self, name: str) -> None:
        """Hand the held status to the real context, in the configured shape when it
        answers that stream ``name`` does not exist."""
        import grpc

        shape = limits.WRITE_API_LIMITS.missing_stream_answer
        if (
            shape != "not_found"
            and self.code is grpc.StatusCode.NOT_FOUND
            and _stream_missing(self.trailing)
        ):
            self._reshape(shape, name)
        if self.code is not None:
            self._context.set_code(self.code)
        if self.details is not None:
            self._context.set_details(self.details)
        if self.trailing is not None:
            self._context.set_trailing_metadata(self.trailing)

    def _reshape(self, shape: str, name: str) -> None:
        import grpc
        from google.rpc import status_pb2  # type: ignore[import-untyped]

        assert self.trailing is not None
        if shape == "permission_denied":
            self.code = grpc.StatusCode.PERMISSION_DENIED
            self.details = DENIED.format(name=name)
            self.trailing = tuple(
                (key, value) for key, value in self.trailing if key != STATUS_DETAILS_KEY
            )
            return
        self.code = getattr(grpc.StatusCode, shape.upper())
        reshaped = []
        for key, value in self.trailing:
            if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
                status = status_pb2.Status.FromString(value)
                status.code = self.code.value[0]
                reshaped.append((key, status.SerializeToString()))
            else:
                reshaped.append((key, value))
        self.trailing = tuple(reshaped)


def _stream_missing(trailing: tuple[tuple[str, str | bytes], ...] | None) -> bool:
    """Whether the status in ``trailing`` carries a ``StorageError`` ``STREAM_NOT_FOUND``
    (a missing table is answered as before)."""
    from google.cloud.bigquery_storage_v1 import types
    from google.rpc import status_pb2

    storage_error = types.StorageError.pb()
    for key, value in trailing or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        for detail in status_pb2.Status.FromString(value).details:
            if detail.type_url.endswith("/" + storage_error.DESCRIPTOR.full_name):
                found = storage_error.FromString(detail.value)
                return bool(found.code == types.StorageError.StorageErrorCode.STREAM_NOT_FOUND)
    return False


def apply() -> None:
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    def unary(name_of: Callable[[bytes], str]) -> Callable[..., Any]:
        def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
            def handle(handler: Any, request_bytes: bytes, context: Any) -> bytes:
                held = _HeldContext(context)
                try:
                    return original(handler, request_bytes, held)
                finally:
                    held.send(name_of(request_bytes))

            return handle

        return make

    def make_bind(original: Callable[..., Any]) -> Callable[..., Any]:
        def _bind_stream_to_target(handler: Any, stream_name: str, context: Any) -> Any:
            held = _HeldContext(context)
            try:
                return original(handler, stream_name, held)
            finally:
                held.send(stream_name)

        return _bind_stream_to_target

    def get(request: bytes) -> str:
        return str(types.GetWriteStreamRequest.pb().FromString(request).name)

    def finalize(request: bytes) -> str:
        return str(types.FinalizeWriteStreamRequest.pb().FromString(request).name)

    def flush(request: bytes) -> str:
        return str(types.FlushRowsRequest.pb().FromString(request).write_stream)

    wrap(BigQueryWriteHandler, "_handle_get_write_stream", unary(get))
    wrap(BigQueryWriteHandler, "_handle_finalize_write_stream", unary(finalize))
    wrap(BigQueryWriteHandler, "_handle_flush_rows", unary(flush))
    wrap(BigQueryWriteHandler, "_bind_stream_to_target", make_bind)
