"""Storing a batch of events: all or nothing, once per event id, state updated alongside."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session

from onceover import events as ev
from onceover_backend.core.db import write_transaction
from onceover_backend.models import IngestResultPublic
from onceover_backend.services.access import audit
from onceover_backend.services.ingest.event_store import store_new
from onceover_backend.services.ingest.projection import Projector
from onceover_backend.services.ingest.times import in_utc
from onceover_backend.tables import AuditLog, utcnow

logger = logging.getLogger(__name__)

MAX_TRANSACTION_TRIES = 6

# Values the event schema allows but the database cannot store; each was a 500 (found by
# tests/backend/test_schemathesis.py). Integers: bounded below (ge=0) only; SQLite
# overflows past 2**63 and PostgreSQL past its column's size. Batch ids, partitions and
# task attempts are 32-bit INTEGER columns; every other integer is a count kept in BIGINT
# columns and added up there, so it is held to what JSON readers (the dashboard)
# represent exactly, which leaves sums of many events room below 2**63. A batch's key
# checksum is no count: never added up, it is kept whole in its BIGINT column (a sum of
# 32-bit terms, past 2**53 from about four million rows on, onceover/key_checksum.py).
# Strings: PostgreSQL text cannot hold NUL. Times: stored in UTC, which
# 0001-01-01T00:00+01:00 (and the like at year 9999) is not.
INT32_MAX = 2**31 - 1
COUNT_MAX = 2**53 - 1
INT64_MAX = 2**63 - 1
_LIMITS = {"batch_id": INT32_MAX, "partition": INT32_MAX, "attempt": INT32_MAX,
           "key_checksum": INT64_MAX}  # fmt: skip
"""The largest value of each integer field not a count (a count: COUNT_MAX)."""


def unstorable_values(events: list[ev.Event]) -> list[dict[str, Any]]:
    """Validation errors (FastAPI's shape, ``loc: ["body", index, type, field...]``) for
    values the database cannot store; empty when every event can be stored."""
    errors: list[dict[str, Any]] = []

    def error(loc: list[str | int], value: object, kind: str, msg: str) -> None:
        errors.append({"type": kind, "loc": loc, "msg": msg, "input": value})

    def walk(value: object, loc: list[str | int], name: str | int) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, [*loc, key], key)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, [*loc, index], name)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int):
            limit = _LIMITS.get(str(name), COUNT_MAX)
            if value > limit:
                error(
                    loc, value, "less_than_equal", f"Input should be less than or equal to {limit}"
                )
        elif isinstance(value, str):
            if "\x00" in value:
                error(loc, value, "value_error", "must not contain NUL (0x00)")
        elif isinstance(value, datetime):
            try:
                value.astimezone(UTC)
            except OverflowError:
                error(loc, value.isoformat(), "value_error", "out of range once converted to UTC")

    for index, event in enumerate(events):
        if _may_be_unstorable(event):
            walk(event.model_dump(), ["body", index, event.type], index)
    return errors


def _may_be_unstorable(event: ev.Event) -> bool:
    """Whether ``event`` holds anything :func:`unstorable_values` could refuse: an int
    past INT32_MAX (the lowest limit), a string with NUL, a time at year 1 or 9999.

    A quick pass over the models themselves, without ``model_dump`` or error locations,
    and only the rare event it flags is walked. One loop over a stack, no recursion or
    generator a value: cheaper an event than a recursive pass (docs/journal/profiling.md, "The
    garbage collector").
    """
    stack: list[object] = list(event.__dict__.values())
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            if "\x00" in value:  # type: ignore[operator]
                return True
        elif kind is int:
            if value > INT32_MAX:  # type: ignore[operator]
                return True
        elif value is None or kind is float or kind is bool:
            continue
        elif kind is list or kind is tuple:
            stack.extend(value)  # type: ignore[arg-type]
        elif kind is dict:
            stack.extend(value.values())  # type: ignore[attr-defined]
        elif isinstance(value, BaseModel):
            stack.extend(value.__dict__.values())
        elif isinstance(value, datetime):
            if value.year in (1, 9999):
                return True
        else:
            # Anything not listed here (never seen in an event so far): the full walk.
            return True
    return False


@dataclass(frozen=True)
class Ingested:
    result: IngestResultPublic
    succeeded: list[str]
    """Runs these events made complete (succeeded, every reported row heard of): each
    is reconciled once they are stored."""


@dataclass(frozen=True)
class EventBatch:
    """One POST's events, stored all or none.

    ``bodies``, when given, are the events' JSON text as received, stored as they are;
    else each event is serialized. ``audit_row``, when given, makes the batch's audit
    row from its result, stored in the same transaction."""

    events: Sequence[ev.Event]
    bodies: Sequence[str] | None = None
    audit_row: Callable[[IngestResultPublic], AuditLog] | None = None


def ingest_events(
    engine: Engine,
    events: Sequence[ev.Event],
    bodies: Sequence[str] | None = None,
    *,
    audit_row: Callable[[IngestResultPublic], AuditLog] | None = None,
) -> Ingested:
    """Store the new events of ``events`` and apply them, in one transaction."""
    return ingest_batches(engine, [EventBatch(events, bodies, audit_row)])[0]


def ingest_batches(engine: Engine, batches: Sequence[EventBatch]) -> list[Ingested]:
    """Store and apply ``batches`` in one transaction, in order, as if each had its own
    one after the other: an event stored once, by the first batch that holds it (a
    later batch counts it a duplicate). Each batch's result is its own.

    Retried whole when concurrent ingests collide (two first events of one run both
    inserting it, a PostgreSQL deadlock, SQLite busy past its timeout): the retry sees
    the winner's rows and stores only what is still new.
    """
    for attempt in range(1, MAX_TRANSACTION_TRIES + 1):
        try:
            with write_transaction(engine) as session:
                ingested = _ingest(session, batches)
                audit.insert_rows(session, [
                    batch.audit_row(outcome.result)
                    for batch, outcome in zip(batches, ingested, strict=True)
                    if batch.audit_row is not None
                ])  # fmt: skip
                return ingested
        except (IntegrityError, OperationalError) as exc:
            if attempt == MAX_TRANSACTION_TRIES:
                raise
            logger.info("ingest collided (%s); retrying, try %d", type(exc).__name__, attempt + 1)
            time.sleep(random.uniform(0.005, 0.05) * attempt)  # noqa: S311 - jitter, not crypto
    raise AssertionError("unreachable")


def _ingest(session: Session, batches: Sequence[EventBatch]) -> list[Ingested]:
    first: dict[str, tuple[int, int]] = {}  # each id's first place: (batch, index)
    for number, batch in enumerate(batches):
        for index, event in enumerate(batch.events):
            first.setdefault(event.id, (number, index))
    places = list(first.values())
    unique = [batches[number].events[index] for number, index in places]
    projector = Projector(session, received_at=utcnow())
    projector.lock_runs(event.run_id for event in unique)
    times = [in_utc(event.time) for event in unique]
    texts = [_text(batches[number], index) for number, index in places]
    stored = store_new(session, unique, times, texts, projector.received_at)
    new = [unique[index] for index in stored]
    if new:
        projector.load_streams(new)
        projector.apply(new, [times[index] for index in stored])
        projector.finish()
    new_by_batch: list[list[ev.Event]] = [[] for _ in batches]
    last_batch_of_run: dict[str, int] = {}
    for index in stored:
        number = places[index][0]
        new_by_batch[number].append(unique[index])
        last_batch_of_run[unique[index].run_id] = number
    # A run made complete is reconciled once: by the last batch with news of it.
    succeeded: list[list[str]] = [[] for _ in batches]
    for run_id in sorted(projector.succeeded):
        succeeded[last_batch_of_run.get(run_id, len(batches) - 1)].append(run_id)
    return [
        Ingested(
            IngestResultPublic(
                received=len(batch.events),
                stored=len(fresh),
                duplicates=len(batch.events) - len(fresh),
                run_ids=sorted({event.run_id for event in fresh}),
            ),
            runs,
        )
        for batch, fresh, runs in zip(batches, new_by_batch, succeeded, strict=True)
    ]


def _text(batch: EventBatch, index: int) -> str:
    if batch.bodies is not None:
        return batch.bodies[index]
    return batch.events[index].model_dump_json()
