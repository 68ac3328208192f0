"""The bounded buffer between ``emit()`` callers and the sender thread, and when the
sender wakes.

What it guarantees:

* Adding never waits on the network, and memory stays bounded: a full buffer is handed
  back whole with the new line (:class:`Overflow`), to be spooled in one write, so
  nothing is dropped and a backend slower than the job costs one fsync per buffer-full.
* A batch the sender took stays *in flight* until its POST ends: a flush that runs out
  of time hands it back with the rest, because the process may exit before the POST
  ends (it may then be sent twice, and is stored once by its id).
* A flush is a request the sender answers; the flush waits for the answer, its
  deadline or, when patient, the receiver turning slow, whichever comes first.
* Once closed (and in a forked child, see :mod:`onceover_jobs.outbox.fork`) every line
  is handed back at once, to go straight to the spool.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Other processes spool too; look for their leftovers now and then even when we have none.
_RESCAN_S = 5.0


@dataclass(frozen=True)
class Overflow:
    """Lines the buffer did not keep, for the spool."""

    lines: list[bytes]
    closed: bool
    """The emitter is closed: seal the spool file too (no sender will hand it over)."""
    first: bool
    """The buffer filled up for the first time (worth a warning)."""


@dataclass(frozen=True)
class FlushEnd:
    """How a flush ended: ``answered`` by the sender in time (then ``ok`` says whether
    nothing is left to deliver), or not, with the ``leftover`` lines to spool."""

    answered: bool
    ok: bool = False
    leftover: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Work:
    """What the sender is to do next."""

    flush_to: int
    """The flush to answer (0: none)."""
    limit: int
    """Lines buffered when the flush was asked: the most it sends from the buffer."""
    backing_off: bool = False
    scan: bool = False
    """Time to look in the spool (what others left, what we spooled)."""


class Buffer:
    """Up to ``max_buffered`` lines, sent in batches of ``batch_size`` or once the
    oldest has waited ``interval_s``. Safe to use from any thread."""

    def __init__(self, *, batch_size: int, max_buffered: int, interval_s: float) -> None:
        self._batch_size = batch_size
        self._max_buffered = max_buffered
        self._interval = interval_s
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Everything below is guarded by _lock.
        self._lines: collections.deque[bytes] = collections.deque()
        self._buffered_since = 0.0
        self._inflight: list[bytes] | None = None
        self._inflight_spooled = False
        self._flush_asked = 0
        self._flush_done = 0
        self._flush_ok = False
        self._scan_at = 0.0  # at once: pick up what earlier processes left behind
        self._stopping = False
        self._closed = False
        self._warned_full = False

    # -- the emitting side --------------------------------------------------------------

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def add(self, line: bytes) -> Overflow | None:
        """Buffer ``line``; what the buffer cannot keep is handed back."""
        with self._lock:
            if self._closed:
                return Overflow([line], closed=True, first=False)
            if len(self._lines) < self._max_buffered:
                self._lines.append(line)
                size = len(self._lines)
                if size == 1:
                    self._buffered_since = time.monotonic()
                    self._cond.notify()
                elif size == self._batch_size:
                    self._cond.notify()
                return None
            # Full: the backend is slower than the job. Spill the whole buffer (one
            # write and one fsync per buffer-full, not per event) rather than block.
            spill = [*self._lines, line]
            self._lines.clear()
            first, self._warned_full = not self._warned_full, True
            return Overflow(spill, closed=False, first=first)

    def flush(
        self,
        deadline: float,
        *,
        patience_left: Callable[[float], float] | None,
        sender_alive: Callable[[], bool],
    ) -> FlushEnd:
        """Ask the sender to deliver what is buffered and wait until ``deadline`` (or
        while ``patience_left(now)`` is positive) for its answer."""
        # patience_left and sender_alive run with this lock held: they must never call
        # back into the buffer (the receiver's health has a lock of its own, taken inside).
        with self._cond:
            if not self._closed and sender_alive():
                self._flush_asked += 1
                wanted = self._flush_asked
                self._cond.notify_all()
                while self._flush_done < wanted:
                    now = time.monotonic()
                    remaining = deadline - now
                    if patience_left is not None:
                        remaining = min(remaining, patience_left(now))
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._flush_done >= wanted:
                    return FlushEnd(answered=True, ok=self._flush_ok)
            leftover = list(self._lines)
            self._lines.clear()
            if self._inflight is not None and not self._inflight_spooled:
                leftover[:0] = self._inflight
                self._inflight_spooled = True
        return FlushEnd(answered=False, leftover=leftover)

    def close(self) -> list[bytes]:
        """Stop the sender; returns what is still buffered, for the spool."""
        with self._cond:
            self._closed = self._stopping = True
            leftover = list(self._lines)  # emitted after the last flush ended
            self._lines.clear()
            self._cond.notify_all()
        return leftover

    # -- the sender's side --------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        with self._lock:
            return self._stopping

    def next_work(self, retry_at: Callable[[], float]) -> Work | None:
        """Wait until there is something to do (None: stop). ``retry_at``: the monotonic
        time the backoff ends (called with this lock held, as in :meth:`flush`)."""
        with self._cond:
            while True:
                if self._stopping:
                    return None
                now = time.monotonic()
                if self._flush_asked > self._flush_done:
                    return Work(flush_to=self._flush_asked, limit=len(self._lines))
                backoff_ends = retry_at()
                backing_off = now < backoff_ends
                scan = not backing_off and now >= self._scan_at
                due = self._buffered_since + self._interval if self._lines else float("inf")
                if scan or (self._lines and (len(self._lines) >= self._batch_size or now >= due)):
                    return Work(flush_to=0, limit=0, backing_off=backing_off, scan=scan)
                self._cond.wait(min(due, backoff_ends if backing_off else self._scan_at) - now)

    def take(self, most: int | None) -> list[bytes]:
        """The next batch (at most ``most`` lines), in flight until :meth:`batch_ended`."""
        with self._lock:
            take = min(self._batch_size, len(self._lines))
            if most is not None:
                take = min(take, most)
            batch = [self._lines.popleft() for _ in range(take)]
            if batch:
                self._inflight, self._inflight_spooled = batch, False
            return batch

    def batch_ended(self) -> bool:
        """The batch in flight is done with; True if a flush spooled it meanwhile."""
        with self._lock:
            spooled, self._inflight = self._inflight_spooled, None
            return spooled

    def take_all(self) -> list[bytes]:
        """Everything buffered (for the spool)."""
        with self._lock:
            lines = list(self._lines)
            self._lines.clear()
            return lines

    def flush_answered(self, flush_to: int, ok: bool) -> None:
        with self._cond:
            self._flush_done = flush_to
            self._flush_ok = ok
            self._cond.notify_all()

    def spool_written(self) -> None:
        """Lines were spooled: look in the spool as soon as the receiver answers."""
        with self._lock:
            self._scan_at = 0.0

    def spool_scanned(self) -> None:
        with self._lock:
            self._scan_at = time.monotonic() + _RESCAN_S

    def reset_after_fork(self) -> None:
        """In a forked child: the sender thread is gone and the locks may be held by
        threads that no longer exist. The buffered lines belong to the parent, which
        sends them; the child's go straight to the spool."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._lines = collections.deque()
        self._inflight = None
        self._closed = self._stopping = True
