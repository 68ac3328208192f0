"""``POST /api/events``: the batch validated once, with each event's JSON text.

The body guard calls :func:`parse` on the parsed document, in its worker thread. When
every event is valid, the request's state gets the validated events (what FastAPI then
finds as the body, :mod:`onceover_backend.api.parsed_body`) and each event's JSON as
sent (:data:`EVENT_BODY`), which ingest stores as it is instead of serializing the
model again. A batch with any invalid event is left to FastAPI, which validates it
again and answers 422 naming each bad event (``loc: ["body", index, type, field]``):
the answer is the one it always gave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from pydantic import ValidationError

from onceover import events as ev

EVENT_BODY = "event_body"
"""State key of the :class:`EventBody` of a valid batch."""


@dataclass(frozen=True)
class EventBody:
    events: list[ev.Event]
    texts: list[str]
    """Each event's JSON, compact, as sent (keys in the order sent)."""

    def texts_of(self, events: list[ev.Event]) -> list[str] | None:
        """The texts, if ``events`` are these events (FastAPI passes them on in a list
        of its own)."""
        same = len(events) == len(self.events) and all(
            mine is theirs for mine, theirs in zip(self.events, events, strict=True)
        )
        return self.texts if same else None


def parse(document: Any) -> EventBody | None:
    """The batch's events and texts; None if any event is invalid (FastAPI says why)."""
    if not isinstance(document, list):
        return None
    try:
        events = ev.EVENT_LIST.validate_python(document)
    except ValidationError:
        return None
    encode = msgspec.json.encode
    return EventBody(events, [encode(item).decode() for item in document])
