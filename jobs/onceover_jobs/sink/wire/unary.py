"""Unary Storage Write API calls (create, get, finalize, flush, batch commit) under the
sink's retry policy, and nobody else's.

A GAPIC method retries on its own (for up to 600-1200 s, by its defaults) and waits as
long for each answer; inside the sink's own retry loop that made one call hang for 20
minutes. Here every attempt is one gRPC call: GAPIC's retry is off (``retry=None``) and
the call's deadline (``timeout=``) is the smaller of :data:`PER_CALL_TIMEOUT_S` and
what is left of ``retry.deadline_s``. Only the classes
:func:`onceover_jobs.sink.wire.retry.is_retried`
names are retried (UNAVAILABLE, INTERNAL, ABORTED, CANCELLED, DEADLINE_EXCEEDED,
RESOURCE_EXHAUSTED, a transport that failed), with the appender's exponential backoff
and jitter; anything else raises at once a :class:`~onceover_jobs.sink.errors.CallRejectedError`
that names the call, the stream or table and the cause. NOT_FOUND raises
:class:`CallNotFoundError`, which is a google-api-core ``NotFound`` as well, so code
that catches ``NotFound`` around a call keeps working; so does every other answer real
BigQuery gives for a stream or table that does not exist (INVALID_ARGUMENT or
FAILED_PRECONDITION with a ``StorageError`` ``STREAM_NOT_FOUND``, or a message saying so:
:func:`~onceover_jobs.sink.wire.storage_errors.reading_of`). PERMISSION_DENIED, which
BigQuery also answers for a resource that is missing, raises :class:`CallDeniedError`,
whose message says both.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import grpc
from google.api_core.exceptions import GoogleAPICallError, NotFound

from onceover_jobs.sink.errors import CallRejectedError, RetryDeadlineError
from onceover_jobs.sink.wire.retry import RetryPolicy, code_name, is_retried
from onceover_jobs.sink.wire.storage_errors import (
    READINGS,
    StorageErrorInfo,
    reading_of,
    storage_error_of,
    table_of,
    target_text,
)

logger = logging.getLogger(__name__)

R = TypeVar("R")

PER_CALL_TIMEOUT_S = 60.0
"""The longest one attempt may wait for its answer. These calls change metadata only and
answer in well under a second; a minute without an answer is a lost one, retried."""

_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
_TARGET_FIELDS = ("name", "write_stream", "parent")
"""The fields of these requests that name the stream or table they are on."""


class CallNotFoundError(CallRejectedError, NotFound):
    """NOT_FOUND from a unary call: the stream or table does not exist (any more).

    Also a ``google.api_core.exceptions.NotFound``, so ``except NotFound`` still
    catches it; ``message`` (which such code reads) is this error's whole text."""

    def __str__(self) -> str:
        # GoogleAPICallError's own __str__ prefixes the HTTP code; ours reads as a sentence.
        return self.message


class CallDeniedError(CallRejectedError):
    """PERMISSION_DENIED from a unary call: the caller lacks the permission, or what the
    call is on does not exist; BigQuery answers both so. Never taken for "gone"."""


class GapicAttempt(Generic[R]):
    """One attempt of a GAPIC method, for :func:`call_with_retry`:
    ``method(**fields, retry=None, timeout=<the attempt's deadline>)``. Made by
    :func:`gapic`; it knows the method and the resource it is on, for messages."""

    def __init__(self, method: Callable[..., R], fields: dict[str, Any]) -> None:
        self.method = method
        self.fields = fields

    def __call__(self, timeout: float) -> R:
        return self.method(**self.fields, retry=None, timeout=timeout)


def gapic(method: Callable[..., R], /, **fields: Any) -> GapicAttempt[R]:
    """``call_with_retry(policy, gapic(client.finalize_write_stream, name=stream))``"""
    return GapicAttempt(method, fields)


