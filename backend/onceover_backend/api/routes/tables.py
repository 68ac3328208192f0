"""``/api/tables``: per-table totals over every run (role ``viewer``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from onceover_backend.api.deps import SessionDep, SettingsDep, ViewerDep
from onceover_backend.models import TablesPublic, Text
from onceover_backend.services.reads import table_totals

router = APIRouter(prefix="/tables", tags=["tables"])


@router.get("", operation_id="listTables", response_model=TablesPublic)
def list_tables(
    *,
    session: SessionDep,
    settings: SettingsDep,
    _principal: ViewerDep,
    table: Annotated[
        Text | None, Query(max_length=1100, description="only this project.dataset.table")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TablesPublic:
    """Tables runs have loaded, most recent first: runs, rows and retry codes over every
    run, and ``figures``, the overview's row of the table (freshness, rows today, the 24
    hours' retry codes, the newest check of any scope)."""
    return table_totals.list_tables(
        session,
        stale_after=timedelta(seconds=settings.stale_after_s),
        table=table,
        limit=limit,
        offset=offset,
    )
