"""Reading runs: the filtered list and one run with its attempts, batches and streams."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, func, select

from onceover_backend.errors import NotFoundError
from onceover_backend.models import (
    AttemptPublic,
    LaunchPublic,
    RunDetailPublic,
    RunPublic,
    RunsPublic,
    StreamPublic,
)
from onceover_backend.services.launch import specs
from onceover_backend.services.launch.redaction import redacted_spec
from onceover_backend.services.paging import page
from onceover_backend.services.reads.batch_view import batch_public
from onceover_backend.services.reads.list_extras import latest_verdicts
from onceover_backend.services.reads.redrives import redrives_of
from onceover_backend.services.reads.run_cause import causes_of
from onceover_backend.tables import Attempt, Batch, Launch, Run, Stream, WriteRollup


def _run_fields(run: Run) -> dict[str, Any]:
    fields = run.model_dump()
    fields["table"] = fields.pop("table_id")
    fields["already_exists"] = fields.pop("already_exists_requests")
    fields["out_of_range"] = fields.pop("out_of_range_requests")
    fields["throttled"] = fields.pop("throttled_requests")
    return fields


def _summaries(session: Session, runs: list[Run]) -> list[dict[str, Any]]:
    """Each run's own fields (its retry-code counts among them) and latest verdict."""
    verdicts = latest_verdicts(session, "run", [run.run_id for run in runs])
    return [{**_run_fields(run), "reconciliation": verdicts.get(run.run_id)} for run in runs]


def list_runs(
    session: Session,
    *,
    status: list[str] | None = None,
    job: str | None = None,
    table: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> RunsPublic:
    """Newest first. ``since``/``until`` bound the start time (``until`` exclusive)."""
    query = select(Run)
    if status:
        query = query.where(col(Run.status).in_(status))
    if job is not None:
        query = query.where(Run.job == job)
    if table is not None:
        query = query.where(Run.table_id == table)
    if since is not None:
        query = query.where(col(Run.started_at) >= since)
    if until is not None:
        query = query.where(col(Run.started_at) < until)
    runs, count = page(
        session, query, [col(Run.started_at).desc(), col(Run.run_id)], limit=limit, offset=offset
    )
    return RunsPublic(
        data=[RunPublic.model_validate(fields) for fields in _summaries(session, list(runs))],
        count=count,
    )


def tables_of_run(session: Session, run: Run) -> list[str]:
    """The tables the run wrote: its own first, then the others its batches name."""
    named = session.exec(select(Batch.table_id).where(Batch.run_id == run.run_id).distinct())
    return [run.table_id, *sorted(set(named) - {run.table_id})]


def why_not_resumable(run: Run, launch_modules: Sequence[str]) -> str | None:
    """Why this control plane cannot launch ``run`` again, whatever its status; None if it
    can. Only a job that reported how it was started (its spec) can be started again."""
    if run.spec is None:
        return (
            "this run reported no launch spec: it was written by a script of its own (the "
            "sink reports its runs, not how to start them), so only its owner can run it "
            "again; the sink's ledger makes a re-run with the same run id (or checkpoint) "
            "write nothing twice"
        )
    module = str(run.spec.get("module", ""))
    if not any(module.startswith(prefix) for prefix in launch_modules):
        return (
            f"its job module {module!r} is not one this control plane launches "
            f"(ONCEOVER_LAUNCH_MODULES: {', '.join(launch_modules)})"
        )
    return None


def get_run(session: Session, run_id: str, launch_modules: Sequence[str] = ()) -> RunDetailPublic:
    run = session.get(Run, run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r}")
    attempts = session.exec(
        select(Attempt).where(Attempt.run_id == run_id).order_by(col(Attempt.number))
    )
    launches = {
        launch.attempt_id: LaunchPublic.model_validate(launch.model_dump())
        for launch in session.exec(select(Launch).where(Launch.run_id == run_id))
    }
    batches = session.exec(
        select(Batch)
        .where(Batch.run_id == run_id)
        .order_by(col(Batch.table_id), col(Batch.query_id), col(Batch.batch_id), col(Batch.id))
    )
    streams = session.exec(
        select(Stream)
        .where(Stream.run_id == run_id)
        .order_by(col(Stream.created_at), col(Stream.name))
    )
    requests = session.exec(
        select(WriteRollup.code, func.sum(WriteRollup.requests))
        .where(WriteRollup.run_id == run_id)
        .group_by(WriteRollup.code)
    )
    summary = _summaries(session, [run])[0]
    spec_state = specs.state(run)
    return RunDetailPublic(
        **{**summary, "spec": spec_state.spec},
        spec_state=spec_state,
        resume_unavailable=why_not_resumable(run, launch_modules),
        attempts=[
            AttemptPublic.model_validate(
                {
                    **a.model_dump(),
                    "spec": None if a.spec is None else redacted_spec(a.spec),
                    "launch": launches.get(a.attempt_id),
                }
            )
            for a in attempts
        ],
        batches=[batch_public(b) for b in batches],
        tables=tables_of_run(session, run),
        streams=[
            StreamPublic.model_validate({**s.model_dump(), "table": s.table_id}) for s in streams
        ],
        write_requests={code: int(n) for code, n in requests},
        cause=causes_of(session, [run]).get(run.run_id),
        redrives=redrives_of(session, run),
    )
