"""What a request body must get past before any route reads it.

In this order, so that the cheap refusals come first and nobody unauthenticated makes
the server hold, parse or store anything:

1. **Who.** A mutating call under ``/api`` (all but ``/api/health``) must carry a bearer
   token someone issued. Checked from the headers alone: a 401 is answered before a
   byte of the body is read. The route still checks the token's role.
2. **How much.** A ``Content-Length`` over ``max_body_bytes`` is answered 413 at once;
   a body sent without one (chunked) is read only up to the cap, then 413. Nothing
   over the cap is ever held in memory.
3. **What.** A JSON body must be JSON as RFC 8259 has it: ``NaN``, ``Infinity`` and
   ``-Infinity`` are not JSON numbers, and a lone surrogate (``"\\ud800"``) is not a
   character. Python's parser takes all of them, and each later became a 500 (the
   422 renderer cannot encode them; the database cannot store them). Each is a 422
   naming where it was (``loc``: ``["body", 3, "message"]``), so a job's spool sets
   aside only the events named and sends the rest.
4. **How many.** ``POST /api/events`` takes at most ``max_events`` events; counted here,
   before FastAPI validates each item (a 100,000-item batch was validated whole, and
   its 422 listed every item, before the count refused it).

The body, once through, is handed to the app unchanged, and what it parsed to is kept
for the route (:mod:`onceover_backend.api.parsed_body`; for ``POST /api/events`` the
validated events, :mod:`onceover_backend.api.event_body`). Parsing happens in a worker
thread, so a large body never stalls the event loop. msgspec parses first: it refuses
all that RFC 8259 does, for much less than Python's parser and the walk below; only a
body it refuses is parsed again, to name where it is wrong (docs/journal/profiling.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onceover_backend.api import event_body
from onceover_backend.api.authentication import CSRF_HEADER, authenticate
from onceover_backend.api.middleware import SAFE_METHODS
from onceover_backend.api.parsed_body import JSON_BODY
from onceover_backend.core.config import Settings
from onceover_backend.core.security import Principal
from onceover_backend.errors import NotAllowedError, NotAuthenticatedError

PUBLIC_PATHS = frozenset({"/api/health"})
"""Routes under ``/api`` that anyone may call (they take no body)."""
EVENTS_PATH = "/api/events"


class BodyRefusedError(Exception):
    """The body was refused; ``status`` and ``detail`` are the answer."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


