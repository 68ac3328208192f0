"""The sender thread: the spool first (oldest file first), then the buffer.

What it guarantees:

* An event leaves a spool file only once the receiver stored it or refused it for good:
  a file is deleted after it is sent whole; one sent in part is replaced by a file of
  the rest, so the stored part is not sent again (if even that cannot be written, the
  file is given back whole: sent twice in part, never lost).
* While the receiver is unreachable, the buffer is spooled at every wake-up, so a crash
  during an outage loses at most one flush interval's events.
* A shared folder is sent from only while the receiver accepts this emitter's token:
  its files may be any job's, and a refused token would park them as ours.
* A bug in a round does not stop delivery: it is logged, the buffer spooled, and the
  next round comes after a backoff.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from onceover_jobs.outbox.answers import RefusedTokenError, UnreachableError
from onceover_jobs.outbox.buffer import Buffer, Work
from onceover_jobs.outbox.claims import Claim
from onceover_jobs.outbox.delivery import Delivery
from onceover_jobs.outbox.health import ReceiverHealth
from onceover_jobs.outbox.lines import parse_lines
from onceover_jobs.outbox.refusals import Refusals
from onceover_jobs.outbox.spool import Spool
from onceover_jobs.outbox.tally import Tally

logger = logging.getLogger(__name__)


class Sender:
    """Sends ``buffer``'s lines and the files of ``spool`` and ``shared`` through
    ``delivery``, in batches of ``batch_size``, from a daemon thread of its own."""

    def __init__(
        self,
        buffer: Buffer,
        delivery: Delivery,
        *,
        refusals: Refusals,
        spool: Spool,
        shared: Sequence[Spool],
        health: ReceiverHealth,
        tally: Tally,
        batch_size: int,
    ) -> None:
        self._buffer = buffer
        self._delivery = delivery
        self._refusals = refusals
        self._spool = spool
        self._shared = list(shared)
        self._health = health
        self._tally = tally
        self._batch_size = batch_size
        self._thread = threading.Thread(target=self._run, name="onceover-emitter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def keep(self, lines: list[bytes], *, seal: bool = False) -> None:
        """Spool ``lines`` (from any thread) to be sent later; logged and counted as
        dropped if the disk refuses them."""
        if not lines:
            return
        try:
            self._spool.append(lines, seal=seal)
        except OSError as exc:
            logger.error(
                "cannot spool %d events to %s, they are lost: %s",
                len(lines),
                self._spool.directory,
                exc,
            )
            self._tally.add("dropped", len(lines))
            return
        self._tally.add("spooled", len(lines))
        self._buffer.spool_written()

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._step():
                pass
        finally:
            self._delivery.close()

    def _step(self) -> bool:
        """Wait for something to do, do it; False when stopping."""
        work = self._buffer.next_work(lambda: self._health.retry_at)
        if work is None:
            return False
        try:
            if work.flush_to:
                self._flush_cycle(work)
            elif work.backing_off:
                self._keep_buffer()  # so a crash during the outage loses at most this interval
            else:
                self._drain(scan=work.scan, limit=None)
        except Exception:  # a bug here must not stop delivery: spool and carry on
            logger.exception("event sender failed; retrying")
            self._keep_buffer()
            self._health.note_failure(None)
        return True

    def _flush_cycle(self, work: Work) -> None:
        self._health.retry_now()
        ok = self._drain(scan=True, limit=work.limit)
        if not ok:
            self._keep_buffer()
        self._spool.seal()
        self._buffer.flush_answered(work.flush_to, ok)

    def _drain(self, *, scan: bool, limit: int | None) -> bool:
        """Send the spool (oldest first), then the buffer (at most ``limit`` events).
        False if the receiver turned out unreachable."""
        try:
            if scan:
                self._drain_spool()
            self._drain_buffer(limit)
        except UnreachableError:
            return False
        return True

    def _drain_spool(self) -> None:
        self._spool.seal()
        # The shared folders first: what is there was spooled before anything of ours.
        for spool in [*self._shared, self._spool]:
            for claim in spool.claims() if self._may_send_from(spool) else ():
                try:
                    self._send_claim(claim)
                except BaseException:
                    claim.release()
                    raise
                if not self._may_send_from(spool):
                    break
        self._buffer.spool_scanned()

    def _send_claim(self, claim: Claim) -> None:
        lines, unreadable = parse_lines(claim.read())
        if unreadable:
            self._refusals.reject(
                unreadable, None, f"unreadable lines in spool file {claim.path.name}"
            )
        for start in range(0, len(lines), self._batch_size):
            end = start + self._batch_size
            try:
                if self._buffer.stopping:
                    raise UnreachableError(lines[start:end])
                self._delivery.deliver(lines[start:end])
            except RefusedTokenError as exc:
                self._refusals.park_claim(claim, lines, exc)
                return
            except UnreachableError as exc:
                rest = [*exc.undelivered, *lines[end:]]
                if len(rest) == len(lines):
                    raise  # none of it went anywhere: the caller releases the file as it is
                # Part of it is stored: keep only the rest, so that part is not sent again.
                try:
                    self._spool.append(rest, seal=True)
                except OSError:
                    raise exc from None  # released whole: sent twice in part, never lost
                claim.done()
                raise
        claim.done()

    def _drain_buffer(self, limit: int | None) -> None:
        sent = 0
        while limit is None or sent < limit:
            batch = self._buffer.take(None if limit is None else limit - sent)
            if not batch:
                return
            try:
                self._delivery.deliver(batch)
            except RefusedTokenError as exc:
                if not self._buffer.batch_ended():  # else it is parked when the spool is sent
                    self._refusals.park(exc.undelivered, exc)
                sent += len(batch)
                continue
            except BaseException as exc:  # a surprise too: the batch is in no file yet
                if not self._buffer.batch_ended():
                    # Else a flush that timed out has spooled the whole batch.
                    self.keep(exc.undelivered if isinstance(exc, UnreachableError) else batch)
                raise
            self._buffer.batch_ended()
            sent += len(batch)

    def _keep_buffer(self) -> None:
        self.keep(self._buffer.take_all())

    def _may_send_from(self, spool: Spool) -> bool:
        """Our own spool, always; a shared one only while our token is accepted (its
        files may be anyone's, and a refused token would park them as ours)."""
        return spool is self._spool or not self._health.token_refused