def call_with_retry(
    policy: RetryPolicy,
    fn: Callable[..., R],
    *,
    what: str | None = None,
    on: str | None = None,
    per_call_timeout_s: float = PER_CALL_TIMEOUT_S,
) -> R:
    """Run one unary Storage Write API call, retrying the retried classes to the deadline.

    ``policy``: its ``deadline_s`` bounds the whole call (the sink's ``retry.deadline_s``).
    ``fn``: one attempt. It is given the attempt's deadline in seconds: as ``timeout=``
    if it takes a ``timeout`` parameter (and ``retry=None`` too if it takes ``retry``,
    as a GAPIC method or a ``functools.partial`` of one does: GAPIC's own retry is off),
    else as its one positional argument; a callable taking no argument is still called
    (the form earlier callers used), but nothing can bound its wait then but GAPIC's
    defaults. :func:`gapic` makes a correct ``fn`` of a GAPIC method.
    ``what`` and ``on``: the call (``"FinalizeWriteStream"``) and the stream or table
    resource name it is on, for messages; guessed from a ``partial`` when not given.

    Raises :class:`CallNotFoundError` (also a google-api-core ``NotFound``) for
    NOT_FOUND, :class:`~onceover_jobs.sink.errors.CallRejectedError` for any other code that is
    not retried, :class:`~onceover_jobs.sink.errors.RetryDeadlineError` when retried failures
    outlast the deadline; each names the call, the stream and table, and the cause.
    """
    invoke = _invoker(fn)
    what = what or _called(fn)
    on = on or _target(fn)
    started = time.monotonic()
    deadline = started + policy.deadline_s
    failures = 0
    # The last cause the server itself answered with: when the final attempt is cut
    # short by what was left of the deadline, its DEADLINE_EXCEEDED is ours, and the
    # error would otherwise hide why the call kept failing (UNAVAILABLE, say).
    answered: str | None = None
    while True:
        timeout = min(per_call_timeout_s, deadline - time.monotonic())
        try:
            return invoke(max(timeout, 0.0))
        except (GoogleAPICallError, grpc.RpcError) as exc:
            code, message, storage = _status(exc)
            failures += 1
            if not is_retried(code, message):
                raise _rejected(what, on, code, message, storage) from exc
            elapsed = time.monotonic() - started
            left = deadline - time.monotonic()
            delay = min(policy.backoff(failures), left)
            cause = _cause(code, message, storage)
            if left - delay <= 0:  # no time left for another attempt
                earlier = f" (before that: {answered})" if answered not in (None, cause) else ""
                raise RetryDeadlineError(
                    f"{what} on {target_text(on)}: {cause}{earlier}; kept "
                    f"failing for {elapsed:.1f} s, {failures} attempts "
                    f"(retry.deadline_s={policy.deadline_s:g})"
                ) from exc
            if code != grpc.StatusCode.DEADLINE_EXCEEDED.value[0]:
                answered = cause
            logger.warning(
                "%s on %s: %s; retry %d in %.2f s",
                what,
                target_text(on),
                cause,
                failures,
                delay,
            )
            time.sleep(max(0.0, delay))


def _invoker(fn: Callable[..., R]) -> Callable[[float], R]:
    """``fn`` as a callable of the attempt's deadline (see :func:`call_with_retry`)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: take it as it is
        return lambda timeout: fn()
    if "timeout" in parameters:
        extra = {"retry": None} if "retry" in parameters else {}
        return lambda timeout: fn(timeout=timeout, **extra)
    positional = [
        p
        for p in parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if positional:
        return fn
    return lambda timeout: fn()


def _called(fn: Callable[..., Any]) -> str:
    """The RPC a :func:`gapic` attempt or a ``partial`` calls, else a generic phrase."""
    if isinstance(fn, GapicAttempt):
        inner: Any = fn.method
    elif isinstance(fn, functools.partial):
        inner = fn.func
    else:
        inner = fn
    name = getattr(inner, "__name__", "")
    if name and name.isidentifier() and name.islower():  # get_write_stream, not <lambda>
        return "".join(part.capitalize() for part in name.split("_"))
    return "a Storage Write API call"


def _target(fn: Callable[..., Any]) -> str | None:
    """The stream or table a :func:`gapic` attempt or a ``partial`` names, if any: as a
    flattened field or in its request."""
    if isinstance(fn, GapicAttempt):
        fields = fn.fields
    elif isinstance(fn, functools.partial):
        fields = fn.keywords
    else:
        return None
    for key in _TARGET_FIELDS:
        if isinstance(fields.get(key), str):
            return str(fields[key])
    request = fields.get("request")
    for key in _TARGET_FIELDS:
        value = getattr(request, key, None)
        if isinstance(value, str) and value:
            return value
    return None


def _status(exc: GoogleAPICallError | grpc.RpcError) -> tuple[int, str, StorageErrorInfo | None]:
    """The gRPC code (UNKNOWN when there is none), the message and the StorageError."""
    storage = storage_error_of(exc)
    if isinstance(exc, GoogleAPICallError):
        status = exc.grpc_status_code
        code = status.value[0] if isinstance(status, grpc.StatusCode) else _UNKNOWN
        return code, str(exc.message), storage
    status = exc.code() if callable(getattr(exc, "code", None)) else None
    code = status.value[0] if isinstance(status, grpc.StatusCode) else _UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else None
    return code, str(details or exc), storage


def _cause(code: int, message: str, storage: StorageErrorInfo | None) -> str:
    text = f"{code_name(code)}: {message or '(no message)'}"
    return f"{text} [{storage}]" if storage is not None else text


def _rejected(
    what: str, on: str | None, code: int, message: str, storage: StorageErrorInfo | None
) -> CallRejectedError:
    reading = reading_of(code_name(code), message, storage)
    error = {"missing": CallNotFoundError, "denied_or_missing": CallDeniedError}.get(
        reading or "", CallRejectedError
    )
    meaning = f": {READINGS[reading]}" if reading is not None else ""
    return error(
        f"{what} on {target_text(on)} failed: {_cause(code, message, storage)}{meaning}",
        what=what,
        target=on,
        table=table_of(on),
        grpc_code=code_name(code),
        storage_code=storage.code if storage is not None else None,
        server_message=message,
    )