class BodyGuardMiddleware:
    """The limits are the app's settings (``max_body_bytes``, ``max_events_per_request``),
    read per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if (
            scope["type"] != "http"
            or scope["method"] in SAFE_METHODS
            or not path.startswith("/api/")
            or path in PUBLIC_PATHS
        ):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        settings: Settings = scope["app"].state.settings
        try:
            principal = await _authenticated(scope, headers)
            scope.setdefault("state", {})["principal"] = principal
            body = await _read(headers, receive, settings.max_body_bytes)
            if _is_json(headers) and body:
                events = path == EVENTS_PATH
                parsed = await anyio.to_thread.run_sync(
                    _parsed, body, settings.max_events_per_request if events else None,
                    # events: the ingest's share of the process (main.py)
                    limiter=scope["app"].state.ingest_limiter if events else None,
                )  # fmt: skip
                scope["state"].update(parsed)
        except BodyRefusedError as refused:
            await _answer(refused, scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


async def _read(headers: Headers, receive: Receive, limit: int) -> bytes:
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, int(declared))
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BodyRefusedError(400, "the client went away before sending its body")
        body += message.get("body", b"")
        if len(body) > limit:
            raise _too_large(limit, None)
        if not message.get("more_body", False):
            return bytes(body)


def _parsed(body: bytes, events_limit: int | None) -> dict[str, Any]:
    """What the route gets of ``body`` (state entries): its document, or for events
    (``events_limit`` set) the validated batch; nothing when it is not JSON at all."""
    document = _strict_json(body)
    if document is _NOT_JSON:
        return {}
    if events_limit is None:
        return {JSON_BODY: document}
    _check_count(document, events_limit)
    batch = event_body.parse(document)
    if batch is None:  # an invalid event: FastAPI validates the document and says which
        return {JSON_BODY: document}
    return {JSON_BODY: batch.events, event_body.EVENT_BODY: batch}


def _check_count(document: Any, limit: int) -> None:
    if isinstance(document, list) and len(document) > limit:
        raise BodyRefusedError(
            422,
            [{"loc": ["body"], "msg": f"at most {limit} events per request",
              "type": "value_error", "input": len(document)}],
        )  # fmt: skip


async def _authenticated(scope: Scope, headers: Headers) -> Principal:
    try:
        return await authenticate(
            scope["app"].state,
            method=scope["method"],
            authorization=headers.get("authorization", ""),
            cookies=Request(scope).cookies,
            csrf=headers.get(CSRF_HEADER),
        )
    except (NotAuthenticatedError, NotAllowedError) as refused:
        raise BodyRefusedError(refused.status_code, refused.detail) from refused


def _too_large(limit: int, declared: int | None) -> BodyRefusedError:
    size = f" ({declared:,} bytes declared)" if declared is not None else ""
    return BodyRefusedError(
        413, f"the body is larger than {limit:,} bytes{size} (ONCEOVER_MAX_BODY_BYTES)"
    )


def _is_json(headers: Headers) -> bool:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class _NotANumber:
    """What the parser makes of ``NaN``, ``Infinity``, ``-Infinity``: kept, so the walk
    below can say where each one was."""

    def __init__(self, name: str) -> None:
        self.name = name


_NOT_JSON = object()


def _strict_json(body: bytes) -> Any:
    """``body`` parsed as RFC 8259 JSON; refused (422) naming where it is not;
    ``_NOT_JSON`` when it is not JSON at all (FastAPI's own 422 says where)."""
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass  # maybe not JSON, maybe not strict: parsed again to say which and where
    try:
        document = json.loads(body, parse_constant=_NotANumber)
    except ValueError:
        return _NOT_JSON
    for loc, value in _leaves(document, ["body"]):
        problem = _unrepresentable(value)
        if problem is not None:
            # the place may be the bad key itself: named with the surrogate escaped
            where = [_escaped(part) if isinstance(part, str) else part for part in loc]
            raise BodyRefusedError(
                422, [{"loc": where, "msg": problem, "type": "value_error", "input": None}]
            )
    return document


def _leaves(document: Any, root: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    """Every scalar in ``document``, and every key, with where it is; no recursion, so
    a deeply nested body cannot exhaust the stack."""
    stack: list[tuple[list[str | int], Any]] = [(root, document)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                yield [*loc, key], key
                stack.append(([*loc, key], item))
        elif isinstance(value, list):
            stack.extend(([*loc, index], item) for index, item in enumerate(value))
        else:
            yield loc, value


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unrepresentable(value: Any) -> str | None:
    """Why ``value`` cannot be stored or answered as JSON, if it cannot."""
    if isinstance(value, _NotANumber):
        return f"{value.name} is not a JSON number"
    if isinstance(value, float) and not math.isfinite(value):  # 1e999 parses as inf
        return "a number too large for a double"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate (\\ud800-\\udfff) is not a character"
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body already read, then the server's
    own messages (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(refused: BodyRefusedError, scope: Scope, receive: Receive, send: Send) -> None:
    headers = {"WWW-Authenticate": "Bearer"} if refused.status == 401 else None
    if refused.status in (401, 413):
        # The rest of the body is not read; the connection cannot be reused for it.
        headers = {**(headers or {}), "Connection": "close"}
    response = JSONResponse({"detail": refused.detail}, status_code=refused.status, headers=headers)
    await response(scope, receive, send)
