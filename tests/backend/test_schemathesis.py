"""Schemathesis against the app's own OpenAPI schema: no generated request gets a 5xx.

Every operation but two is a test of its own, on both databases (the ``app`` fixture is
parametrized, each test its own migrated database). Left out: ``/api/changes`` (an
event stream that never ends) and ``/api/health`` (it would contact BigQuery, which
these tests do not start).

Besides "no 5xx", the responses are checked against the schema (status codes, content
types, bodies) and auth is checked to be enforced, except for two checks whose idea of
valid input is stricter or looser than the API's on purpose (see ``EXCLUDED_CHECKS``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from onceover_backend.openapi import openapi_schema
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    status_code_conformance,
)
from starlette.types import Receive, Scope, Send

from tests.backend.conftest import INGEST, OPERATOR, bearer

EXCLUDED_PATHS = ["/api/changes", "/api/health"]
# negative_data_rejection: pydantic reads a number as a date-time (a Unix time), which the
# schema's "format: date-time" does not allow. positive_data_acceptance: some requests
# the schema allows are refused on purpose (write-errors needs run_id or table, and a
# range of at most 10 000 steps; an unknown run is 404).
EXCLUDED_CHECKS: list[schemathesis.CheckFunction] = [
    negative_data_rejection,
    positive_data_acceptance,
]

CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"max-examples": 25, "database": "none"},
        "operations": [
            {
                # Its coverage phase is ~2 000 cases (15 event shapes, every boundary of
                # every field): most of a minute. Fuzzing covers it here instead.
                "include-operation-id": "ingestEvents",
                "phases": {"coverage": {"enabled": False}},
                "generation": {"max-examples": 60},
            }
        ],
    }
)


class CurrentApp:
    """The app under test, as an ASGI app the schema can be built with at import time
    (one test per operation) while each test brings its own app and database.

    (``schemathesis.pytest.from_fixture`` would load the schema from a fixture instead,
    but schemathesis 4.32.5's lazy schema sets ``request.node._nodeid``, which pytest 9.2
    no longer has: every such test fails with AttributeError.)

    The app's lifespan is the ``client`` fixture's, so it is not run here again."""

    app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return  # declines the lifespan protocol
        assert self.app is not None, "only the served fixture's tests call the app"
        await self.app(scope, receive, send)


CURRENT = CurrentApp()
_loaded = schemathesis.openapi.from_dict(openapi_schema(), config=CONFIG)
_loaded.app = CURRENT
schema = _loaded.exclude(path=EXCLUDED_PATHS)


@pytest.fixture
def served(app: FastAPI, client: TestClient) -> Iterator[FastAPI]:
    """The test's app, running (``client`` runs its lifespan), reachable as ``CURRENT``."""
    CURRENT.app = app
    yield app
    CURRENT.app = None


def _token(case: schemathesis.Case[Any]) -> str:
    return INGEST if (case.method, case.path) == ("POST", "/api/events") else OPERATOR


@schema.parametrize()
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_server_errors(case: schemathesis.Case[Any], served: FastAPI) -> None:
    headers = bearer(_token(case))

    response = case.call(headers=headers)

    assert response.status_code < 500, (response.status_code, response.text)
    if "authorization" not in {name.lower() for name in response.request.headers}:
        # The coverage phase leaves the (security) header out on purpose: always 401,
        # with the challenge header.
        assert response.status_code == 401, (response.status_code, response.text)
        assert response.headers.get("www-authenticate") == ["Bearer"]
        return
    excluded = list(EXCLUDED_CHECKS)
    if response.status_code == 400 and case.method in ("POST", "PUT", "PATCH"):
        # FastAPI answers a body that is not UTF-8 with 400 "There was an error parsing
        # the body" (not JSON at all is 422); the schema documents only 422.
        excluded.append(status_code_conformance)
    case.validate_response(response, headers=headers, excluded_checks=excluded)


# -- values JSON cannot carry -------------------------------------------------------------

HOSTILE_JSON = ("NaN", "Infinity", "-Infinity", "1e999", '"\\ud800"', '"a\\udfffb"')
"""Literals Python's json reads (or a surrogate it decodes alone) that no JSON value is."""
_SLOT = "\x00hostile\x00"
NOT_UTF8 = "%ED%A0%80"  # a lone surrogate, percent-encoded as CESU-8 bytes


def _first_leaf_replaced(value: Any) -> Any:
    """``value`` with its first scalar (depth first) replaced by :data:`_SLOT`."""
    if isinstance(value, dict):
        if not value:
            return {"x": _SLOT}
        key = next(iter(value))
        return {**value, key: _first_leaf_replaced(value[key])}
    if isinstance(value, list):
        return [_first_leaf_replaced(value[0]), *value[1:]] if value else [_SLOT]
    return _SLOT


def hostile_bodies(body: Any) -> list[bytes]:
    """The JSON text of ``body`` with one value replaced by each hostile literal."""
    text = json.dumps(_first_leaf_replaced(body))
    slot = json.dumps(_SLOT)
    return [text.replace(slot, literal, 1).encode() for literal in HOSTILE_JSON]


def _path(case: schemathesis.Case[Any], hostile: str | None = None) -> str:
    """The case's path with its parameters percent-encoded, ``hostile``'s not UTF-8."""
    path = case.path
    for name, value in (case.path_parameters or {}).items():
        path = path.replace(
            "{" + name + "}", NOT_UTF8 if name == hostile else quote(str(value), safe="")
        )
    return path


def _query(case: schemathesis.Case[Any], hostile: str) -> str:
    """The case's query string, percent-encoded, ``hostile``'s value not UTF-8."""
    return "&".join(
        f"{_quoted(name)}={NOT_UTF8 if name == hostile else _quoted(value)}"
        for name, value in (case.query or {}).items()
    )


def _quoted(value: Any) -> str:
    return quote(str(value), safe="")


@schema.parametrize()
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_values_json_cannot_carry_are_a_4xx_anywhere(
    case: schemathesis.Case[Any], served: FastAPI, client: TestClient
) -> None:
    """NaN, ±Infinity, a number no double holds, lone surrogates: in the body of every
    operation that takes one (a 4xx), and percent-encoded in every query and path
    parameter (no 5xx)."""
    headers = {**bearer(_token(case)), "Content-Type": "application/json"}
    sent: list[tuple[str, Any]] = []
    if case.method in ("POST", "PUT", "PATCH"):
        body = case.body if isinstance(case.body, dict | list) else {}
        for raw in hostile_bodies(body):
            answer = client.request(case.method, _path(case), content=raw, headers=headers)
            sent.append((raw.decode()[:80], answer))
    for name in case.query or {}:
        answer = client.request(case.method, f"{_path(case)}?{_query(case, name)}", headers=headers)
        sent.append((f"query {name}", answer))
    for name in case.path_parameters or {}:
        answer = client.request(case.method, _path(case, hostile=name), headers=headers)
        sent.append((f"path {name}", answer))

    for what, answer in sent:
        # A body is not JSON: a 4xx. A parameter is text (read with U+FFFD for the bytes
        # that are not UTF-8): anything but a server error, and a JSON answer.
        low = 200 if what.startswith(("query", "path")) else 400
        assert low <= answer.status_code < 500, (what, answer.status_code, answer.text[:300])
        json.loads(answer.text)
