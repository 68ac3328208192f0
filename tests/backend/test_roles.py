"""Every route under ``/api`` checks a role: the matrix is built from the app's own routes,
so a route added without ``IngestDep``/``ViewerDep``/``OperatorDep`` (or ``AnyRoleDep``,
any valid token) fails here.

For each route and method: no token is 401, a token nobody issued is 401, each
configured token is 403 when its role lacks the route's and neither 401 nor 403 when
it has it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import APIRouter, Depends, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from onceover_backend.api.deps import ANY_ROLE, RoleCheck, ViewerDep
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app
from onceover_backend.tables import Event
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from onceover.bigquery import BigQueryConfig
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer

# Routes anyone may call. Keep this short: each entry is a route with no role check.
PUBLIC = frozenset({"/api/health"})

# What each configured token may do, written out here rather than read from the
# backend, so a change to the grants has to change this table too.
TOKEN_ROLES: dict[str, frozenset[str]] = {
    INGEST: frozenset({"ingest"}),
    VIEWER: frozenset({"viewer"}),
    OPERATOR: frozenset({"operator", "viewer"}),
}
TOKEN_NAMES = {INGEST: "ingest", VIEWER: "viewer", OPERATOR: "operator"}
UNISSUED = "nobody-issued-this-token-0123456789"

DUMMY_PATH_VALUE = "no-such-thing"
# A plausible request per route beyond its path: a body where the route takes one, the
# query parameters it needs to get past validation. A new route with a body needs an
# entry here (the matrix says so), otherwise a 422 could hide behind "not 401/403".
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/api/events"): f.as_json([f.started("roles", "a1", 0)]),
    ("POST", "/api/tables/{table}/reconcile"): {"key": "order_id"},
    ("POST", "/api/alert-rules"): {"name": "failed", "kind": "run_failed"},
    ("PUT", "/api/alert-rules/{rule_id}"): {"name": "failed", "kind": "run_failed"},
    ("POST", "/api/webhooks"): {"name": "hook", "url": "http://127.0.0.1:9/hook"},
    ("PATCH", "/api/webhooks/{endpoint_id}"): {"enabled": False},
    ("POST", "/api/runs/{run_id}/spec"): {"digest": "0" * 64, "decision": "approve"},
}
QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("GET", "/api/metrics/write-errors"): {"run_id": DUMMY_PATH_VALUE},
}


@dataclass(frozen=True)
class ApiRoute:
    """A route as the app serves it: its full path and its whole dependency tree
    (dependencies of the routers it was included through count too)."""

    path: str
    methods: frozenset[str]
    dependant: Dependant
    takes_body: bool
    event_stream: bool


def api_routes(app: FastAPI) -> list[ApiRoute]:
    """Every ``APIRoute`` under ``/api``. FastAPI includes routers lazily, so
    ``app.routes`` holds included routers; walk them as FastAPI's OpenAPI builder does."""
    found = []
    for context in iter_route_contexts(app.routes):
        if not isinstance(context.original_route, APIRoute) or not context.path:
            continue
        if not context.path.startswith("/api"):
            continue
        response_class = getattr(context.response_class, "value", context.response_class)
        found.append(
            ApiRoute(
                path=context.path,
                methods=frozenset(context.methods or ()),
                dependant=context.dependant,
                takes_body=context.body_field is not None,
                event_stream=getattr(response_class, "media_type", None) == "text/event-stream",
            )
        )
    return found


def role_checks(dependant: Dependant) -> list[RoleCheck]:
    """Every ``RoleCheck`` in a dependency tree."""
    found = [dependant.call] if isinstance(dependant.call, RoleCheck) else []
    for sub in dependant.dependencies:
        found += role_checks(sub)
    return found


def required_role(route: ApiRoute) -> str | None:
    checks = role_checks(route.dependant)
    return checks[0].role if checks else None


# Collected from an app of its own (no database is touched building it) so each route
# is a test case of its own; test_the_matrix_covers_the_apps_routes checks that the
# app the tests run against has the same routes.
_COLLECTED = create_app(Settings(database_url="sqlite://"), bigquery=BigQueryConfig())
ROUTES = {
    (method, route.path): route
    for route in api_routes(_COLLECTED)
    for method in sorted(route.methods)
}
PROTECTED = sorted(key for key in ROUTES if key[1] not in PUBLIC)


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", DUMMY_PATH_VALUE, path)


