"""The dashboard's API types are generated from the backend's OpenAPI schema; they must agree."""

from __future__ import annotations

import json

from onceover_backend.openapi import openapi_schema

from tests.conftest import REPO_ROOT


def test_the_committed_schema_matches_the_backend() -> None:
    committed = json.loads((REPO_ROOT / "frontend" / "openapi.json").read_text())

    assert committed == openapi_schema(), (
        "frontend/openapi.json is stale: run scripts/generate-client.sh and commit the result"
    )
