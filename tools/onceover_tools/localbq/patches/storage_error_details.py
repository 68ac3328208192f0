"""``storage_error_details``: Write API errors carry BigQuery's ``StorageError``.

bqemulator's errors carried no ``StorageError``. BigQuery (``storage.proto``:
``StorageError``, "structured custom BigQuery Storage error message ... attached as error
details in the returned rpc Status") puts one, Any-packed, in the ``details`` of the
``google.rpc.Status``: in-stream in ``AppendRowsResponse.error`` (the patch:
ALREADY_EXISTS -> ``OFFSET_ALREADY_EXISTS``, OUT_OF_RANGE -> ``OFFSET_OUT_OF_RANGE``,
FAILED_PRECONDITION -> ``STREAM_FINALIZED``, NOT_FOUND -> ``STREAM_NOT_FOUND``), and for
an RPC that fails in gRPC's ``grpc-status-details-bin`` trailer (the patch: NOT_FOUND of
GetWriteStream, FinalizeWriteStream, FlushRows and an AppendRows connection ->
``STREAM_NOT_FOUND``, or ``TABLE_NOT_FOUND`` when the table is what is missing, as for
CreateWriteStream; finalizing ``_default`` or flushing a stream that is not BUFFERED ->
``INVALID_STREAM_TYPE``; finalizing a committed stream -> ``STREAM_ALREADY_COMMITTED``;
flushing past the end -> ``OFFSET_OUT_OF_RANGE``, an offset already flushed
(``buffered_flush``) -> ``OFFSET_ALREADY_EXISTS``, a closed stream ->
``STREAM_FINALIZED``). The entity is the stream (the table for ``TABLE_NOT_FOUND``), the
message the call's own. It wraps the one function that builds in-stream errors
(``_error_response``) and each unary handler's answer after it set its status code, so it
is applied last: it sees the answers of the patches before it.

Pinned by ``tests/localbq/test_limits.py``:
``test_in_stream_errors_carry_a_storage_error_naming_the_stream``,
``test_failed_calls_carry_a_storage_error_in_their_status_details``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from onceover_tools.localbq.patches.wrapping import wrap

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Trailing metadata carrying a serialized ``google.rpc.Status`` (gRPC's rich errors)."""


def _packed_storage_error(code: int, entity: str, message: str) -> Any:
    """A ``google.protobuf.Any`` holding a ``StorageError``."""
    from google.cloud.bigquery_storage_v1 import types
    from google.protobuf import any_pb2

    packed = any_pb2.Any()
    packed.Pack(types.StorageError.pb()(code=code, entity=entity, error_message=message))
    return packed


class _RecordingContext:
    """A gRPC servicer context that remembers the status set on it.

    The context of a synchronous streaming handler cannot tell the code it was given
    (no ``code()``), so each handler wrapped here gets one of these in its place.
    """

    def __init__(self, context: Any) -> None:
        self._context = context
        self.status_code: Any = None
        self.status_details: str | None = None
        self.trailing: tuple[tuple[str, str | bytes], ...] = ()

    def set_code(self, code: Any) -> None:
        self.status_code = code
        self._context.set_code(code)

    def set_details(self, details: str) -> None:
        self.status_details = details
        self._context.set_details(details)

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        self.trailing = tuple(metadata)
        self._context.set_trailing_metadata(metadata)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _attach_storage_error(context: _RecordingContext, code: int, entity: str) -> None:
    """Send the call's status again as a ``google.rpc.Status`` with a ``StorageError``.

    The status code and message must equal the call's own: clients refuse rich details
    that disagree with the call (``grpc_status.rpc_status.from_call``).
    """
    from google.rpc import status_pb2  # type: ignore[import-untyped]

    status_code, message = context.status_code, context.status_details
    if status_code is None or message is None:
        return
    status = status_pb2.Status(
        code=status_code.value[0],
        message=message,
        details=[_packed_storage_error(code, entity, message)],
    )
    context.set_trailing_metadata(
        (*context.trailing, (STATUS_DETAILS_KEY, status.SerializeToString()))
    )


Decide: TypeAlias = Callable[[Any, bytes, Any], tuple[int, str] | None]
"""(handler, request bytes, gRPC status code) -> (StorageErrorCode, entity) or None."""


def apply() -> None:
    """Give Write API errors the ``StorageError`` detail BigQuery gives them."""
    _unary_storage_errors()
    _in_stream_storage_errors()


