"""A JSON body parsed once: by the body guard, in a worker thread, and reused by the route.

The body guard (:mod:`onceover_backend.api.body_guard`) parses every JSON body under
``/api`` to check it, and keeps what it made of it in the request's state
(:data:`JSON_BODY`). A route of :class:`ParsedBodyRoute` hands that to FastAPI instead of
parsing the body again, so FastAPI validates it as it would have the parsed JSON.

For ``POST /api/events`` the guard goes one step further (:mod:`onceover_backend.api.event_body`):
the events, already validated with the shared schema, so FastAPI's validation only sees
that each item is an event (under a microsecond an event, against 5-6 to validate one).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

JSON_BODY = "json_body"
"""State key: what ``Request.json()`` answers for this request (absent: parse the body)."""


class ParsedBodyRequest(Request):
    """A request whose ``json()`` is the body guard's, when it kept one."""

    async def json(self) -> Any:
        state = self.scope.get("state") or {}
        if JSON_BODY in state:
            return state[JSON_BODY]
        return await super().json()


class ParsedBodyRoute(APIRoute):
    """FastAPI's route, reading the body through :class:`ParsedBodyRequest` (FastAPI's
    documented way to customise the request a route sees)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parsed(request: Request) -> Response:
            return await handler(ParsedBodyRequest(request.scope, request.receive))

        return parsed
