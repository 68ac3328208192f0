"""Resume a failed or stalled run (role ``operator``) and read its attempts' logs (``viewer``).

``POST /api/runs/{run_id}/resume?dry_run=true`` answers with the plan and launches
nothing; without ``dry_run`` it launches the next attempt and answers 202. Either way
the audit log keeps who asked and the plan. ``POST /api/runs/{run_id}/spec`` approves or
rejects the spec a launch would use (:mod:`onceover_backend.services.launch.specs`).
``GET /api/runs/{run_id}/intents`` asks the plan's question about the checkpoint's
unconfirmed batches for any reader (``viewer``): the run page shows the answer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from onceover_backend.api.deps import EngineDep, OperatorDep, ResumerDep, ViewerDep
from onceover_backend.models import (
    AttemptLogPublic,
    ErrorPublic,
    ResumeAcceptedPublic,
    ResumePlanPublic,
    RunIntentsPublic,
    RunSpecPublic,
    SpecDecisionCreate,
    Text,
)
from onceover_backend.services.launch import specs
from onceover_backend.services.resume.resumer import MAX_LOG_LINES

router = APIRouter(tags=["resume"])

RunId = Annotated[Text, Path(max_length=200)]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {
        404: "No such run (or no such launched attempt, or its log is not on this host)",
        409: "Not resumable now: the run is not failed or stalled, an attempt is live, or "
        "no operator approved its spec (or approve_spec names another)",
        422: "The run's stored spec or checkpoint cannot be used (the detail names it)",
        503: "This backend cannot launch jobs (the detail names the missing setting)",
    }
    return {code: {"model": ErrorPublic, "description": meaning[code]} for code in codes}


@router.post(
    "/runs/{run_id}/resume",
    operation_id="resumeRun",
    status_code=202,
    response_model=ResumeAcceptedPublic | ResumePlanPublic,
    responses={
        200: {"model": ResumePlanPublic, "description": "dry_run=true: the plan"},
        202: {"model": ResumeAcceptedPublic, "description": "The attempt is launched"},
        **_errors(404, 409, 422, 503),
    },
)
async def resume_run(
    *,
    request: Request,
    response: Response,
    resumer: ResumerDep,
    principal: OperatorDep,
    run_id: RunId,
    dry_run: Annotated[bool, Query(description="only show what would run")] = False,
    approve_spec: Annotated[
        str | None,
        Query(
            pattern=r"^[0-9a-f]{64}$",
            description="the plan's spec.digest: approves that spec and launches it (needed "
            "when no operator has approved it yet)",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            pattern=r"^[\x21-\x7e]+$",
            description="the same key again answers with the first answer and launches nothing",
        ),
    ] = None,
) -> ResumeAcceptedPublic | ResumePlanPublic:
    """Launch the run's job again on its checkpoint (``failed`` or ``stalled`` runs only).

    The run goes ``resuming``, then ``running`` when the job reports, then ``succeeded``
    or ``failed``; a run that succeeds is reconciled automatically. The spec it launches
    must be approved: before, or by this call (``approve_spec``).
    """
    request.state.audit_target = f"run {run_id}"
    if dry_run:
        plan = await run_in_threadpool(resumer.plan, run_id)
        response.status_code = 200
        request.state.audit_outcome = f"ok: dry run: {_compact(plan.model_dump(mode='json'))}"
        return plan
    accepted = await run_in_threadpool(
        resumer.resume,
        run_id,
        actor=principal.name,
        idempotency_key=idempotency_key,
        approve_spec=approve_spec,
    )
    request.state.audit_outcome = (
        f"ok: attempt {accepted.attempt} launched on the approval of {accepted.approved_by} "
        f"(spec {accepted.plan.spec.digest}): {_compact(accepted.plan.model_dump(mode='json'))}"
    )
    return accepted


@router.get(
    "/runs/{run_id}/intents",
    operation_id="getRunIntents",
    response_model=RunIntentsPublic,
    responses=_errors(404),
)
async def run_intents(
    *, resumer: ResumerDep, _principal: ViewerDep, run_id: RunId
) -> RunIntentsPublic:
    """The batches the run's checkpoint holds as intended but not confirmed, each with
    what BigQuery holds of it (a batch committed in BigQuery, not in the checkpoint,
    comes with BigQuery's commit time) and what a resume would do with it."""
    return await run_in_threadpool(resumer.pending, run_id)


@router.post(
    "/runs/{run_id}/spec",
    operation_id="decideRunSpec",
    response_model=RunSpecPublic,
    responses={
        404: {"model": ErrorPublic, "description": "No such run"},
        409: {"model": ErrorPublic, "description": "The run has no spec of this digest (now)"},
    },
)
def decide_run_spec(
    *,
    request: Request,
    engine: EngineDep,
    principal: OperatorDep,
    run_id: RunId,
    body: SpecDecisionCreate,
) -> RunSpecPublic:
    """Approve the run's spec (or the different one a later attempt proposed), or reject
    it: only an approved spec is launched by a resume, or by auto-resume."""
    request.state.audit_target = f"run {run_id}"
    answer = specs.decide(engine, run_id, body.digest, body.decision, principal.name)
    done = "approved" if body.decision == "approve" else "rejected"
    request.state.audit_outcome = f"ok: {done} spec {body.digest}"
    return answer


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@router.get(
    "/runs/{run_id}/attempts/{number}/log",
    operation_id="getAttemptLog",
    response_model=AttemptLogPublic,
    responses=_errors(404),
)
def attempt_log(
    *,
    resumer: ResumerDep,
    _principal: ViewerDep,
    run_id: RunId,
    number: Annotated[int, Path(ge=1, le=1_000_000, description="the attempt's number")],
    tail: Annotated[int, Query(ge=0, le=MAX_LOG_LINES, description="lines from the end")] = 200,
) -> AttemptLogPublic:
    """The end of the output of an attempt the control plane launched."""
    return resumer.log(run_id, number, tail)
