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
  is spooled, so the process may exit right after it. The write path's flushes (the end
  of a task, a commit) pass ``patience_s``: they wait for the receiver only while it
  answers within that, and spool at once when it has been slow, so a slow or
  unreachable control plane costs a write one spool write, not the flush's timeout.
* Every emitter on a machine may send every spool file in its directory. A file being
  appended to (``*.open.<pid>``) or sent (``*.sending.<pid>``) is held with an
  exclusive ``flock``; a sender claims a file by locking it and then renaming it, and
  deletes it only after a 2xx. The kernel drops the locks of a dead process, so the
  next emitter takes over its files, even one it was still writing (a torn last line
  is set aside in ``rejected.jsonl``).
* What goes over the wire is a :class:`Wire`: where a batch is posted, whether one
  request carries the batch (a JSON array, ``POST /api/events``) or one event (an
  OpenLineage receiver's ``POST /api/v1/lineage``), and what log lines call the
  receiver and its credential. The spool holds JSON objects either way: our
  :class:`onceover.events.Event` or a plain dict (an OpenLineage run event).
* :func:`emitter_for` gives each backend and token a directory of its own under a
  per-user root (:func:`default_spool_root`), so a file is only ever sent with the
  token it was spooled under, and one job's revoked token cannot touch another job's
  events. Files in ``shared_dirs`` (the layout from before, and where parked files are
  moved to be sent again) are sent by any emitter whose token the backend accepts.
* A batch over the backend's body limit (413) is sent again in halves; one event
  over it on its own is refused for good.
* A refused token (401, 403) *parks* the batch: its events are moved, as spool files,
  to ``parked/`` in the spool dir, logged once with the jobs and runs they belong to,
  and not sent again until someone moves them back (see docs/sink.md).
* Any other refusal for good (3xx, or a 4xx other than 408/429) is not retried: it is
  logged with the status and the first problem the body names, and the refused events
  are kept in ``rejected.jsonl`` in the spool dir. When a 422 names the bad events by
  index (``detail[].loc == ["body", i, ...]``), the rest of the batch is sent again.

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
import shlex
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from onceover.errors import ConfigurationError

if TYPE_CHECKING:
    # Imported where an emitter is made, not here: a write without a monitor never
    # makes one, and its commit worker should not pay for httpx or the event schema.
    import httpx

    from onceover.events import Event

logger = logging.getLogger(__name__)

EVENTS_PATH = "/api/events"
SPOOL_DIR_ENV = "ONCEOVER_SPOOL_DIR"
REJECTED_FILE = "rejected.jsonl"
PARKED_DIR = "parked"
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
WRITE_PATH_PATIENCE_S = 0.25
"""How long a flush on the write path waits for the receiver's answer (``patience_s``):
well above what a healthy control plane takes to store a batch, well below a write."""


Payload: TypeAlias = "Event | Mapping[str, Any]"
"""What an emitter sends: one of our events, or any JSON object (an OpenLineage event)."""


@dataclass(frozen=True)
class Wire:
    """What the receiver at the other end takes, and what log lines call it.

    ``path``: where batches are posted, relative to the emitter's URL or absolute.
    ``one_per_request``: each event is the whole body of its own POST (OpenLineage's
    HTTP transport) rather than a JSON array of up to ``batch_size`` (ours).
    """

    path: str = EVENTS_PATH
    one_per_request: bool = False
    receiver: str = "control plane"
    credential: str = "token (monitor.token, --monitor-token)"
    spool_folder: str | None = None
    """A folder of the spool root for this wire's spools alone (None: the root itself),
    so a spooled event is only ever sent the way it was meant to go."""

    def body(self, lines: Sequence[bytes]) -> bytes:
        if self.one_per_request:
            assert len(lines) == 1, "one event a request"
            return lines[0]
        return b"[" + b",".join(lines) + b"]"


CONTROL_PLANE = Wire()
"""The control plane's ``POST <url>/api/events``."""


def serialise(event: Payload) -> bytes:
    """One spool line: the event as compact JSON (never a newline inside)."""
    if isinstance(event, Mapping):
        return json.dumps(event, separators=(",", ":"), allow_nan=False).encode()
    return event.model_dump_json().encode()


class EventEmitterLike(Protocol):
    """What the sink needs from an emitter; :class:`NullEmitter` is the do-nothing one."""

    def emit(self, event: Payload) -> None: ...
    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool: ...
    def close(self, timeout_s: float) -> None: ...
    @property
    def delivered(self) -> int: ...
    @property
    def spooled(self) -> int: ...
    @property
    def rejected(self) -> int: ...
    @property
    def parked(self) -> int: ...


class NullEmitter:
    """The emitter when no ``monitor.url`` is set: accepts events and forgets them."""

    def emit(self, event: Payload) -> None:
        pass

    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool:
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

    @property
    def parked(self) -> int:
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

    def park(self, folder: Path) -> Path:
        """Its token was refused: move it whole into ``folder`` under its pending name,
        where nothing sends it (raises ``OSError``, the claim still held, if it cannot)."""
        folder.mkdir(mode=0o700, exist_ok=True)
        parked = folder / self.pending.name
        if parked.exists():  # parked before, put back and refused again: keep both
            parked = folder / f"{self.pending.stem}-{time.time_ns()}.jsonl"
        os.rename(self.path, parked)
        _fsync_dir(folder)
        self.finished = True
        self.spool.let_go(self.fd)
        return parked


class _Spool:
    """JSON-lines files in one directory, shared by every emitter on the machine.

    ``owner``: take only files that uid owns (a folder others may have written to).
    ``create=False``: a folder only drained, never made.
    """

    def __init__(self, directory: Path, *, owner: int | None = None, create: bool = True) -> None:
        self.directory = directory
        self.rejected_path = directory / REJECTED_FILE
        self.parked_dir = directory / PARKED_DIR
        self._owner = owner
        self._lock = threading.Lock()
        self._open: _OpenFile | None = None
        self._held: set[int] = set()  # fds of claims, closed in a forked child
        self._seq = itertools.count()
        if create:
            try:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
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
        except (FileNotFoundError, NotADirectoryError, PermissionError):
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

    def park(self, lines: Sequence[bytes]) -> Path:
        """Write ``lines`` as a spool file in ``parked/``, where nothing sends them;
        raises ``OSError`` if the disk refuses them."""
        self.parked_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        pid = os.getpid()
        name = f"events-{time.time_ns():020d}-{pid}-{next(self._seq):06d}.jsonl"
        hidden = self.parked_dir / f".{name}.new"
        fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        path = self.parked_dir / name
        os.rename(hidden, path)
        _fsync_dir(self.parked_dir)
        return path

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
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone meanwhile, a symbolic link, or not ours to read
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or self._owner not in (None, info.st_uid):
            os.close(fd)
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


class _RefusedTokenError(Exception):
    """The backend refused the token (401, 403); carries the events it did not take."""

    def __init__(self, undelivered: list[bytes], status: int, problem: str) -> None:
        super().__init__(f"HTTP {status}: {problem}")
        self.undelivered = undelivered
        self.status = status


class EventEmitter:
    """Posts events to ``<url>/api/events`` (or where ``wire`` says) from a background
    thread, spooling to ``spool_dir`` while the backend is unreachable. ``emit()`` never
    blocks on the network and never raises; see the module docstring for the guarantees.

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
        self._shared = [_Spool(Path(d), owner=os.getuid(), create=False) for d in shared_dirs]
        self._replay_dir = Path(shared_dirs[0]) if shared_dirs else self._spool.directory

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
        # When the POST under way started (None: none is), and how long the last one
        # took: whether the receiver is answering promptly (flush's patience_s).
        self._posting_since: float | None = None
        self._last_post_s = 0.0
        self._scan_at = 0.0  # at once: pick up what earlier processes left behind
        self._stopping = False
        self._closed = False
        self._warned_full = False
        self._delivered = 0
        self._spooled = 0
        self._rejected = 0
        self._parked = 0
        self._dropped = 0
        # The backend refused the token (and has taken no batch since); the refusal
        # was logged.
        self._token_refused = False
        self._told_parked = False

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
    def parked(self) -> int:
        """Events set aside in ``parked/`` because the backend refused the token."""
        with self._lock:
            return self._parked

    @property
    def dropped(self) -> int:
        """Events lost because they could not be serialised or spooled."""
        with self._lock:
            return self._dropped

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def emit(self, event: Payload) -> None:
        """Queue ``event``; never blocks on the network, never raises."""
        try:
            line = serialise(event)
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
                        "event buffer full (%d events): spilling to %s; the %s "
                        "at %s is slower than the job",
                        self._max_buffered,
                        self._spool.directory,
                        self.wire.receiver,
                        self.url,
                    )
        self._to_spool(spill, seal=seal)

    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool:
        """Deliver what is buffered and spooled, within ``timeout_s``.

        What is not delivered by then is in the spool when this returns. True when
        nothing is left to deliver: every event was stored, refused for good or parked
        (counted in :attr:`rejected` and :attr:`parked`, and logged; a flush cannot
        tell whose they were).

        With ``patience_s``, it waits only while the receiver answers promptly: not at
        all when its last answer took longer than ``patience_s``, and no longer than
        that for the POST under way. The events are then spooled (one write, fsynced)
        and sent from there in the background: a slow control plane must not slow the
        write that flushes (the sink passes :data:`WRITE_PATH_PATIENCE_S`).
        """
        timeout_s = max(0.0, timeout_s)
        deadline = time.monotonic() + timeout_s - min(0.2 * timeout_s, _SPOOL_RESERVE_S)
        with self._cond:
            if not self._closed and self._thread.is_alive():
                self._flush_asked += 1
                wanted = self._flush_asked
                self._cond.notify_all()
                while self._flush_done < wanted:
                    now = time.monotonic()
                    remaining = deadline - now
                    if patience_s is not None:
                        remaining = min(remaining, self._patience_left(patience_s, now))
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

    def _patience_left(self, patience_s: float, now: float) -> float:
        """How much longer a patient flush waits (called with _lock held): nothing once
        the receiver has been slow, else until the POST under way turns slow."""
        if self._last_post_s > patience_s:
            return 0.0
        if self._posting_since is None:
            return patience_s  # the sender is about to post: wait for that one
        return self._posting_since + patience_s - now

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
            except _RefusedTokenError as exc:
                self._refused_claim(claim, lines, exc)
                return
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
            except _RefusedTokenError as exc:
                with self._lock:
                    spooled, self._inflight = self._inflight_spooled, None
                if not spooled:  # else it is parked when the spool is sent
                    self._park(exc.undelivered, exc)
                sent += take
                continue
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

    def _may_send_from(self, spool: _Spool) -> bool:
        """Our own spool, always; a shared one only while our token is accepted (its
        files may be anyone's, and a refused token would park them as ours)."""
        with self._lock:
            return spool is self._spool or not self._token_refused

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
        if not self.wire.one_per_request:
            self._post(lines)
            return
        for at, line in enumerate(lines):  # in order: a refusal keeps the rest for later
            try:
                self._post([line])
            except (_UnreachableError, _RefusedTokenError) as exc:
                exc.undelivered = [*exc.undelivered, *lines[at + 1 :]]
                raise

    def _post(self, lines: list[bytes]) -> None:
        """:meth:`_deliver` of what one request carries (all of ``lines``, halved on a 413)."""
        while lines:
            with self._lock:
                self._posting_since = started = time.monotonic()
            try:
                response = self._client.post(self.wire.path, content=self.wire.body(lines))
            except Exception as exc:  # httpx's errors, and any surprise: keep the batch
                with self._lock:
                    self._post_ended(started)
                    self._note_failure(f"{type(exc).__name__}: {exc}".rstrip(": "))
                raise _UnreachableError(lines) from None
            with self._lock:
                self._post_ended(started)
            status = response.status_code
            if 200 <= status < 300:
                with self._lock:
                    if self._failures:
                        logger.info("%s at %s reachable again", self.wire.receiver, self.url)
                    self._failures, self._retry_at = 0, 0.0
                    self._token_refused, self._told_parked = False, False
                    self._delivered += len(lines)
                return
            if status in (401, 403):
                # The events are fine and the token is not: kept whole, to send once fixed.
                problem = _problems(response, len(lines))[1]
                with self._lock:
                    self._token_refused = True
                raise _RefusedTokenError(lines, status, problem)
            if status in (408, 429) or status >= 500:
                with self._lock:
                    self._note_failure(f"HTTP {status}", _retry_after(response))
                raise _UnreachableError(lines)
            if status == 413 and len(lines) > 1:
                # Over the backend's body limit: each half on its own, in order.
                half = len(lines) // 2
                try:
                    self._post(lines[:half])
                except (_UnreachableError, _RefusedTokenError) as exc:
                    exc.undelivered = [*exc.undelivered, *lines[half:]]
                    raise
                lines = lines[half:]
                continue
            bad, problem = _problems(response, len(lines))
            if status == 422 and 0 < len(bad) < len(lines):
                self._reject([lines[i] for i in sorted(bad)], status, problem)
                lines = [line for i, line in enumerate(lines) if i not in bad]
                continue  # the rest of the batch is fine: send it again without the bad ones
            self._reject(lines, status, problem)
            return

    def _post_ended(self, started: float) -> None:
        """Note how long the POST begun at ``started`` took (called with _lock held)."""
        self._last_post_s = time.monotonic() - started
        self._posting_since = None

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
                "%s at %s unreachable (%s): spooling events to %s and retrying",
                self.wire.receiver,
                self.url,
                reason,
                self._spool.directory,
            )
        else:
            logger.debug(
                "%s still unreachable (%s), attempt %d", self.wire.receiver, reason, self._failures
            )

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
            "%s at %s refused %d events with %s: %s; kept in %s",
            self.wire.receiver,
            self.url,
            len(lines),
            "no status" if status is None else f"HTTP {status}",
            problem,
            where,
        )
        with self._lock:
            self._rejected += len(lines)

    def _park(self, lines: list[bytes], refusal: _RefusedTokenError) -> None:
        """Set aside events of ours the backend refused for their token."""
        try:
            path = self._spool.park(lines)
        except OSError as exc:
            logger.error(
                "cannot park %d events refused with %s in %s, they are lost: %s",
                len(lines),
                refusal,
                self._spool.parked_dir,
                exc,
            )
            with self._lock:
                self._dropped += len(lines)
            return
        self._parked_events(lines, path.parent, refusal)

    def _refused_claim(
        self, claim: _Claim, lines: list[bytes], refusal: _RefusedTokenError
    ) -> None:
        if claim.spool is not self._spool:
            claim.release()
            logger.warning(
                "%s at %s refused this job's token (%s): %s left where it is, "
                "for a job whose token it accepts",
                self.wire.receiver,
                self.url,
                refusal,
                claim.pending,
            )
            return
        # Moved whole, the part stored before the refusal too: sending that again is
        # harmless (stored once by id), and a rename cannot lose the rest.
        try:
            parked = claim.park(self._spool.parked_dir)
        except OSError as exc:
            claim.release()
            logger.error("cannot park spool file %s (left in the spool): %s", claim.path, exc)
            return
        self._parked_events(lines, parked.parent, refusal)

    def _parked_events(self, lines: list[bytes], folder: Path, refusal: _RefusedTokenError) -> None:
        with self._lock:
            self._parked += len(lines)
            first, self._told_parked = not self._told_parked, True
        if not first:  # one line says it all; later batches of the same job go quietly
            logger.debug("parked %d more events in %s", len(lines), folder)
            return
        replay = shlex.quote(str(self._replay_dir))
        logger.error(
            "%s at %s refused this job's token (%s): %d events of %s parked in "
            "%s and not sent again. Fix the job's %s; "
            "then send them with: mkdir -p %s && mv %s/events-* %s/",
            self.wire.receiver,
            self.url,
            refusal,
            len(lines),
            _whose(lines),
            folder,
            self.wire.credential,
            replay,
            shlex.quote(str(folder)),
            replay,
        )

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists in the child: the sender is gone and the locks
        # may be held by threads that no longer exist. The buffer's events belong to the
        # parent, which sends them. What this child emits goes straight to the spool.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buffer = collections.deque()
        self._inflight = None
        self._closed = self._stopping = True
        for spool in [self._spool, *self._shared]:
            spool.forget_after_fork()


