"""``/api/overview``: the dashboard's home in one answer (role ``viewer``)."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter

from onceover_backend.api.deps import SessionDep, SettingsDep, ViewerDep
from onceover_backend.models import OverviewPublic
from onceover_backend.services.reads import overview

router = APIRouter(prefix="/overview", tags=["overview"])


@router.get("", operation_id="getOverview", response_model=OverviewPublic)
def get_overview(
    *, session: SessionDep, settings: SettingsDep, _principal: ViewerDep
) -> OverviewPublic:
    """What needs a look now (failed and stalled runs, firing alerts) and every table at
    a glance: last commit and freshness, rows committed today (UTC), ALREADY_EXISTS and
    OUT_OF_RANGE per hour over the last 24 hours, rows set aside, newest reconciliation.

    A table is stale when its last commit is older than ``stale_after_s``
    (``ONCEOVER_STALE_AFTER_S``, default one day).
    """
    return overview.overview(session, stale_after=timedelta(seconds=settings.stale_after_s))
