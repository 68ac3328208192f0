"""Sends events to the control plane without ever slowing down or failing a write.

Delivery guarantees: every event is delivered **at least once** and stored **exactly
once**. Each event has a deterministic id and ``POST /api/events`` is idempotent by id,
so whenever the emitter cannot know whether a batch arrived (a timeout, a crash between
sending and forgetting) it sends the batch again rather than risk losing it.

How an event travels:

* ``emit()`` serialises the event into a bounded in-memory buffer and returns; a daemon
  thread posts batches of up to ``batch_size`` to ``<url>/api/events``.
* While the backend is unreachable (connection error, timeout, 408, 429, 5xx) batches go
  to the *spool*, JSON-lines files in ``spool_dir`` written with fsync, and are sent
  again after a capped exponential backoff with jitter, oldest file first. A full
  buffer spills to the spool from ``emit()`` itself, one write per buffer-full, so
  nothing is dropped and memory stays bounded.
* ``flush(timeout_s)`` delivers what is buffered; what is not delivered by the deadline
  is spooled, so the process may exit right after it.
* Every emitter on a machine may send every spool file in the directory. A file being
  appended to (``*.open.<pid>``) or sent (``*.sending.<pid>``) is held with an
  exclusive ``flock``; a sender claims a file by locking it and then renaming it, and
  deletes it only after a 2xx. The kernel drops the locks of a dead process, so the
  next emitter takes over its files, even one it was still writing (a torn last line
  is set aside in ``rejected.jsonl``).
* A batch over the backend's body limit (413) is sent again in halves; one event
  over it on its own is refused for good.
* A refusal for good (3xx, or a 4xx other than 408/429) is not retried: it is logged
  with the status and the first problem the body names, and the refused events are
  kept in ``rejected.jsonl`` in the spool dir. When a 422 names the bad events by index
  (``detail[].loc == ["body", i, ...]``), the rest of the batch is sent again.

What can still be lost: events only in memory when a process dies without a flush
(SIGKILL, or ``os._exit``, which is how Spark's forked Python workers end; hence the
flush at the end of every task), and events the disk refuses to spool (logged and
counted in ``dropped``).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import os
import random
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import httpx

from onceover.events import Event

logger = logging.getLogger(__name__)

EVENTS_PATH = "/api/events"
SPOOL_DIR_ENV = "ONCEOVER_SPOOL_DIR"
REJECTED_FILE = "rejected.jsonl"
ATEXIT_TIMEOUT_S = 1.0

_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 30.0
# Other processes spool too; look for their leftovers now and then even when we have none.
_RESCAN_S = 5.0
# Keeps a spool file small enough to read whole while the backend is down for long.
_ROTATE_LINES = 10_000
_PROBLEM_CHARS = 300
# Part of a flush's time kept for writing the spool, which is what flush promises.
_SPOOL_RESERVE_S = 0.1


class EventEmitterLike(Protocol):
    """What the sink needs from an emitter; :class:`NullEmitter` is the do-nothing one."""

    def emit(self, event: Event) -> None: ...
    def flush(self, timeout_s: float) -> bool: ...
    def close(self, timeout_s: float) -> None: ...
    @property
    def delivered(self) -> int: ...
    @property
    def spooled(self) -> int: ...
    @property
    def rejected(self) -> int: ...


class NullEmitter:
    """The emitter when no ``monitor.url`` is set: accepts events and forgets them."""

    def emit(self, event: Event) -> None:
        pass

    def flush(self, timeout_s: float) -> bool:
        return True

    def close(self, timeout_s: float) -> None:
        pass

    @property
    def delivered(self) -> int:
        return 0

    @property
    def spooled(self) -> int:
        return 0

    @property
    def rejected(self) -> int:
        return 0


# -- the spool --------------------------------------------------------------------------


@dataclass
class _OpenFile:
    fd: int
    path: Path  # events-<stamp>-<pid>-<seq>.jsonl.open.<pid>
    sealed: Path  # events-<stamp>-<pid>-<seq>.jsonl
    lines: int = 0


@dataclass
class _Claim:
    """A spool file this process holds (locked, renamed to ``*.sending.<pid>``)."""

    fd: int
    path: Path
    pending: Path
    spool: _Spool
    finished: bool = False

    def read(self) -> bytes:
        return self.path.read_bytes()

    def done(self) -> None:
        """Delivered: delete it (then unlock, so no one can claim a file being deleted)."""
        if not self.finished:
            self.finished = True
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self.spool.let_go(self.fd)

    def release(self) -> None:
        """Not delivered: give it back under its pending name for whoever sends next."""
        if not self.finished:
            self.finished = True
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.path, self.pending)
            self.spool.let_go(self.fd)


class _Spool:
    """JSON-lines files in one directory, shared by every emitter on the machine."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rejected_path = directory / REJECTED_FILE
        self._lock = threading.Lock()
        self._open: _OpenFile | None = None
        self._held: set[int] = set()  # fds of claims, closed in a forked child
        self._seq = itertools.count()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # sending still works; spooling will log its own errors
            logger.error("cannot create event spool %s: %s", directory, exc)

    def append(self, lines: Sequence[bytes], *, seal: bool = False) -> None:
        """Write ``lines`` durably; raises ``OSError`` if the disk refuses them."""
        data = b"".join(line + b"\n" for line in lines)
        with self._lock:
            current = self._open or self._create()
            try:
                _write_all(current.fd, data)
                os.fsync(current.fd)
            except OSError:
                # What was written stays readable; a torn last line is set aside on reading.
                self._seal_locked()
                raise
            current.lines += len(lines)
            if seal or current.lines >= _ROTATE_LINES:
                self._seal_locked()

    def seal(self) -> None:
        """Hand the file being appended to over to any sender."""
        with self._lock:
            self._seal_locked()

    def claims(self) -> Iterator[_Claim]:
        """Claims every file no live process holds, oldest first, one at a time."""
        try:
            names = sorted(
                name for name in os.listdir(self.directory) if name.startswith("events-")
            )
        except FileNotFoundError:
            return
        with self._lock:
            own = self._open.path.name if self._open else None
        for name in names:
            stem, dot, suffix = name.partition(".jsonl")
            if (
                name == own
                or not dot
                or not (suffix == "" or suffix.startswith((".open.", ".sending.")))
            ):
                continue
            claim = self._claim(name, f"{stem}.jsonl")
            if claim is not None:
                yield claim

    def reject(self, record: bytes) -> None:
        # O_APPEND and one write per record: emitters of several processes share the file.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(self.rejected_path, flags, 0o600)
        try:
            _write_all(fd, record + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    def let_go(self, fd: int) -> None:
        with self._lock:
            self._held.discard(fd)
        os.close(fd)

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's files without unlocking them (the lock
        belongs to the open file description the parent still uses)."""
        self._lock = threading.Lock()
        fds = set(self._held)
        if self._open is not None:
            fds.add(self._open.fd)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open = None
        self._held = set()

    def _create(self) -> _OpenFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        sealed = self.directory / f"events-{time.time_ns():020d}-{pid}-{next(self._seq):06d}.jsonl"
        # Created under a name scanners ignore and locked before it gets its .open name:
        # a scanner must never find it unlocked and take it for a dead writer's file.
        hidden = self.directory / f".{sealed.name}.new"
        fd = os.open(
            hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            path = sealed.with_name(f"{sealed.name}.open.{pid}")
            os.rename(hidden, path)
            _fsync_dir(self.directory)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                hidden.unlink()
            raise
        self._open = _OpenFile(fd, path, sealed)
        return self._open

    def _seal_locked(self) -> None:
        current, self._open = self._open, None
        if current is None:
            return
        try:
            os.rename(current.path, current.sealed)
            _fsync_dir(self.directory)
        except OSError as exc:  # unlocked below, so the next scan reclaims it anyway
            logger.warning("could not seal spool file %s: %s", current.path, exc)
        finally:
            os.close(current.fd)

    def _claim(self, name: str, pending: str) -> _Claim | None:
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            # Lock first, rename second: whoever holds the lock owns the file, and a
            # dead owner's lock is gone, which is what makes its file ours to take.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            claimed = self.directory / f"{pending}.sending.{os.getpid()}"
            os.rename(path, claimed)  # fails if its owner finished with it meanwhile
        except OSError:
            os.close(fd)
            return None
        with self._lock:
            self._held.add(fd)
        return _Claim(fd, claimed, self.directory / pending, self)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_spool(data: bytes) -> tuple[list[bytes], list[bytes]]:
    """Lines of a spool file: (events, lines that are not a JSON object)."""
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


# -- the emitter ------------------------------------------------------------------------


class _UnreachableError(Exception):
    """The backend is unreachable for now; carries the events it did not take."""

    def __init__(self, undelivered: list[bytes]) -> None:
        super().__init__(f"{len(undelivered)} events undelivered")
        self.undelivered = undelivered


class EventEmitter:
    """Posts events to ``<url>/api/events`` from a background thread, spooling to
    ``spool_dir`` while the backend is unreachable. ``emit()`` never blocks on the
    network and never raises; see the module docstring for the guarantees.

    ``transport`` replaces httpx's network layer (tests hand in a faulty one).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        spool_dir: Path,
        *,
        batch_size: int = 500,
        max_buffered: int = 10_000,
        flush_interval_s: float = 0.5,
        request_timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
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
        self._batch_size = batch_size
        self._max_buffered = max_buffered
        self._interval = flush_interval_s
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(
            base_url=self.url, headers=headers, timeout=request_timeout_s, transport=transport
        )
        self._spool = _Spool(Path(spool_dir))

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Everything below is guarded by _lock.
        self._buffer: collections.deque[bytes] = collections.deque()
        self._buffered_since = 0.0
        # A batch taken from the buffer and being posted: a flush that times out spools
        # it, because the process may exit before the post ends.
        self._inflight: list[bytes] | None = None
        self._inflight_spooled = False
        self._flush_asked = 0
        self._flush_done = 0
        self._flush_ok = False
        self._retry_at = 0.0
        self._failures = 0
        self._scan_at = 0.0  # at once: pick up what earlier processes left behind
        self._stopping = False
        self._closed = False
        self._warned_full = False
        self._delivered = 0
        self._spooled = 0
        self._rejected = 0
        self._dropped = 0

        self._thread = threading.Thread(target=self._run, name="onceover-emitter", daemon=True)
        self._thread.start()
        _instances.add(self)

    # -- what callers use ---------------------------------------------------------------

    @property
    def spool_dir(self) -> Path:
        return self._spool.directory

    @property
    def delivered(self) -> int:
        """Events the backend acknowledged (one sent twice counts twice)."""
        with self._lock:
            return self._delivered

    @property
    def spooled(self) -> int:
        """Events written to the spool (they are sent from there later)."""
        with self._lock:
            return self._spooled

    @property
    def rejected(self) -> int:
        """Events the backend refused for good (kept in ``rejected.jsonl``)."""
        with self._lock:
            return self._rejected

    @property
    def dropped(self) -> int:
        """Events lost because they could not be serialised or spooled."""
        with self._lock:
            return self._dropped

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def emit(self, event: Event) -> None:
        """Queue ``event``; never blocks on the network, never raises."""
        try:
            line = event.model_dump_json().encode()
        except Exception:
            logger.exception("cannot serialise event %r; dropped", event)
            with self._lock:
                self._dropped += 1
            return
        with self._lock:
            seal = self._closed  # nobody else would hand that file over
            if self._closed:
                spill = [line]
            elif len(self._buffer) < self._max_buffered:
                self._buffer.append(line)
                size = len(self._buffer)
                if size == 1:
                    self._buffered_since = time.monotonic()
                    self._cond.notify()
                elif size == self._batch_size:
                    self._cond.notify()
                return
            else:
                # Full: the backend is slower than the job. Spill the whole buffer (one
                # write and one fsync per buffer-full, not per event) rather than block.
                spill = [*self._buffer, line]
                self._buffer.clear()
                warn, self._warned_full = not self._warned_full, True
                if warn:
                    logger.warning(
                        "event buffer full (%d events): spilling to %s; the control plane "
                        "at %s is slower than the job",
                        self._max_buffered,
                        self._spool.directory,
                        self.url,
                    )
        self._to_spool(spill, seal=seal)

    def flush(self, timeout_s: float) -> bool:
        """Deliver what is buffered and spooled, within ``timeout_s``.

        What is not delivered by then is in the spool when this returns. True when
        nothing is left to deliver: every event was stored, or refused for good (those
        are counted in :attr:`rejected` and logged; a flush cannot tell whose they were).
        """
        timeout_s = max(0.0, timeout_s)
        deadline = time.monotonic() + timeout_s - min(0.2 * timeout_s, _SPOOL_RESERVE_S)
        with self._cond:
            if not self._closed and self._thread.is_alive():
                self._flush_asked += 1
                wanted = self._flush_asked
                self._cond.notify_all()
                while self._flush_done < wanted:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._flush_done >= wanted:
                    return self._flush_ok
            spill = list(self._buffer)
            self._buffer.clear()
            if self._inflight is not None and not self._inflight_spooled:
                spill[:0] = self._inflight
                self._inflight_spooled = True
        self._to_spool(spill, seal=True)
        self._spool.seal()
        return False

    def close(self, timeout_s: float) -> None:
        """Flush for up to ``timeout_s`` and stop the thread; later events go to the spool."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        if self.closed:
            return
        self.flush(timeout_s)
        with self._cond:
            self._closed = self._stopping = True
            spill = list(self._buffer)  # emitted after the flush ended
            self._buffer.clear()
            self._cond.notify_all()
        self._to_spool(spill, seal=True)
        self._thread.join(max(0.05, deadline - time.monotonic()))
        self._spool.seal()

    # -- the sender thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._step():
                pass
        finally:
            self._client.close()

    def _step(self) -> bool:
        """Wait for something to do, do it; False when stopping."""
        with self._cond:
            while True:
                if self._stopping:
                    return False
                now = time.monotonic()
                flush_to, limit = self._flush_asked, len(self._buffer)
                if flush_to > self._flush_done:
                    break
                flush_to = 0
                backing_off = now < self._retry_at
                scan = not backing_off and now >= self._scan_at
                due = self._buffered_since + self._interval if self._buffer else float("inf")
                if scan or (self._buffer and (len(self._buffer) >= self._batch_size or now >= due)):
                    break
                self._cond.wait(min(due, self._retry_at if backing_off else self._scan_at) - now)
        try:
            if flush_to:
                self._flush_cycle(flush_to, limit)
            elif backing_off:
                self._spool_buffer()  # so a crash during the outage loses at most this interval
            else:
                self._drain(scan=scan, limit=None)
        except Exception:  # a bug here must not stop delivery: spool and carry on
            logger.exception("event sender failed; retrying")
            self._spool_buffer()
            with self._lock:
                self._note_failure(None)
        return True

    def _flush_cycle(self, flush_to: int, limit: int) -> None:
        with self._lock:
            self._retry_at = 0.0  # whoever flushes wants an attempt now, not after the backoff
        ok = self._drain(scan=True, limit=limit)
        if not ok:
            self._spool_buffer()
        self._spool.seal()
        with self._cond:
            self._flush_done = flush_to
            self._flush_ok = ok
            self._cond.notify_all()

    def _drain(self, *, scan: bool, limit: int | None) -> bool:
        """Send the spool (oldest first), then the buffer (at most ``limit`` events).
        False if the backend turned out unreachable."""
        try:
            if scan:
                self._drain_spool()
            self._drain_buffer(limit)
        except _UnreachableError:
            return False
        return True

    def _drain_spool(self) -> None:
        self._spool.seal()
        for claim in self._spool.claims():
            try:
                self._send_claim(claim)
            except BaseException:
                claim.release()
                raise
        with self._lock:
            self._scan_at = time.monotonic() + _RESCAN_S

    def _send_claim(self, claim: _Claim) -> None:
        lines, unreadable = _parse_spool(claim.read())
        if unreadable:
            self._reject(unreadable, None, f"unreadable lines in spool file {claim.path.name}")
        for start in range(0, len(lines), self._batch_size):
            end = start + self._batch_size
            try:
                if self._stopping_now():
                    raise _UnreachableError(lines[start:end])
                self._deliver(lines[start:end])
            except _UnreachableError as exc:
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
            with self._lock:
                if not self._buffer:
                    return
                take = min(self._batch_size, len(self._buffer))
                if limit is not None:
                    take = min(take, limit - sent)
                batch = [self._buffer.popleft() for _ in range(take)]
                self._inflight, self._inflight_spooled = batch, False
            try:
                self._deliver(batch)
            except BaseException as exc:  # a surprise too: the batch is in no file yet
                with self._lock:
                    spooled, self._inflight = self._inflight_spooled, None
                if not spooled:  # else a flush that timed out has spooled the whole batch
                    self._to_spool(exc.undelivered if isinstance(exc, _UnreachableError) else batch)
                raise
            with self._lock:
                self._inflight = None
            sent += take

    def _spool_buffer(self) -> None:
        with self._lock:
            lines = list(self._buffer)
            self._buffer.clear()
        self._to_spool(lines)

    def _stopping_now(self) -> bool:
        with self._lock:
            return self._stopping

    def _to_spool(self, lines: list[bytes], *, seal: bool = False) -> None:
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
            with self._lock:
                self._dropped += len(lines)
            return
        with self._lock:
            self._spooled += len(lines)
            self._scan_at = 0.0  # send them as soon as the backend answers

    # -- one POST -----------------------------------------------------------------------

    def _deliver(self, lines: list[bytes]) -> None:
        """Post ``lines`` until each is stored or refused for good.

        Raises ``_UnreachableError(undelivered_lines)`` when the backend is unreachable.
        """
        while lines:
            try:
                response = self._client.post(EVENTS_PATH, content=b"[" + b",".join(lines) + b"]")
            except Exception as exc:  # httpx's errors, and any surprise: keep the batch
                with self._lock:
                    self._note_failure(f"{type(exc).__name__}: {exc}".rstrip(": "))
                raise _UnreachableError(lines) from None
            status = response.status_code
            if 200 <= status < 300:
                with self._lock:
                    if self._failures:
                        logger.info("control plane at %s reachable again", self.url)
                    self._failures, self._retry_at = 0, 0.0
                    self._delivered += len(lines)
                return
            if status in (408, 429) or status >= 500:
                with self._lock:
                    self._note_failure(f"HTTP {status}", _retry_after(response))
                raise _UnreachableError(lines)
            if status == 413 and len(lines) > 1:
                # Over the backend's body limit: each half on its own, in order.
                half = len(lines) // 2
                try:
                    self._deliver(lines[:half])
                except _UnreachableError as exc:
                    raise _UnreachableError([*exc.undelivered, *lines[half:]]) from None
                lines = lines[half:]
                continue
            bad, problem = _problems(response, len(lines))
            if status == 422 and 0 < len(bad) < len(lines):
                self._reject([lines[i] for i in sorted(bad)], status, problem)
                lines = [line for i, line in enumerate(lines) if i not in bad]
                continue  # the rest of the batch is fine: send it again without the bad ones
            self._reject(lines, status, problem)
            return

    def _note_failure(self, reason: str | None, retry_after: float | None = None) -> None:
        """Back off before the next attempt (called with _lock held)."""
        self._failures += 1
        delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** min(self._failures - 1, 16))
        # Jitter, so the workers of a cluster do not all come back in the same instant.
        delay = delay / 2 + random.uniform(0, delay / 2)  # noqa: S311 - not cryptography
        if retry_after is not None:
            delay = max(delay, min(retry_after, _BACKOFF_CAP_S))
        self._retry_at = time.monotonic() + delay
        if self._failures == 1 and reason is not None:
            logger.warning(
                "control plane at %s unreachable (%s): spooling events to %s and retrying",
                self.url,
                reason,
                self._spool.directory,
            )
        else:
            logger.debug("control plane still unreachable (%s), attempt %d", reason, self._failures)

    def _reject(self, lines: list[bytes], status: int | None, problem: str) -> None:
        head = json.dumps(
            {"rejected_at": datetime.now(UTC).isoformat(), "status": status, "problem": problem}
        ).encode()
        if status is None:  # not JSON: kept as text
            events = json.dumps([line.decode(errors="replace") for line in lines]).encode()
            record = head[:-1] + b', "unreadable": ' + events + b"}"
        else:
            record = head[:-1] + b', "events": [' + b",".join(lines) + b"]}"
        where: object = self._spool.rejected_path
        try:
            self._spool.reject(record)
        except OSError as exc:
            where = f"nowhere ({exc})"
        logger.error(
            "control plane at %s refused %d events with %s: %s; kept in %s",
            self.url,
            len(lines),
            "no status" if status is None else f"HTTP {status}",
            problem,
            where,
        )
        with self._lock:
            self._rejected += len(lines)

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists in the child: the sender is gone and the locks
        # may be held by threads that no longer exist. The buffer's events belong to the
        # parent, which sends them. What this child emits goes straight to the spool.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buffer = collections.deque()
        self._inflight = None
        self._closed = self._stopping = True
        self._spool.forget_after_fork()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def _problems(response: httpx.Response, size: int) -> tuple[set[int], str]:
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


# -- one emitter per backend per process ------------------------------------------------

_instances: weakref.WeakSet[EventEmitter] = weakref.WeakSet()
_emitters: dict[tuple[str, str | None], EventEmitter] = {}
_emitters_lock = threading.Lock()


def default_spool_root() -> Path:
    """``$ONCEOVER_SPOOL_DIR``, else ``<temp dir>/onceover-spool``."""
    configured = os.environ.get(SPOOL_DIR_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "onceover-spool"


def emitter_for(
    url: str | None, token: str | None, spool_dir: Path | None = None
) -> EventEmitterLike:
    """The process's emitter for ``url`` and ``token`` (a :class:`NullEmitter` without url).

    Spark reuses Python workers across tasks, so one emitter serves them all. Its spool
    is a subdirectory of ``spool_dir`` (default :func:`default_spool_root`) named after
    the URL, so spooled events only ever go to the backend they were meant for. Never
    raises: an emitter that cannot be built is logged and replaced by a NullEmitter.
    """
    if not url:
        return NullEmitter()
    key = (url, token)
    with _emitters_lock:
        emitter = _emitters.get(key)
        if emitter is not None and not emitter.closed:
            return emitter
        root = spool_dir if spool_dir is not None else default_spool_root()
        backend = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
        try:
            emitter = EventEmitter(url, token, root / f"backend-{backend}")
        except Exception:
            logger.exception("cannot send events to %s; they are not recorded", url)
            return NullEmitter()
        _emitters[key] = emitter
        # Short: the job is over; what does not make it in time is spooled for later.
        atexit.register(emitter.close, ATEXIT_TIMEOUT_S)
        return emitter


def _after_fork_in_child() -> None:
    global _emitters_lock  # noqa: PLW0603 - the parent's lock may be held at fork time
    _emitters_lock = threading.Lock()
    _emitters.clear()
    for emitter in list(_instances):
        emitter._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
