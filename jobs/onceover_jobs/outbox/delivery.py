"""One POST at a time: lines sent as the wire says, each answer acted on by the rules of
:mod:`onceover_jobs.outbox.answers`.

:meth:`Delivery.deliver` returns once every line is stored or refused for good (kept in
``rejected.jsonl``), and raises with the lines left over otherwise, in their order, so
the caller keeps exactly those: :class:`~onceover_jobs.outbox.answers.UnreachableError`
(to spool and send again) or :class:`~onceover_jobs.outbox.answers.RefusedTokenError`
(to park).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceover_jobs.outbox.answers import (
    Answer,
    RefusedTokenError,
    UnreachableError,
    answer_to,
    problems,
    refuses_only_those,
    retry_after,
)
from onceover_jobs.outbox.health import ReceiverHealth
from onceover_jobs.outbox.refusals import Refusals
from onceover_jobs.outbox.tally import Tally
from onceover_jobs.outbox.wire import Wire

if TYPE_CHECKING:
    # Imported where an emitter is made, not here: a write without a monitor never
    # makes one, and its commit worker should not pay for httpx.
    import httpx


def http_client(
    url: str, token: str | None, timeout_s: float, transport: httpx.BaseTransport | None
) -> httpx.Client:
    """The client an emitter posts with: ``url`` as its base, ``token`` as its bearer."""
    import httpx

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=url, headers=headers, timeout=timeout_s, transport=transport)


class Delivery:
    """Posts to ``wire``'s receiver through ``client``."""

    def __init__(
        self,
        client: httpx.Client,
        wire: Wire,
        health: ReceiverHealth,
        tally: Tally,
        refusals: Refusals,
    ) -> None:
        self._client = client
        self._wire = wire
        self._health = health
        self._tally = tally
        self._refusals = refusals

    def deliver(self, lines: list[bytes]) -> None:
        """Post ``lines`` until each is stored or refused for good."""
        if not self._wire.one_per_request:
            self._post(lines)
            return
        for at, line in enumerate(lines):  # in order: a refusal keeps the rest for later
            try:
                self._post([line])
            except (UnreachableError, RefusedTokenError) as exc:
                exc.undelivered = [*exc.undelivered, *lines[at + 1 :]]
                raise

    def close(self) -> None:
        self._client.close()

    def _post(self, lines: list[bytes]) -> None:
        """:meth:`deliver` of what one request carries (all of ``lines``, halved on a 413)."""
        while lines:
            started = self._health.post_started()
            try:
                response = self._client.post(self._wire.path, content=self._wire.body(lines))
            except Exception as exc:  # httpx's errors, and any surprise: keep the batch
                self._health.post_ended(started)
                self._health.note_failure(f"{type(exc).__name__}: {exc}".rstrip(": "))
                raise UnreachableError(lines) from None
            self._health.post_ended(started)
            status = response.status_code
            answer = answer_to(status, len(lines))
            if answer is Answer.STORED:
                self._health.stored()
                self._tally.add("delivered", len(lines))
                return
            if answer is Answer.TOKEN_REFUSED:
                # The events are fine and the token is not: kept whole, to send once fixed.
                problem = problems(response, len(lines))[1]
                self._health.refused_token()
                raise RefusedTokenError(lines, status, problem)
            if answer is Answer.UNREACHABLE:
                self._health.note_failure(f"HTTP {status}", retry_after(response))
                raise UnreachableError(lines)
            if answer is Answer.TOO_LARGE:
                # Over the receiver's body limit: each half on its own, in order.
                half = len(lines) // 2
                try:
                    self._post(lines[:half])
                except (UnreachableError, RefusedTokenError) as exc:
                    exc.undelivered = [*exc.undelivered, *lines[half:]]
                    raise
                lines = lines[half:]
                continue
            bad, problem = problems(response, len(lines))
            if refuses_only_those(status, bad, len(lines)):
                self._refusals.reject([lines[i] for i in sorted(bad)], status, problem)
                lines = [line for i, line in enumerate(lines) if i not in bad]
                continue  # the rest of the batch is fine: send it again without the bad ones
            self._refusals.reject(lines, status, problem)
            return
