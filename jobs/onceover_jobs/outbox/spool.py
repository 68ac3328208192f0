"""The spool: JSON-lines files in one folder, shared by every emitter on the machine.

What it guarantees:

* An event appended is on disk when :meth:`Spool.append` returns (written, then
  fsynced), so it outlives a crash of the process or the machine.
* A file being appended to is named ``*.open.<pid>`` and held with an exclusive
  ``flock``; it is created under a hidden name and locked before it gets that name, so
  a scanner never finds it unlocked and takes it for a dead writer's file.
* Once sealed (renamed to ``*.jsonl``: when it reaches ``ROTATE_LINES``, on a flush,
  on close) any sender may claim it (:mod:`onceover_jobs.outbox.claims`); names start
  with the time they were made, so files are sent oldest first.
* ``rejected.jsonl`` takes one write per record with ``O_APPEND``: processes share it
  without mixing their records. A parked file is written under a hidden name and
  renamed, so ``parked/`` never holds half a file.
* Across fork the child closes the parent's files without unlocking them
  (:meth:`Spool.forget_after_fork`): a ``flock`` belongs to the open file description,
  which the parent still uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from onceover_jobs.outbox.claims import Claim, claim_file
from onceover_jobs.outbox.disk import fsync_dir, write_all

logger = logging.getLogger(__name__)

REJECTED_FILE = "rejected.jsonl"
PARKED_DIR = "parked"
# Keeps a spool file small enough to read whole while the backend is down for long.
ROTATE_LINES = 10_000


@dataclass
class _OpenFile:
    fd: int
    path: Path  # events-<stamp>-<pid>-<seq>.jsonl.open.<pid>
    sealed: Path  # events-<stamp>-<pid>-<seq>.jsonl
    lines: int = 0


class Spool:
    """The spool files of one folder.

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
                write_all(current.fd, data)
                os.fsync(current.fd)
            except OSError:
                # What was written stays readable; a torn last line is set aside on reading.
                self._seal_locked()
                raise
            current.lines += len(lines)
            if seal or current.lines >= ROTATE_LINES:
                self._seal_locked()

    def seal(self) -> None:
        """Hand the file being appended to over to any sender."""
        with self._lock:
            self._seal_locked()

    def claims(self) -> Iterator[Claim]:
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
            claim = claim_file(
                self.directory, name, f"{stem}.jsonl", owner=self._owner, holder=self
            )
            if claim is not None:
                yield claim

    def reject(self, record: bytes) -> None:
        """Add ``record`` to ``rejected.jsonl``; raises ``OSError`` if the disk refuses it."""
        # O_APPEND and one write per record: emitters of several processes share the file.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(self.rejected_path, flags, 0o600)
        try:
            write_all(fd, record + b"\n")
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
            write_all(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        path = self.parked_dir / name
        os.rename(hidden, path)
        fsync_dir(self.parked_dir)
        return path

    def hold(self, fd: int) -> None:
        """Note a claimed file's descriptor (closed in a forked child)."""
        with self._lock:
            self._held.add(fd)

    def let_go(self, fd: int) -> None:
        """Close a claimed file's descriptor, which drops its lock."""
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
            fsync_dir(self.directory)
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
            fsync_dir(self.directory)
        except OSError as exc:  # unlocked below, so the next scan reclaims it anyway
            logger.warning("could not seal spool file %s: %s", current.path, exc)
        finally:
            os.close(current.fd)
