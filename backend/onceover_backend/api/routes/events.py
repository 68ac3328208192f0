"""``/api/events``: jobs post their events here (role ``ingest``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import anyio
from fastapi import APIRouter, BackgroundTasks, Body, Request, status
from fastapi.exceptions import RequestValidationError

from onceover.events import Event
from onceover_backend.api.deps import (
    AutomaticChecksDep,
    ChangeFeedDep,
    GroupCommitDep,
    IngestDep,
    SettingsDep,
)
from onceover_backend.api.event_body import EVENT_BODY, EventBody
from onceover_backend.api.middleware import AUDITED, audit_entry
from onceover_backend.api.parsed_body import ParsedBodyRoute
from onceover_backend.models import IngestResultPublic
from onceover_backend.services.ingest.group_commit import GroupCommit
from onceover_backend.services.ingest.transaction import EventBatch, Ingested, unstorable_values
from onceover_backend.tables import AuditLog

# The body guard has parsed and validated the batch already (api/event_body.py).
router = APIRouter(prefix="/events", tags=["events"], route_class=ParsedBodyRoute)


@router.post("", operation_id="ingestEvents", response_model=IngestResultPublic)
async def ingest(
    *,
    request: Request,
    events: Annotated[list[Event], Body(description="events of schema version 1")],
    _principal: IngestDep,
    group_commit: GroupCommitDep,
    settings: SettingsDep,
    feed: ChangeFeedDep,
    automatic_checks: AutomaticChecksDep,
    background: BackgroundTasks,
) -> IngestResultPublic:
    """Store a batch of events, all or none.

    A batch with any invalid event is refused whole with 422, each error naming the
    event by its index (``loc: ["body", index, type, field]``). Events already stored
    (same id) are counted as duplicates and change nothing, so a retry is always safe.
    """
    # At most settings.max_events_per_request: counted before validation (body_guard).
    batch: EventBody | None = getattr(request.state, EVENT_BODY, None)
    texts = batch.texts_of(events) if batch is not None else None
    ingested = await anyio.to_thread.run_sync(
        _store, group_commit, events, texts, _audit_row(request),
        limiter=request.app.state.ingest_limiter,
    )  # fmt: skip
    # Its audit row is committed with the events (one commit a batch, not two).
    setattr(request.state, AUDITED, True)
    result = ingested.result
    if ingested.succeeded and settings.reconcile_on_success:
        # After the answer: a job's last flush must not wait for BigQuery's counts. The
        # checks run on threads of their own, never this route's (see AutomaticChecks).
        background.add_task(
            automatic_checks.after_success, ingested.succeeded, request.state.request_id
        )
    if result.stored:
        feed.notify()
    return result


def _audit_row(request: Request) -> Callable[[IngestResultPublic], AuditLog]:
    """The call's audit row, made from what the transaction stored (it may be retried).
    Nothing goes into the request's state: a commit that fails after this leaves the
    middleware to audit the failure, not this outcome."""

    def row(result: IngestResultPublic) -> AuditLog:
        return audit_entry(
            request.scope,
            status.HTTP_200_OK,
            target="runs " + ",".join(result.run_ids) if result.run_ids else None,
            outcome=f"ok: stored {result.stored} of {result.received} events "
            f"({result.duplicates} duplicates)",
        )

    return row


def _store(
    group_commit: GroupCommit,
    events: list[Event],
    texts: list[str] | None,
    audit_row: Callable[[IngestResultPublic], AuditLog],
) -> Ingested:
    """Values the schema allows but the database cannot store (a 500 before): 422 as
    well. Checked here, on the thread pool, with the rest of the work per event."""
    if errors := unstorable_values(events):
        raise RequestValidationError(errors)
    return group_commit.ingest(EventBatch(events, texts, audit_row))
