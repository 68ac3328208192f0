"""Reconciliation: run one (role ``operator``) and read the history (role ``viewer``).

``/api/runs/{run_id}/reconcile`` checks a run, ``/api/tables/{table}/reconcile`` a whole
table. A check BigQuery could not answer is still a 200 whose ``status`` is ``error``
(it is stored, with the reason); 404 means there was nothing to check against.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from onceover.identifiers import TABLE_ID_RE
from onceover_backend.api.deps import OperatorDep, ReconcilerDep, SessionDep, ViewerDep
from onceover_backend.models import (
    ErrorPublic,
    ReconciliationPublic,
    ReconciliationsPublic,
    TableReconcileRequest,
    Text,
)
from onceover_backend.services.reconciliation import reads

router = APIRouter(tags=["reconciliation"])

RunId = Annotated[Text, Path(max_length=200)]
TableId = Annotated[
    str,
    Path(
        max_length=1100,
        pattern=TABLE_ID_RE.pattern,
        description="project.dataset.table",
        examples=["my-project.billing.usage"],
    ),
]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "No such run, or no run wrote to the table"}
}


def _audit(request: Request, target: str, result: ReconciliationPublic) -> None:
    request.state.audit_target = target
    request.state.audit_outcome = f"ok: {reads.summary(result)}"


@router.post(
    "/runs/{run_id}/reconcile",
    operation_id="reconcileRun",
    response_model=ReconciliationPublic,
    responses=_NOT_FOUND,
)
async def reconcile_run(
    *,
    request: Request,
    reconciler: ReconcilerDep,
    principal: OperatorDep,
    run_id: RunId,
    table: Annotated[
        str | None,
        Query(
            max_length=1100,
            pattern=TABLE_ID_RE.pattern,
            description="one of the tables the run wrote (the run's `tables`); default: "
            "the run's own table",
        ),
    ] = None,
    against: Annotated[
        str | None,
        Query(
            max_length=1100,
            pattern=TABLE_ID_RE.pattern,
            description="a change data capture run: the source's state as a table (a "
            "snapshot, an export) to compare the table with, key by key",
        ),
    ] = None,
) -> ReconciliationPublic:
    """Check the run's committed rows in one table against BigQuery now; the result is
    stored. A run that wrote several tables is checked in each when it succeeds.

    Stamped runs are counted in place (their ``_onceover_run_id``) and per batch;
    otherwise the whole table stands for the run, and ``warnings`` says so.
    """
    result = await run_in_threadpool(
        reconciler.reconcile_run, run_id, table=table, trigger="api", actor=principal.name,
        against=against,
    )  # fmt: skip
    _audit(request, f"run {run_id}" + (f" in {table}" if table else ""), result)
    return result


@router.get(
    "/runs/{run_id}/reconciliations",
    operation_id="listRunReconciliations",
    response_model=ReconciliationsPublic,
    responses=_NOT_FOUND,
)
def list_run_reconciliations(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    run_id: RunId,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ReconciliationsPublic:
    """The run's checks, newest first, whether asked for or automatic."""
    return reads.list_reconciliations(session, run_id=run_id, limit=limit, offset=offset)


@router.post(
    "/tables/{table}/reconcile",
    operation_id="reconcileTable",
    response_model=ReconciliationPublic,
    responses=_NOT_FOUND,
)
async def reconcile_table(
    *,
    request: Request,
    reconciler: ReconcilerDep,
    principal: OperatorDep,
    table: TableId,
    body: Annotated[TableReconcileRequest | None, Body()] = None,
) -> ReconciliationPublic:
    """Check the whole table against every run recorded for it (per run when stamped).

    Inexact by nature when anything but onceover writes the table; ``warnings`` says so.
    """
    key = body.key if body is not None else None
    against = body.against if body is not None else None
    result = await run_in_threadpool(
        reconciler.reconcile_table, table, key, trigger="api", actor=principal.name,
        against=against,
    )  # fmt: skip
    _audit(request, f"table {table}", result)
    return result


@router.get(
    "/tables/{table}/reconciliations",
    operation_id="listTableReconciliations",
    response_model=ReconciliationsPublic,
)
def list_table_reconciliations(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    table: TableId,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ReconciliationsPublic:
    """The table's whole-table checks, newest first."""
    return reads.list_reconciliations(session, table=table, limit=limit, offset=offset)
