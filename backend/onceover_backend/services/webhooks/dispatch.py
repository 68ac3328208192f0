"""Sending webhook deliveries: sign, POST, record, and plan the next try.

Each round claims the deliveries that are due (see :mod:`.deliveries`) and sends them
side by side. A try succeeds on any 2xx. Anything else (another status, a timeout, a
refused connection, a redirect) is tried again after an exponential backoff with jitter,
or after the receiver's ``Retry-After`` when it sends one (up to the same cap), until
``webhook_max_attempts``. 410 Gone ends the delivery and disables the endpoint.

Requests go through :class:`~onceover_backend.services.webhooks.urls.CheckedTransport`: the
address connected to is one that was checked. A try's ``error`` is ``kind: detail``;
the kind (``refused``, ``timed out``, ``ConnectError``, ``redirected``, ``HTTP 500``)
is what a viewer is shown, the detail (addresses, what the receiver said) is for
operators.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
from sqlalchemy import Engine

from onceover import __version__
from onceover_backend.core.config import Settings
from onceover_backend.services.periodic import every
from onceover_backend.services.webhooks import deliveries
from onceover_backend.services.webhooks.deliveries import RESPONSE_KEPT, Claimed, Outcome
from onceover_backend.services.webhooks.signing import headers
from onceover_backend.services.webhooks.urls import (
    CheckedTransport,
    IPNetwork,
    RefusedURLError,
    check_url,
    parse_networks,
)

logger = logging.getLogger(__name__)

BATCH = 50
SENDERS = 8
LEASE_MARGIN = timedelta(seconds=30)
JITTER = 0.25
ANSWER_READ = 4 * RESPONSE_KEPT  # bytes of an answer read (UTF-8: up to 4 a character)


def backoff(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Seconds to wait after try ``attempt`` (1, 2, ...) failed: ``base * 2^(attempt-1)``,
    ±25% (so waits still grow: the next one's low end is above this one's high end),
    at most ``cap_s``."""
    planned: float = base_s * 2.0 ** (attempt - 1)
    return min(cap_s, planned * rng.uniform(1 - JITTER, 1 + JITTER))


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


class Dispatcher:
    """Sends due deliveries; one per backend replica."""

    def __init__(
        self, engine: Engine, settings: Settings, transport: httpx.BaseTransport | None = None
    ) -> None:
        """``transport``: how requests are made; by default, only to checked addresses."""
        self.engine = engine
        self.settings = settings
        self._rng = random.Random()  # noqa: S311 (jitter, not a secret)
        self._client = httpx.Client(
            transport=transport or CheckedTransport(self._allowed),
            timeout=settings.webhook_timeout_s,
            follow_redirects=False,  # a redirect could lead anywhere; it is a failure
            headers={"user-agent": f"Onceover/{__version__}"},
        )
        self._pool = ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="webhook")

    def _allowed(self) -> list[IPNetwork]:
        return parse_networks(self.settings.webhook_allowed_networks)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def run_once(self, only: int | None = None) -> list[str]:
        """Claim what is due (or the one delivery ``only``), send it, record each try;
        the statuses the deliveries moved to."""
        lease = timedelta(seconds=self.settings.webhook_timeout_s) + LEASE_MARGIN
        claimed = deliveries.claim(self.engine, datetime.now(UTC), lease, BATCH, only)
        return list(self._pool.map(self._deliver, claimed))

    def _deliver(self, claimed: Claimed) -> str:
        outcome = self.send(claimed)
        if outcome.succeeded or outcome.status_code == 410:
            retry_in = None
        else:
            wait = backoff(
                claimed.number, self.settings.webhook_backoff_s,
                self.settings.webhook_max_backoff_s, self._rng,
            )  # fmt: skip
            if outcome.retry_after_s is not None:
                wait = min(outcome.retry_after_s, self.settings.webhook_max_backoff_s)
            retry_in = timedelta(seconds=wait)
        status = deliveries.record(
            self.engine, claimed, outcome,
            max_attempts=self.settings.webhook_max_attempts, retry_in=retry_in,
        )  # fmt: skip
        log = logger.info if outcome.succeeded else logger.warning
        log(
            "webhook delivery %d try %d to endpoint %d: %s (%s)",
            claimed.delivery_id, claimed.number, claimed.endpoint_id,
            outcome.status_code or outcome.error, status,
        )  # fmt: skip
        return status

    def send(self, claimed: Claimed) -> Outcome:
        """One signed POST of the delivery's body."""
        started_at = datetime.now(UTC)
        started = time.perf_counter()

        def ms() -> float:
            return (time.perf_counter() - started) * 1000

        signed = headers(
            claimed.secret, claimed.message_id, int(started_at.timestamp()), claimed.body
        )
        try:
            check_url(claimed.url, self._allowed())  # the host's addresses: when connecting
            with self._client.stream(
                "POST", claimed.url, content=claimed.body.encode(),
                headers={**signed, "content-type": "application/json"},
            ) as response:  # fmt: skip
                answer = _answer(response)
        except RefusedURLError as exc:
            return Outcome(started_at, ms(), error=f"refused: {exc}")
        except httpx.TimeoutException as exc:
            return Outcome(started_at, ms(), error=f"timed out: {exc!r}")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return Outcome(started_at, ms(), error=f"{type(exc).__name__}: {exc}")
        error = None
        if response.is_redirect:
            error = f"redirected: to {response.headers.get('location')!r} (not followed)"
        elif not response.is_success:
            error = f"HTTP {response.status_code}"
        return Outcome(
            started_at, ms(), response.status_code, error,
            retry_after(response.headers.get("retry-after"), datetime.now(UTC)), answer,
        )  # fmt: skip


def _answer(response: httpx.Response) -> str:
    """The start of what the receiver answered (what is kept of it); the rest, however
    long, is not read."""
    head = bytearray()
    for chunk in response.iter_bytes():
        head += chunk
        if len(head) >= ANSWER_READ:
            break
    try:
        return head[:ANSWER_READ].decode(response.encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return head[:ANSWER_READ].decode("utf-8", errors="replace")


async def dispatch_forever(dispatcher: Dispatcher, stop: asyncio.Event) -> None:
    """Send what is due every ``webhook_poll_s`` until ``stop`` is set."""
    await every(
        dispatcher.settings.webhook_poll_s, stop, dispatcher.run_once, "the webhook dispatch"
    )
