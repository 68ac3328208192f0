"""ASGI middleware: a request id on every request and log line, the security headers on
every answer, and an audit row for every mutating call by someone who showed a token
(whatever route it reaches, so a new route cannot forget it).

A route may write its own row inside the transaction that does its work (``POST
/api/events``: one commit a batch, not two) and say so (:data:`AUDITED`); the
middleware then writes none, whatever follows.

A call without a valid token is not audited: anyone can make those, and a row for
each would let anyone fill the audit table. They are counted instead
(``app.state.unauthenticated``, shown by ``/api/health``) and logged in the access log
like every call."""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onceover_backend.core.logging import request_id_var
from onceover_backend.core.security import Principal
from onceover_backend.services.access import audit
from onceover_backend.tables import AuditLog

logger = logging.getLogger("backend.access")

REQUEST_ID_HEADER = "x-request-id"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_METHODS = SAFE_METHODS | {"POST", "PUT", "PATCH", "DELETE"}
_BODY_KEPT = 4000  # characters of an error answer kept in the audit log
AUDITED = "audited"
"""State key: the route wrote this call's audit row itself (with its own work's commit)."""

# The dashboard is its own origin's scripts and styles, and talks only to its own API.
# React and recharts set inline styles through the DOM, which style-src allows; the
# browser tests fail on anything the policy blocks (tests/browser/conftest.py).
DASHBOARD_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# FastAPI's API pages (/docs, /redoc) load their viewer from a CDN with an inline script.
API_DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
API_DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    """What every answer carries: no framing (clickjacking), no MIME sniffing, no
    referrer (a run's URL names its job and table), and a content policy."""
    policy = API_DOCS_POLICY if path in API_DOCS_PATHS else DASHBOARD_POLICY
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]


class RequestContextMiddleware:
    """Takes a caller's ``X-Request-ID`` (if well formed) or makes one, returns it,
    logs one access line per API request, and audits every mutating call."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(REQUEST_ID_HEADER.encode(), b"").decode()
        request_id = given if _VALID_REQUEST_ID.match(given) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        body = bytearray()
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                headers += security_headers(scope["path"])
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and status >= 400:
                body.extend(message.get("body", b"")[: _BODY_KEPT - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            path: str = scope["path"]
            if path.startswith("/api"):
                _observe(scope, time.perf_counter() - started)
                logger.info(
                    "%s %s %d %.1f ms",
                    scope["method"],
                    path,
                    status,
                    (time.perf_counter() - started) * 1000,
                    extra={"http_request": {"requestMethod": scope["method"],
                                            "requestUrl": path, "status": status}},
                )  # fmt: skip
                if scope["method"] not in SAFE_METHODS:
                    if status == 401:
                        _count_unauthenticated(scope)
                    else:
                        await self._audit(scope, request_id, status, bytes(body))
            request_id_var.reset(token)

    async def _audit(self, scope: Scope, request_id: str, status: int, body: bytes) -> None:
        state: dict[str, Any] = scope.get("state", {})
        if state.get(AUDITED):
            return
        entry = audit_entry(
            scope,
            status,
            target=state.get("audit_target"),
            outcome=state.get("audit_outcome") or _outcome(status, body),
        )
        engine = scope["app"].state.engine
        try:
            await anyio.to_thread.run_sync(audit.record, engine, entry)
        except Exception:  # the answer is already sent; the failure must at least be logged
            logger.exception("could not write the audit log entry for %s", request_id)


def audit_entry(scope: Scope, status: int, *, target: str | None, outcome: str) -> AuditLog:
    """The audit row of the call ``scope`` answered with ``status``: who did what."""
    state: dict[str, Any] = scope.get("state", {})
    principal: Principal | None = state.get("principal")
    route = scope.get("route")
    action = getattr(route, "operation_id", None) or getattr(route, "name", None) or "unknown"
    return AuditLog(
        actor=principal.name if principal else "anonymous",
        subject=principal.subject if principal else None,
        role=principal.role if principal else None,
        action=action,
        method=scope["method"],
        path=scope["path"],
        target=target,
        request_id=state["request_id"],
        status_code=status,
        outcome=outcome,
    )


def _observe(scope: Scope, seconds: float) -> None:
    """The request's time in the latency histogram, by its route's operation id
    (``getRun``: a route, never a path, so a run's id is no label; a path that matches
    no route: ``unmatched``, so that made-up paths add one series in all)."""
    operation = getattr(scope.get("route"), "operation_id", None) or "unmatched"
    method = scope["method"] if scope["method"] in _METHODS else "other"
    metrics = getattr(scope["app"].state, "metrics", None)
    if metrics is not None:
        metrics.instruments.request_seconds.labels(method, operation).observe(seconds)


def _count_unauthenticated(scope: Scope) -> None:
    state = scope["app"].state
    state.unauthenticated = getattr(state, "unauthenticated", 0) + 1


def _outcome(status: int, body: bytes) -> str:
    if status < 400:
        return "ok"
    kind = {401: "unauthenticated", 403: "forbidden"}.get(
        status, "rejected" if status < 500 else "error"
    )
    text = body.decode(errors="replace")
    return f"{kind}: {text}" if text else kind
