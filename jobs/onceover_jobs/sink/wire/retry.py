"""The retry rules of every Storage Write API call the sink makes: which failures are
retried, and how long to wait between tries.

Retried: the gRPC codes of :data:`TRANSIENT` (UNAVAILABLE, INTERNAL, ABORTED,
RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED) and a connection that broke without an
answer from the server. Anything else is the server's answer, and final. The appender
(:mod:`onceover_jobs.sink.wire.appender`) and the unary calls (:mod:`onceover_jobs.sink.wire.unary`)
both ask :func:`is_retried`, so a code is retried or not whichever call met it.

A broken connection is one that ended without an answer from the server: the response
stream ended with requests unanswered, no response came within
``RetryPolicy.response_timeout_s``, or the client's transport failed. UNKNOWN is
retried only as such a local failure, never as a server's answer. gRPC reports some
transport failures as UNKNOWN ("Stream removed", "Exception iterating requests!", an
HTTP/2 answer without a gRPC status), and the appender reports its own reader's
surprises so; the details of these name the transport (:data:`BROKEN_TRANSPORT`). An
UNKNOWN the server sent is an error it could not classify: Google's own clients do not
retry it for these calls, and re-sending the same requests for 300 s would hide a
permanent failure (a server-side bug on these rows) as a slow one, so it fails at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc

OK = 0
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE.value[0]
UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
TRANSIENT = frozenset(
    code.value[0]
    for code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
    )
)
"""The gRPC codes retried (with a broken connection, see :func:`is_retried`)."""

BROKEN_TRANSPORT = (
    "stream removed",
    "socket closed",
    "transport closed",
    "connection reset",
    "broken pipe",
    "endpoint read failed",
    "fd shutdown",
    "goaway",
    "rst_stream",
    "keepalive",
    "failed to connect",
    "connection refused",
    "exception iterating requests",
    "received http2 header with status",
)
"""Details (lower case) of the UNKNOWN gRPC raises on the client for a transport that
failed: no status came from the server, so the connection broke (module docstring)."""

_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def code_name(code: int) -> str:
    return str(_CODE_NAMES.get(code, f"CODE_{code}"))


def is_broken_transport(code: int, message: str) -> bool:
    """An UNKNOWN raised on the client for a transport failure (module docstring)."""
    lowered = message.lower()
    return code == UNKNOWN and any(marker in lowered for marker in BROKEN_TRANSPORT)


def is_retried(code: int, message: str, *, broken: bool = False) -> bool:
    """Whether a failure with this gRPC code is retried: a code of :data:`TRANSIENT`,
    or a connection that broke without an answer (``broken``, or an UNKNOWN from the
    client's own transport). Anything else is the server's answer, and final."""
    return broken or code in TRANSIENT or is_broken_transport(code, message)


DEFAULT_THROTTLE_S = 900.0
"""How long appends refused by the throughput quota are tried again: BigQuery refuses
every append while a quota refills, "short-term quota can take up to 10s to refill" and
"long-term quota ... can take up to 10min" (Apache Beam PR #31837, from BigQuery's
team); 15 minutes outlasts the longer with room to spare."""


@dataclass(frozen=True)
class RetryPolicy:
    deadline_s: float = 300.0
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 10.0
    response_timeout_s: float = 120.0
    throttle_deadline_s: float = DEFAULT_THROTTLE_S
    """While BigQuery's throughput quota refuses the appends (RESOURCE_EXHAUSTED), how
    long they are tried again before the write gives up (``retry.throttle_s``): the
    quota's refill, not a failure, so not bounded by ``deadline_s``."""
    throttle_max_backoff_s: float = 30.0
    """The longest wait between tries while throttled: a quota that came back is used
    within half a minute, and a stream asks at most ~30 times in 15 minutes."""

    def backoff(self, failures: int, *, throttled: bool = False) -> float:
        """Exponential backoff with jitter: uniform in [cap/2, cap]."""
        most = self.throttle_max_backoff_s if throttled else self.max_backoff_s
        cap = min(most, self.initial_backoff_s * (2 ** max(0, failures - 1)))
        return random.uniform(cap / 2, cap)  # noqa: S311 - jitter, not security

    def deadline_for(self, *, throttled: bool) -> float:
        """How long a run of failures is tried again: longer while throttled."""
        return max(self.deadline_s, self.throttle_deadline_s) if throttled else self.deadline_s
