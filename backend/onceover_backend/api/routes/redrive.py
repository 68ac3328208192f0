"""Re-drive a run's set-aside rows (role ``operator``).

``POST /api/runs/{run_id}/redrive?dry_run=true`` answers with the plan and launches
nothing; with ``approve_plan`` set to that plan's digest it launches the re-drive job
and answers 202 (:mod:`onceover_backend.services.redrive.redriver`). Every call, refused
or not, is in the audit log with who asked.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from onceover_backend.api.deps import OperatorDep, RedriverDep
from onceover_backend.models import ErrorPublic, RedriveAcceptedPublic, RedrivePlanPublic, Text

router = APIRouter(tags=["redrive"])

_MEANING = {
    404: "No such run",
    409: "Nothing to re-drive (no rows set aside, or all re-driven), a re-drive of the run "
    "is live, or approve_plan is missing or names another plan",
    422: "The control plane cannot re-drive this run: no ledger it can name (no spec, no "
    "checkpoint or ledger in it), a re-drive's own run, or its dead-letter table(s)",
    503: "This backend cannot launch jobs (the detail names the missing setting)",
}


@router.post(
    "/runs/{run_id}/redrive",
    operation_id="redriveRun",
    status_code=202,
    response_model=RedriveAcceptedPublic | RedrivePlanPublic,
    responses={
        200: {"model": RedrivePlanPublic, "description": "dry_run=true: the plan"},
        202: {"model": RedriveAcceptedPublic, "description": "The re-drive job is started"},
        **{code: {"model": ErrorPublic, "description": text} for code, text in _MEANING.items()},
    },
)
async def redrive_run(
    *,
    request: Request,
    response: Response,
    redriver: RedriverDep,
    principal: OperatorDep,
    run_id: Annotated[Text, Path(max_length=200)],
    dry_run: Annotated[bool, Query(description="only show what would run")] = False,
    approve_plan: Annotated[
        str | None,
        Query(pattern=r"^[0-9a-f]{64}$", description="the plan's digest: launches that plan"),
    ] = None,
) -> RedriveAcceptedPublic | RedrivePlanPublic:
    """Send the run's set-aside rows (and those its re-drives set aside again) to their
    table again, once: a re-drive is its own exactly-once write, run ``<run>:redrive-<n>``,
    so launching it twice sends no row twice; rows BigQuery still refuses stay set aside
    under that run id with the new reason."""
    request.state.audit_target = f"run {run_id}"
    if dry_run:
        plan = await run_in_threadpool(redriver.plan, run_id)
        response.status_code = 200
        request.state.audit_outcome = f"ok: dry run: {_compact(plan)}"
        return plan
    accepted = await run_in_threadpool(
        redriver.redrive, run_id, actor=principal.name, approve_plan=approve_plan
    )
    request.state.audit_outcome = (
        f"ok: re-drive launch {accepted.launch} started (pid {accepted.pid}) on the "
        f"confirmed plan {accepted.plan.digest}: {_compact(accepted.plan)}"
    )
    return accepted


def _compact(plan: RedrivePlanPublic) -> str:
    body: Any = plan.model_dump(mode="json")
    return json.dumps(body, separators=(",", ":"), sort_keys=True)