def _call(
    client: TestClient, method: str, path: str, headers: dict[str, str], *, streaming: bool
) -> int:
    kwargs: dict[str, Any] = {"headers": headers, "params": QUERIES.get((method, path))}
    if (method, path) in BODIES:
        kwargs["json"] = BODIES[method, path]
    if streaming:
        # An event stream never ends: read the status line, then hang up.
        with client.stream(method, _url(path), **kwargs) as response:
            return response.status_code
    return client.request(method, _url(path), **kwargs).status_code


def test_the_walk_finds_role_checks_however_declared() -> None:
    """The walk itself: a check on the route, on its router, or given when a router is
    included in another, counts; a route without one is seen as such."""
    inner = APIRouter()
    outer = APIRouter(prefix="/api/outer")
    guarded = APIRouter(prefix="/api/guarded", dependencies=[Depends(RoleCheck("operator"))])
    plain = APIRouter(prefix="/api/plain")

    @inner.get("/included")
    def included() -> None: ...

    @guarded.get("/by-router")
    def by_router() -> None: ...

    @plain.get("/by-parameter")
    def by_parameter(_principal: ViewerDep) -> None: ...

    @plain.post("/none")
    def none() -> None: ...

    outer.include_router(inner, dependencies=[Depends(RoleCheck("ingest"))])
    toy = FastAPI()
    for router in (outer, guarded, plain):
        toy.include_router(router)

    assert {route.path: required_role(route) for route in api_routes(toy)} == {
        "/api/outer/included": "ingest",
        "/api/guarded/by-router": "operator",
        "/api/plain/by-parameter": "viewer",
        "/api/plain/none": None,
    }


def test_every_api_route_checks_a_role(app: FastAPI) -> None:
    unchecked = [
        f"{sorted(route.methods)} {route.path}"
        for route in api_routes(app)
        if route.path not in PUBLIC and required_role(route) is None
    ]

    assert not unchecked, (
        f"routes without a role check (declare IngestDep, ViewerDep or OperatorDep): {unchecked}"
    )


def test_the_public_routes_exist_and_check_no_role(app: FastAPI) -> None:
    public = {route.path: route for route in api_routes(app) if route.path in PUBLIC}

    assert set(public) == PUBLIC, "PUBLIC names a route the app does not have"
    for path, route in public.items():
        assert required_role(route) is None, f"{path} is listed as public but checks a role"


def test_the_matrix_covers_the_apps_routes(app: FastAPI) -> None:
    served = {(method, route.path) for route in api_routes(app) for method in route.methods}

    assert served == set(ROUTES)
    assert PROTECTED, "no protected routes found: is the API still under /api?"


@pytest.mark.parametrize(("method", "path"), PROTECTED, ids=[f"{m} {p}" for m, p in PROTECTED])
def test_role_matrix(client: TestClient, method: str, path: str) -> None:
    route = ROUTES[method, path]
    role = required_role(route)
    if role is None:
        pytest.fail(
            f"{method} {path} has no role check: declare IngestDep, ViewerDep or OperatorDep"
        )
    assert role in {"ingest", "viewer", "operator", ANY_ROLE}, f"{method} {path}: role {role!r}"
    if route.takes_body and (method, path) not in BODIES:
        pytest.fail(f"{method} {path} takes a body: add a plausible one to BODIES")
    streaming = route.event_stream

    for label, headers in (("no token", {}), ("an unissued token", bearer(UNISSUED))):
        status = _call(client, method, path, headers, streaming=streaming)
        assert status == 401, f"{method} {path} with {label}: {status}, expected 401"

    response = client.request(method, _url(path), json=BODIES.get((method, path)))
    assert response.headers.get("www-authenticate") == "Bearer"
    assert "detail" in response.json()

    for token, roles in TOKEN_ROLES.items():
        name = TOKEN_NAMES[token]
        status = _call(client, method, path, bearer(token), streaming=streaming)
        if role == ANY_ROLE or role in roles:
            assert status not in (401, 403), f"{method} {path} ({role}) refused {name}: {status}"
            assert status < 500, f"{method} {path} as {name}: {status}"
        else:
            assert status == 403, f"{method} {path} ({role}) as {name}: {status}, expected 403"


def _events(engine: Engine) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(Event)).one())


def test_a_viewer_cannot_post_events_and_stores_nothing(client: TestClient, engine: Engine) -> None:
    events = f.as_json(f.full_run("r1"))

    response = client.post("/api/events", json=events, headers=bearer(VIEWER))

    assert response.status_code == 403, response.text
    assert "ingest" in response.json()["detail"]
    assert _events(engine) == 0
    # The same batch with the ingest token is stored: the 403 was the role, not the body.
    assert client.post("/api/events", json=events, headers=bearer(INGEST)).status_code == 200
    assert _events(engine) == 11