def _whose(lines: list[bytes], most: int = 3) -> str:
    """Whose events these are, for a log line: "job 'orders' (run r1)"."""
    jobs: dict[str, None] = {}  # in order of appearance
    runs: dict[str, None] = {}
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                job, run = event.get("job"), event.get("run_id")
                if isinstance(job, dict):  # an OpenLineage event: job and run are objects
                    job = job.get("name")
                    run = (event.get("run") or {}).get("runId")
                for names, value in ((jobs, job), (runs, run)):
                    if isinstance(value, str):
                        names[value] = None

    def listed(kind: str, names: list[str]) -> str:
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names[:most])}{more}"

    job = listed("job", [repr(name) for name in jobs]) if jobs else "a job without a name"
    return f"{job} ({listed('run', list(runs))})" if runs else job


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
_emitters: dict[tuple[str, str | None, Wire], EventEmitter] = {}
_emitters_lock = threading.Lock()


def default_spool_root() -> Path:
    """Where spools go: ``$ONCEOVER_SPOOL_DIR``; else ``$XDG_STATE_HOME/onceover/spool``
    (``~/.local/state/onceover/spool``), the ``onceover`` folder made private (0700);
    else, without a home to write in, ``<tmp>/onceover-<uid>/spool``.

    Raises :class:`ConfigurationError` naming ``<tmp>/onceover-<uid>`` when it is not
    this user's own private folder: another user could read events there, or plant
    some for this job's token to send.
    """
    configured = os.environ.get(SPOOL_DIR_ENV)
    if configured:
        return Path(configured)
    state = os.environ.get("XDG_STATE_HOME", "")
    try:
        # The XDG spec ignores a relative XDG_STATE_HOME.
        home = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
        base = home / "onceover"
        base.parent.mkdir(parents=True, exist_ok=True)
        base.mkdir(mode=0o700, exist_ok=True)
    except (OSError, RuntimeError):  # no home, or none to write in (HOME=/nonexistent)
        base = _private_temp_folder(Path(tempfile.gettempdir()) / f"onceover-{os.getuid()}")
    spool = base / "spool"
    spool.mkdir(mode=0o700, exist_ok=True)
    return spool


