"""``iam_permissions``: ``tables.testIamPermissions`` answers the caller's permissions.

BigQuery's ``tables.testIamPermissions`` (``POST .../tables/{table}:testIamPermissions``,
body ``{"permissions": [...]}``) "Returns permissions that a caller has on the specified
resource. If the resource does not exist, this will return an empty set of permissions,
not a NOT_FOUND error"; its answer, ``{"permissions": [...]}``, is "A subset of
``TestPermissionsRequest.permissions`` that the caller is allowed" (the method's and
``TestIamPermissionsResponse``'s reference). bqemulator has no such route (it answers 405,
the path being ``tables.get``'s), so ``onceover check`` could not be run against it. The
patch answers it with the permissions asked about that ``granted_permissions`` of
:mod:`onceover_tools.localbq.limits` holds (``"all"`` by default: bqemulator enforces no
IAM, so the caller holds everything), read on every call, so a test takes one away with
``limits.limited(...)``.

A table that does not exist answers the empty set, as documented, whatever the caller
holds on its dataset: so ``onceover check`` cannot learn beforehand whether a write may
create its table, and says so (a warning), here as on BigQuery.

Pinned by ``tests/localbq/test_iam_permissions_patch.py``.
"""

from __future__ import annotations

from typing import Any

from onceover.errors import LocalBigQueryVersionError
from onceover_tools.localbq import limits

PATH = "/projects/{project_id}/datasets/{dataset_id}/tables/{table_id}:testIamPermissions"
"""The method's path under bqemulator's tables router (prefix ``/bigquery/v2``)."""


def apply() -> None:
    """Add the method to bqemulator's tables router, before its app is made."""
    from bqemulator.api.routes import tables
    from fastapi import Request

    context = getattr(tables, "_Ctx", None)
    if context is None or not hasattr(tables, "router"):
        raise LocalBigQueryVersionError(
            "bqemulator's tables routes no longer have router and _Ctx; the iam_permissions "
            "patch needs to be re-checked against this release"
        )

    async def test_iam_permissions(
        project_id: str, dataset_id: str, table_id: str, request: Request, ctx: Any
    ) -> dict[str, Any]:
        body = await request.json()
        asked = body.get("permissions") if isinstance(body, dict) else None
        requested = [str(p) for p in asked] if isinstance(asked, list) else []
        held = limits.granted(limits.WRITE_API_LIMITS.snapshot(), requested)
        if ctx.catalog.get_table(project_id, dataset_id, table_id) is None:
            held = []  # "If the resource does not exist, ... an empty set of permissions"
        return {"permissions": held} if held else {}

    # FastAPI reads the parameters' annotations to inject them; this module's are strings
    # (postponed), which it cannot resolve, so the objects are given here.
    test_iam_permissions.__annotations__ = {
        "project_id": str, "dataset_id": str, "table_id": str,
        "request": Request, "ctx": context, "return": dict[str, Any],
    }  # fmt: skip
    tables.router.add_api_route(PATH, test_iam_permissions, methods=["POST"])