def _unary_storage_errors() -> None:
    """A failed GetWriteStream, FinalizeWriteStream, FlushRows, CreateWriteStream or
    AppendRows connection sends its status with a ``StorageError`` in the trailer."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import DEFAULT_STREAM_SUFFIX, WriteStreamState
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode
    status = grpc.StatusCode
    default_suffix = f"/streams/{DEFAULT_STREAM_SUFFIX}"

    def unary(decide: Decide) -> Callable[[Callable[..., bytes]], Callable[..., bytes]]:
        def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
            def handle(handler: Any, request_bytes: bytes, context: Any) -> bytes:
                recording = _RecordingContext(context)
                response = original(handler, request_bytes, recording)
                code = recording.status_code
                if code is not None and code is not status.OK:
                    decided = decide(handler, request_bytes, code)
                    if decided is not None:
                        _attach_storage_error(recording, *decided)
                return response

            return handle

        return make

    def on_create(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        parent = types.CreateWriteStreamRequest.pb().FromString(request_bytes).parent
        return (codes.TABLE_NOT_FOUND, parent) if code is status.NOT_FOUND else None

    def on_get(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.GetWriteStreamRequest.pb().FromString(request_bytes).name
        if code is not status.NOT_FOUND:
            return None
        # The _default stream is only missing when its table is.
        missing = codes.TABLE_NOT_FOUND if name.endswith(default_suffix) else codes.STREAM_NOT_FOUND
        return missing, name

    def on_finalize(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.FinalizeWriteStreamRequest.pb().FromString(request_bytes).name
        storage_code = {
            status.NOT_FOUND: codes.STREAM_NOT_FOUND,
            status.INVALID_ARGUMENT: codes.INVALID_STREAM_TYPE,  # the _default stream
            status.FAILED_PRECONDITION: codes.STREAM_ALREADY_COMMITTED,
        }.get(code)
        return None if storage_code is None else (storage_code, name)

    def on_flush(handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.FlushRowsRequest.pb().FromString(request_bytes).write_stream
        if code is status.NOT_FOUND:
            return codes.STREAM_NOT_FOUND, name
        if code is status.INVALID_ARGUMENT:  # not a BUFFERED stream
            return codes.INVALID_STREAM_TYPE, name
        if code is status.ALREADY_EXISTS:  # an offset already flushed (buffered_flush)
            return codes.OFFSET_ALREADY_EXISTS, name
        if code is status.OUT_OF_RANGE:
            stream = handler.manager.get(name)
            if stream is not None and stream.state is not WriteStreamState.OPEN:
                return codes.STREAM_FINALIZED, name
            return codes.OFFSET_OUT_OF_RANGE, name
        return None

    def make_bind(original: Callable[..., Any]) -> Callable[..., Any]:
        # AppendRows closes the connection with NOT_FOUND when its stream or table is gone.
        def _bind_stream_to_target(handler: Any, stream_name: str, context: Any) -> Any:
            recording = _RecordingContext(context)
            bound = original(handler, stream_name, recording)
            if bound is None and recording.status_code is status.NOT_FOUND:
                table_gone = (
                    stream_name.endswith(default_suffix)
                    or handler.manager.get(stream_name) is not None
                )
                storage_code = codes.TABLE_NOT_FOUND if table_gone else codes.STREAM_NOT_FOUND
                _attach_storage_error(recording, storage_code, stream_name)
            return bound

        return _bind_stream_to_target

    wrap(BigQueryWriteHandler, "_handle_create_write_stream", unary(on_create))
    wrap(BigQueryWriteHandler, "_handle_get_write_stream", unary(on_get))
    wrap(BigQueryWriteHandler, "_handle_finalize_write_stream", unary(on_finalize))
    wrap(BigQueryWriteHandler, "_handle_flush_rows", unary(on_flush))
    wrap(BigQueryWriteHandler, "_bind_stream_to_target", make_bind)


def _in_stream_storage_errors() -> None:
    """An ``AppendRowsResponse.error`` gets a ``StorageError`` in its details."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode
    status = grpc.StatusCode
    in_stream = {
        status.ALREADY_EXISTS: codes.OFFSET_ALREADY_EXISTS,
        status.OUT_OF_RANGE: codes.OFFSET_OUT_OF_RANGE,
        status.FAILED_PRECONDITION: codes.STREAM_FINALIZED,
        status.NOT_FOUND: codes.STREAM_NOT_FOUND,
    }
    response_type = types.AppendRowsResponse.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _error_response(
            stream_name: str, detail: str, status_code: Any = status.INVALID_ARGUMENT
        ) -> bytes:
            response_bytes = original(stream_name, detail, status_code=status_code)
            storage_code = in_stream.get(status_code)
            if storage_code is None:
                return response_bytes
            response = response_type.FromString(response_bytes)
            response.error.details.append(_packed_storage_error(storage_code, stream_name, detail))
            return bytes(response.SerializeToString())

        return _error_response

    # _perform_append and _oversize_error_response look the function up by name.
    wrap(write_servicer, "_error_response", make)
