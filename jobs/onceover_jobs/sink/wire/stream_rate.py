"""How fast one process may create write streams.

BigQuery's CreateWriteStream quota is 10,000 an hour per project and region, and above
40-50 calls a second its latency passes 25 s. An executor running many tasks of a
pending-mode write (a stream per task) could burst far past that, so each process
paces its CreateWriteStream calls with a token bucket: ``ONCEOVER_STREAM_CREATES_PER_S``
(default 10) a second, in bursts of as many. A RESOURCE_EXHAUSTED answer (the hourly
quota spent) is retried with backoff like any other, up to ``retry.deadline_s``.
"""

from __future__ import annotations

import os
import threading
import time

CREATE_STREAMS_PER_HOUR = 10_000
"""BigQuery's CreateWriteStream quota: streams one project creates per hour and region."""
CREATE_CALLS_PER_S_SLOW = 40
"""Above 40-50 CreateWriteStream calls a second BigQuery's latency passes 25 s."""
RATE_ENV = "ONCEOVER_STREAM_CREATES_PER_S"
DEFAULT_RATE = 10.0


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved; :meth:`take` waits for one."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self._tokens = self.burst
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take a token, waiting until there is one; returns the seconds waited."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1  # may go negative: later callers queue behind this one
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)  # pacing, not synchronisation: the bucket is the clock
        return wait


def _rate_from_env() -> float:
    text = os.environ.get(RATE_ENV, "")
    try:
        rate = float(text) if text else DEFAULT_RATE
    except ValueError:
        rate = DEFAULT_RATE
    return rate if rate > 0 else DEFAULT_RATE


_buckets: dict[str, TokenBucket] = {}
_buckets_lock = threading.Lock()


def stream_creations() -> TokenBucket:
    """This process's bucket (made at the first stream created)."""
    with _buckets_lock:
        bucket = _buckets.get("create_write_stream")
        if bucket is None:  # the rate is read once per process, not on every call
            bucket = _buckets["create_write_stream"] = TokenBucket(_rate_from_env())
        return bucket
