"""``/api/changes``: Server-Sent Events announcing changed runs (role ``viewer``).

A page opens one stream and re-reads a run when it is announced, instead of polling.
The first event, ``ready``, says the stream is live; then one ``runs`` event per
change with the runs' new status and totals. ``id`` is a cursor: a client that
reconnects with ``Last-Event-ID`` misses nothing that changed meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from onceover_backend.api.deps import ChangeFeedDep, EngineDep, SettingsDep, ViewerDep
from onceover_backend.models import RunChangePublic, RunChangesPublic, Text
from onceover_backend.services.ingest.changes import COMMIT_SKEW, ChangeCursor

router = APIRouter(prefix="/changes", tags=["changes"])


def _cursor_from(last_event_id: str | None) -> datetime:
    if last_event_id:
        try:
            parsed = datetime.fromisoformat(last_event_id)
        except ValueError:
            pass
        else:
            # Near year 1 or 9999 the cursor's look back (or UTC itself) overflowed inside
            # the stream; such an id is as unusable as one that does not parse.
            if parsed.tzinfo is not None and _usable(parsed):
                return parsed
    return datetime.now(UTC)


def _usable(cursor: datetime) -> bool:
    try:
        cursor.astimezone(UTC) - COMMIT_SKEW
    except OverflowError:
        return False
    return True


@router.get("", operation_id="streamChanges", response_class=EventSourceResponse)
async def stream_changes(
    *,
    request: Request,
    _principal: ViewerDep,
    engine: EngineDep,
    settings: SettingsDep,
    feed: ChangeFeedDep,
    run_id: Annotated[Text | None, Query(max_length=200, description="only this run")] = None,
    last_event_id: Annotated[str | None, Header(max_length=100)] = None,
) -> AsyncIterator[ServerSentEvent]:
    """``text/event-stream``: ``ready`` once, then ``runs`` whenever runs change."""
    cursor = ChangeCursor(since=_cursor_from(last_event_id))
    yield ServerSentEvent(event="ready", id=cursor.since.isoformat(), data={"run_id": run_id})
    while not await request.is_disconnected():
        changed = await run_in_threadpool(cursor.changed_runs, engine, run_id)
        if changed:
            body = RunChangesPublic(
                runs=[
                    RunChangePublic(
                        run_id=c.run_id,
                        status=c.status,
                        rows_committed=c.rows_committed,
                        updated_at=c.updated_at,
                    )
                    for c in changed
                ]
            )
            yield ServerSentEvent(event="runs", id=cursor.since.isoformat(), data=body)
        # Woken at once by an ingest on this replica; others are seen on the next look.
        await feed.wait(settings.change_poll_s)
