"""What the receiver's answer to a POST means: the HTTP rules, in one place.

=====================  ================================================================
answer                 what becomes of the events
=====================  ================================================================
2xx                    stored; forgotten
401, 403               the token is refused, not the events: parked whole until it is
                       fixed (:mod:`onceover_jobs.outbox.refusals`)
408, 429, 5xx, none    unreachable for now: spooled, sent again after a backoff that
                       honours ``Retry-After``
413, several events    over the body limit: each half sent on its own, in order
413 alone, 3xx, 4xx    refused for good: kept in ``rejected.jsonl``, never sent again;
                       when a 422 names the bad events by index, only they are
=====================  ================================================================

Sending again is always safe: every event has a deterministic id and the receiver
stores an event once by its id, so whenever it is unknown whether a batch arrived (a
timeout, a crash between sending and forgetting) the batch is sent again rather than
risk losing it.

:class:`UnreachableError` and :class:`RefusedTokenError` carry the events a POST did
not deliver between the sender's own modules; no caller of an emitter ever sees them.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

_PROBLEM_CHARS = 300


class Answer(enum.Enum):
    """What an HTTP status says about the events of the request."""

    STORED = enum.auto()
    TOKEN_REFUSED = enum.auto()
    UNREACHABLE = enum.auto()
    TOO_LARGE = enum.auto()
    REFUSED = enum.auto()


def answer_to(status: int, events: int) -> Answer:
    """The meaning of ``status`` for a request of ``events`` events."""
    if 200 <= status < 300:
        return Answer.STORED
    if status in (401, 403):
        return Answer.TOKEN_REFUSED
    if status in (408, 429) or status >= 500:
        return Answer.UNREACHABLE
    if status == 413 and events > 1:
        return Answer.TOO_LARGE
    return Answer.REFUSED


def refuses_only_those(status: int, named: set[int], events: int) -> bool:
    """Whether a refusal of a request of ``events`` events refuses only the ones it
    ``named`` (a 422 naming some of them), so the rest is sent again without them."""
    return status == 422 and 0 < len(named) < events


class UnreachableError(Exception):
    """The receiver is unreachable for now; carries the events it did not take."""

    def __init__(self, undelivered: list[bytes]) -> None:
        super().__init__(f"{len(undelivered)} events undelivered")
        self.undelivered = undelivered


class RefusedTokenError(Exception):
    """The receiver refused the token (401, 403); carries the events it did not take."""

    def __init__(self, undelivered: list[bytes], status: int, problem: str) -> None:
        super().__init__(f"HTTP {status}: {problem}")
        self.undelivered = undelivered
        self.status = status


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (None without one in seconds)."""
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def problems(response: httpx.Response, size: int) -> tuple[set[int], str]:
    """The indices of the events a refusal names (FastAPI's ``loc: ["body", i, ...]``)
    and the first problem, as text for the log."""
    try:
        body = response.json()
    except ValueError:
        return set(), response.text[:_PROBLEM_CHARS] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if not isinstance(detail, list):
        return set(), str(detail)[:_PROBLEM_CHARS]
    bad: set[int] = set()
    for item in detail:
        loc = item.get("loc") if isinstance(item, dict) else None
        if isinstance(loc, list) and len(loc) > 1 and loc[0] == "body":
            index = loc[1]
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < size:
                bad.add(index)
    first = detail[0] if detail else ""
    if isinstance(first, dict):
        loc = first.get("loc")
        where = ".".join(str(part) for part in loc) if isinstance(loc, list) else ""
        first = f"{where}: {first.get('msg', first)}" if where else first.get("msg", first)
    return bad, str(first)[:_PROBLEM_CHARS]
