"""``/api/runs``: runs, their attempts, commit history, batch receipts and streams (role
``viewer``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from onceover_backend.api.deps import SessionDep, SettingsDep, ViewerDep
from onceover_backend.models import (
    BatchReceiptsPublic,
    ErrorPublic,
    RunDetailPublic,
    RunsPublic,
    RunStatus,
    Text,
    UTCTime,
)
from onceover_backend.services.reads import receipts, runs

router = APIRouter(prefix="/runs", tags=["runs"])


@router.get("", operation_id="listRuns", response_model=RunsPublic)
def list_runs(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    status: Annotated[list[RunStatus] | None, Query(description="any of these")] = None,
    job: Annotated[Text | None, Query(max_length=200)] = None,
    table: Annotated[
        Text | None, Query(max_length=1100, description="project.dataset.table")
    ] = None,
    since: Annotated[UTCTime | None, Query(description="started at or after")] = None,
    until: Annotated[UTCTime | None, Query(description="started before")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> RunsPublic:
    """Runs, newest first, with the total that match before paging."""
    return runs.list_runs(
        session,
        status=list(status) if status else None,
        job=job,
        table=table,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/{run_id}",
    operation_id="getRun",
    response_model=RunDetailPublic,
    responses={404: {"description": "No such run"}},
)
def get_run(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    settings: SettingsDep,
    run_id: Annotated[Text, Path(max_length=200)],
) -> RunDetailPublic:
    """One run: status and totals, every attempt, the batch commit history, the streams."""
    return runs.get_run(session, run_id, settings.launch_modules)


_NO_BATCH: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "No such run, or the run has no such batch"}
}


@router.get(
    "/{run_id}/batches/{batch}",
    operation_id="getRunBatch",
    response_model=BatchReceiptsPublic,
    responses=_NO_BATCH,
)
def get_run_batch(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    run_id: Annotated[Text, Path(max_length=200)],
    batch: Annotated[
        str,
        Path(
            pattern=r"^(write|[0-9]{1,10})$",
            description="a micro-batch number, or 'write' for a batch write",
            examples=["0", "write"],
        ),
    ],
) -> BatchReceiptsPublic:
    """One batch of the run with its receipts: a record per table, query and write,
    each with its commit time, streams, source offsets and key checksum."""
    return receipts.get_batch(session, run_id, batch)
