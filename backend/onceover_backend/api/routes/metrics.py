"""``/api/metrics``: rates for the charts (role ``viewer``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from onceover_backend.api.deps import SessionDep, ViewerDep
from onceover_backend.models import Text, UTCTime, WriteErrorsPublic
from onceover_backend.services.reads import metrics

router = APIRouter(prefix="/metrics", tags=["metrics"])


@router.get("/write-errors", operation_id="getWriteErrors", response_model=WriteErrorsPublic)
def write_errors(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    run_id: Annotated[Text | None, Query(max_length=200)] = None,
    table: Annotated[Text | None, Query(max_length=1100)] = None,
    since: Annotated[
        UTCTime | None,
        Query(
            description="default: a run's first minute with appends; a table's: a day before until"
        ),
    ] = None,
    until: Annotated[
        UTCTime | None,
        Query(
            description="default: now; for a run with no since, the end of its last "
            "minute with appends"
        ),
    ] = None,
    step: Annotated[
        str | None,
        Query(
            max_length=20,
            description="60s, 5m, 1h ...; default: the smallest of 1m, 5m, "
            "15m, 1h, 6h and 1d that fits the range in 1,440 steps",
        ),
    ] = None,
) -> WriteErrorsPublic:
    """Append requests per step by response code (``OK``, ``ALREADY_EXISTS``,
    ``OUT_OF_RANGE``, other codes by name), with totals and each code's rate.

    ALREADY_EXISTS is deduplication at work (a retried append the server already had);
    OUT_OF_RANGE is a gap in the writer's offsets and should never be seen.
    """
    return metrics.write_errors(
        session,
        run_id=run_id,
        table=table,
        since=since,
        until=until,
        step_s=metrics.parse_step(step) if step is not None else None,
    )
