"""The emitter: what callers hand events to. ``emit()`` never blocks on the network and
never raises; a daemon thread (:mod:`onceover_jobs.outbox.sender`) posts the events.

What it guarantees: every event is delivered **at least once** and stored **exactly
once** (its id is deterministic and the receiver stores an event once by id). What
:meth:`EventEmitter.flush` does not deliver by its deadline is in the spool when it
returns, so the process may exit right after it. What can still be lost: events only
in memory when a process dies without a flush (SIGKILL, or ``os._exit``, which is how
Spark's forked Python workers end; hence the flush at the end of every task), and
events the disk refuses to spool (logged and counted in ``dropped``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from onceover_jobs.outbox import fork
from onceover_jobs.outbox.buffer import Buffer
from onceover_jobs.outbox.delivery import Delivery, http_client
from onceover_jobs.outbox.health import ReceiverHealth
from onceover_jobs.outbox.lines import Payload, serialise
from onceover_jobs.outbox.refusals import Refusals
from onceover_jobs.outbox.sender import Sender
from onceover_jobs.outbox.spool import Spool
from onceover_jobs.outbox.tally import Tally
from onceover_jobs.outbox.wire import CONTROL_PLANE, Wire

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

# Part of a flush's time kept for writing the spool, which is what flush promises.
_SPOOL_RESERVE_S = 0.1
WRITE_PATH_PATIENCE_S = 0.25
"""How long a flush on the write path waits for the receiver's answer (``patience_s``):
well above what a healthy control plane takes to store a batch, well below a write."""
LAST_FLUSH_RETRY_S = 0.25
"""How often a flush with no patience tries an unreachable receiver again."""


class EventEmitter:
    """Posts events to ``<url>/api/events`` (or where ``wire`` says) from a background
    thread, spooling to ``spool_dir`` while the backend is unreachable. ``emit()`` never
    blocks on the network and never raises.

    ``shared_dirs`` are spool folders any token may send (written before spools were
    per token, or where parked files are put back): their files, those this user owns,
    are sent too while the backend accepts this emitter's token, and are left alone
    once it refuses it. Parked events are to be moved back into the first of them
    (else into ``spool_dir``). ``transport`` replaces httpx's network layer (tests hand
    in a faulty one).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        spool_dir: Path,
        *,
        shared_dirs: Sequence[Path] = (),
        batch_size: int = 500,
        max_buffered: int = 10_000,
        flush_interval_s: float = 0.5,
        request_timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        wire: Wire = CONTROL_PLANE,
    ) -> None:
        import httpx

        base = httpx.URL(url)
        if base.scheme not in ("http", "https") or not base.host:
            raise ValueError(f"url must be an http(s) base URL, not {url!r}")
        for name, value in (("batch_size", batch_size), ("max_buffered", max_buffered)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        for name, seconds in (
            ("flush_interval_s", flush_interval_s),
            ("request_timeout_s", request_timeout_s),
        ):
            if seconds <= 0:
                raise ValueError(f"{name} must be positive, not {seconds}")
        self.url = str(base).rstrip("/")
        self.wire = wire
        self._max_buffered = max_buffered
        client = http_client(self.url, token, request_timeout_s, transport)
        self._spool = Spool(Path(spool_dir))
        shared = [Spool(Path(d), owner=os.getuid(), create=False) for d in shared_dirs]
        self._spools = [self._spool, *shared]
        replay_dir = Path(shared_dirs[0]) if shared_dirs else self._spool.directory
        self._buffer = Buffer(
            batch_size=batch_size, max_buffered=max_buffered, interval_s=flush_interval_s
        )
        self._tally = Tally()
        self._health = ReceiverHealth(wire.receiver, self.url, self._spool.directory)
        refusals = Refusals(
            self._spool,
            wire,
            self.url,
            replay_dir=replay_dir,
            health=self._health,
            tally=self._tally,
        )
        delivery = Delivery(client, wire, self._health, self._tally, refusals)
        self._sender = Sender(
            self._buffer,
            delivery,
            refusals=refusals,
            spool=self._spool,
            shared=shared,
            health=self._health,
            tally=self._tally,
            batch_size=batch_size,
        )
        self._sender.start()
        fork.reset_in_children(self)

    @property
    def spool_dir(self) -> Path:
        return self._spool.directory

    @property
    def delivered(self) -> int:
        """Events the backend acknowledged (one sent twice counts twice)."""
        return self._tally["delivered"]

    @property
    def spooled(self) -> int:
        """Events written to the spool (they are sent from there later)."""
        return self._tally["spooled"]

    @property
    def rejected(self) -> int:
        """Events the backend refused for good (kept in ``rejected.jsonl``)."""
        return self._tally["rejected"]

    @property
    def parked(self) -> int:
        """Events set aside in ``parked/`` because the backend refused the token."""
        return self._tally["parked"]

    @property
    def dropped(self) -> int:
        """Events lost because they could not be serialised or spooled."""
        return self._tally["dropped"]

    @property
    def closed(self) -> bool:
        return self._buffer.closed

    def emit(self, event: Payload) -> None:
        """Queue ``event``; never blocks on the network, never raises."""
        try:
            line = serialise(event)
        except Exception:
            logger.exception("cannot serialise event %r; dropped", event)
            self._tally.add("dropped", 1)
            return
        overflow = self._buffer.add(line)
        if overflow is None:
            return
        if overflow.first:
            logger.warning(
                "event buffer full (%d events): spilling to %s; the %s "
                "at %s is slower than the job",
                self._max_buffered,
                self._spool.directory,
                self.wire.receiver,
                self.url,
            )
        self._sender.keep(overflow.lines, seal=overflow.closed)

    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool:
        """Deliver what is buffered and spooled, within ``timeout_s``.

        What is not delivered by then is in the spool when this returns. True when
        nothing is left to deliver: every event was stored, refused for good or parked
        (counted in :attr:`rejected` and :attr:`parked`, and logged; a flush cannot
        tell whose they were).

        Without ``patience_s`` (a process's last flush: a job's end, its exit) an
        unreachable receiver is tried again every :data:`LAST_FLUSH_RETRY_S` until
        ``timeout_s``. With ``patience_s``, it waits only while the receiver answers
        promptly: not at all when its last answer took longer than ``patience_s``, and
        no longer than that for the POST under way. The events are then spooled (one write, fsynced)
        and sent from there in the background: a slow control plane must not slow the
        write that flushes (the sink passes :data:`WRITE_PATH_PATIENCE_S`).
        """
        timeout_s = max(0.0, timeout_s)
        deadline = time.monotonic() + timeout_s - min(0.2 * timeout_s, _SPOOL_RESERVE_S)
        patience_left = (
            None if patience_s is None else lambda now: self._health.patience_left(patience_s, now)
        )
        while True:
            end = self._buffer.flush(
                deadline, patience_left=patience_left, sender_alive=self._sender.is_alive
            )
            if not end.answered:
                break
            # An unreachable receiver answers at once (the events spooled). A flush off
            # the write path is a process's last (a job's end, exit): it keeps trying
            # for its time, as a control plane restarting is back within seconds and no
            # later process may come to send the spool.
            wait = min(LAST_FLUSH_RETRY_S, deadline - time.monotonic())
            if end.ok or patience_s is not None or wait <= 0:
                return end.ok
            time.sleep(wait)
        self._sender.keep(end.leftover, seal=True)
        self._spool.seal()
        return False

    def close(self, timeout_s: float) -> None:
        """Flush for up to ``timeout_s`` and stop the thread; later events go to the spool."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        if self.closed:
            return
        self.flush(timeout_s)
        self._sender.keep(self._buffer.close(), seal=True)
        self._sender.join(max(0.05, deadline - time.monotonic()))
        self._spool.seal()

    def after_fork_in_child(self) -> None:
        """Closed in a forked child: only the forking thread exists there, so the sender
        is gone and the locks may be held by threads that no longer exist. The buffer's
        events belong to the parent, which sends them; what the child emits goes
        straight to the spool."""
        self._buffer.reset_after_fork()
        self._health.reset_after_fork()
        self._tally.reset_after_fork()
        for spool in self._spools:
            spool.forget_after_fork()
