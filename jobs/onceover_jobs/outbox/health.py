"""How the receiver has been answering: the backoff after failures, how long POSTs take
(a patient flush's measure), and whether it refuses the token.

* Failures back off exponentially (capped, with jitter so the workers of a cluster do
  not all come back in the same instant, and never sooner than ``Retry-After``); the
  first is logged as a warning, the rest quietly, and the first success after them says
  the receiver is back.
* A success clears everything: the backoff, and a refused token (the one the receiver
  refused may have been fixed).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 30.0


class ReceiverHealth:
    """What one emitter has learnt of its receiver (``receiver`` at ``url``, as log lines
    call it; events go to ``spool_dir`` meanwhile). Safe to use from any thread."""

    def __init__(self, receiver: str, url: str, spool_dir: Path) -> None:
        self._receiver = receiver
        self._url = url
        self._spool_dir = spool_dir
        self._lock = threading.Lock()
        # Everything below is guarded by _lock.
        self._retry_at = 0.0
        self._failures = 0
        # When the POST under way started (None: none is), and how long the last one
        # took: whether the receiver is answering promptly (flush's patience_s).
        self._posting_since: float | None = None
        self._last_post_s = 0.0
        # The receiver refused the token (and has taken no batch since); the refusal
        # was logged.
        self._token_refused = False
        self._told_parked = False

    @property
    def retry_at(self) -> float:
        """The monotonic time before which the sender does not try again."""
        with self._lock:
            return self._retry_at

    @property
    def token_refused(self) -> bool:
        with self._lock:
            return self._token_refused

    def retry_now(self) -> None:
        """Whoever flushes wants an attempt now, not after the backoff."""
        with self._lock:
            self._retry_at = 0.0

    def post_started(self) -> float:
        """Note a POST beginning; returns its start, for :meth:`post_ended`."""
        with self._lock:
            self._posting_since = started = time.monotonic()
        return started

    def post_ended(self, started: float) -> None:
        """Note how long the POST begun at ``started`` took."""
        with self._lock:
            self._last_post_s = time.monotonic() - started
            self._posting_since = None

    def patience_left(self, patience_s: float, now: float) -> float:
        """How much longer a patient flush waits: nothing once the receiver has been
        slow, else until the POST under way turns slow."""
        with self._lock:
            if self._last_post_s > patience_s:
                return 0.0
            if self._posting_since is None:
                return patience_s  # the sender is about to post: wait for that one
            return self._posting_since + patience_s - now

    def stored(self) -> None:
        """The receiver took a batch."""
        with self._lock:
            if self._failures:
                logger.info("%s at %s reachable again", self._receiver, self._url)
            self._failures, self._retry_at = 0, 0.0
            self._token_refused, self._told_parked = False, False

    def refused_token(self) -> None:
        with self._lock:
            self._token_refused = True

    def first_parking(self) -> bool:
        """True the first time events are parked since the receiver last took a batch:
        one log line says it all, later batches of the same job go quietly."""
        with self._lock:
            first, self._told_parked = not self._told_parked, True
        return first

    def note_failure(self, reason: str | None, retry_after: float | None = None) -> None:
        """Back off before the next attempt."""
        with self._lock:
            self._failures += 1
            delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** min(self._failures - 1, 16))
            # Jitter, so the workers of a cluster do not all come back in the same instant.
            delay = delay / 2 + random.uniform(0, delay / 2)  # noqa: S311 - not cryptography
            if retry_after is not None:
                delay = max(delay, min(retry_after, _BACKOFF_CAP_S))
            self._retry_at = time.monotonic() + delay
            if self._failures == 1 and reason is not None:
                logger.warning(
                    "%s at %s unreachable (%s): spooling events to %s and retrying",
                    self._receiver,
                    self._url,
                    reason,
                    self._spool_dir,
                )
            else:
                logger.debug(
                    "%s still unreachable (%s), attempt %d",
                    self._receiver,
                    reason,
                    self._failures,
                )

    def reset_after_fork(self) -> None:
        """In a forked child: a lock of its own (the parent's may have been held by a
        thread the child does not have)."""
        self._lock = threading.Lock()