def _private_temp_folder(folder: Path) -> Path:
    """``folder`` in a directory every user writes in, made or checked to be ours alone."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    uid = os.getuid()
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != uid:
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {uid})"
    elif info.st_mode & 0o022:
        problem = f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        raise ConfigurationError(
            f"refusing to spool events in {folder}: it {problem}, so others could read "
            f"this job's events or plant some for its token to send; remove it, or set "
            f"{SPOOL_DIR_ENV} to a folder only this user can write"
        )
    if info.st_mode & 0o077:  # ours, but readable by others: events name jobs and tables
        folder.chmod(0o700)
    return folder


def spool_dirs(root: Path, url: str, token: str | None) -> tuple[Path, Path]:
    """The spool of ``url`` and ``token`` under ``root``, and the folder of that backend
    any token may send (the layout before spools were per token; parked files are
    moved there to be sent again)."""
    backend = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    shared = root / f"backend-{backend}"
    if not token:
        return shared.with_name(f"{shared.name}-no-token"), shared
    # A hash, not the token: folder names show in logs and listings.
    digest = hashlib.sha256(f"{backend}\0{token}".encode()).hexdigest()[:16]
    return shared.with_name(f"{shared.name}-token-{digest}"), shared


def emitter_for(
    url: str | None,
    token: str | None,
    spool_dir: Path | None = None,
    *,
    wire: Wire = CONTROL_PLANE,
) -> EventEmitterLike:
    """The process's emitter for ``url``, ``token`` and ``wire`` (a :class:`NullEmitter`
    without url).

    Spark reuses Python workers across tasks, so one emitter serves them all. Its spool
    is a subdirectory of ``spool_dir`` (default :func:`default_spool_root`; the wire's
    ``spool_folder`` of it, if it has one) named after the URL and the token
    (:func:`spool_dirs`), so spooled events only ever go to the backend they were meant
    for, with the token they were emitted with. Never raises: an emitter that cannot be
    built is logged and replaced by a NullEmitter.
    """
    if not url:
        return NullEmitter()
    key = (url, token, wire)
    with _emitters_lock:
        emitter = _emitters.get(key)
        if emitter is not None and not emitter.closed:
            return emitter
        try:
            root = spool_dir if spool_dir is not None else default_spool_root()
            if wire.spool_folder is not None:
                root = root / wire.spool_folder
            own, shared = spool_dirs(root, url, token)
            drained = [shared]
            if wire == CONTROL_PLANE and spool_dir is None and not os.environ.get(SPOOL_DIR_ENV):
                # The default before it was per user; only this user's files are taken.
                old = spool_dirs(Path(tempfile.gettempdir()) / "onceover-spool", url, token)[1]
                drained += [old] if old != shared else []
            emitter = EventEmitter(url, token, own, shared_dirs=drained, wire=wire)
        except ConfigurationError as exc:
            logger.error("cannot send events to %s; they are not recorded: %s", url, exc)
            return NullEmitter()
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
