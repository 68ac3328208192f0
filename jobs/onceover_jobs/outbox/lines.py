"""An event as one line of JSON: what a spool file holds and what a batch is made of.

A line never holds a newline (compact JSON escapes it), so a spool file splits back into
the very events written; a line that is not a JSON object (a writer that died mid-write)
is told apart and set aside rather than sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    # Imported where an emitter is made, not here: a write without a monitor never
    # makes one, and its commit worker should not pay for the event schema.
    from onceover.events import Event

Payload: TypeAlias = "Event | Mapping[str, Any]"
"""What an emitter sends: one of our events, or any JSON object (an OpenLineage event)."""


def serialise(event: Payload) -> bytes:
    """One spool line: the event as compact JSON (never a newline inside)."""
    if isinstance(event, Mapping):
        return json.dumps(event, separators=(",", ":"), allow_nan=False).encode()
    return event.model_dump_json().encode()


def parse_lines(data: bytes) -> tuple[list[bytes], list[bytes]]:
    """The lines of a spool file: (events, lines that are not a JSON object)."""
    good: list[bytes] = []
    bad: list[bytes] = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            is_object = isinstance(json.loads(line), dict)
        except ValueError:
            is_object = False
        (good if is_object else bad).append(line)
    return good, bad
