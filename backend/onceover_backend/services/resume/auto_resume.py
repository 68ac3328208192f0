"""Automatic resume: a failed run whose job asked for it (``--auto-resume N``) is resumed
by the control plane, up to N attempts in all, waiting ``backoff * 2^(k-1)`` after the
k-th failure, and only once an operator has approved the run's spec (the policy is part
of the spec, which any ingest token could have sent: :mod:`onceover_backend.services.launch.specs`).

Safe with several backend replicas: each launch goes through :meth:`Resumer.resume`
with the idempotency key ``auto:<run>:<attempt number>``, and the database allows one
live launch per run, so a run is resumed once however many replicas see it due. Every
automatic resume is written to the audit log as actor ``onceover``, with the approval
it rests on.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from onceover_backend.errors import ControlPlaneError
from onceover_backend.services.access import audit
from onceover_backend.services.launch import specs
from onceover_backend.services.periodic import every
from onceover_backend.services.resume.resumer import Resumer, next_auto_resume
from onceover_backend.tables import Attempt, Run

logger = logging.getLogger(__name__)


def due_runs(engine: Engine, now: datetime) -> list[tuple[str, int]]:
    """(run id, next attempt number) of the failed runs whose policy says: resume now."""
    with Session(engine) as session:
        failed = list(
            session.exec(select(Run).where(Run.status == "failed", col(Run.spec).is_not(None)))
        )
        due: list[tuple[str, int]] = []
        for run in failed:
            if specs.approval(run) is None:
                continue  # shown on the run page: the plan says it waits for approval
            attempts = session.exec(
                select(func.count(), func.max(Attempt.number)).where(Attempt.run_id == run.run_id)
            ).one()
            when = next_auto_resume(run, int(attempts[0]), now)
            if when is not None and when <= now:
                due.append((run.run_id, int(attempts[1] or 0) + 1))
        return due


def resume_due(resumer: Resumer, now: datetime | None = None) -> list[str]:
    """Resume every run that is due; the ids of those launched."""
    launched: list[str] = []
    for run_id, number in due_runs(resumer.engine, now or datetime.now(UTC)):
        key = f"auto:{run_id}:{number}"
        try:
            answer = resumer.resume(
                run_id, actor=audit.SYSTEM_ACTOR, idempotency_key=key, trigger="auto"
            )
        except ControlPlaneError as exc:
            # Another replica got there first (409), or the checkpoint is unusable (422):
            # logged each round until the run is resumed by hand or its status changes.
            logger.warning("auto-resume of run %s refused: %s", run_id, exc.detail)
            continue
        launched.append(run_id)
        audit.record_automatic(
            resumer.engine,
            action="autoResumeRun",
            path=f"/api/runs/{run_id}/resume",
            target=f"run {run_id}",
            request_id=key,
            status_code=202,
            outcome=(
                f"ok: attempt {answer.attempt} launched on the approval of "
                f"{answer.approved_by} (spec {answer.plan.spec.digest}): "
                f"{answer.plan.model_dump_json()}"
            ),
        )
    return launched


async def auto_resume_forever(resumer: Resumer, interval_s: float, stop: asyncio.Event) -> None:
    """Look for due runs every ``interval_s`` until ``stop`` is set; errors are logged."""
    await every(interval_s, stop, lambda: resume_due(resumer), "the auto-resume round")
