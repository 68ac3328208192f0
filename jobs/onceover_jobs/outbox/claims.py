"""A spool file claimed by one sender: locked first, then renamed to ``*.sending.<pid>``.

What a claim guarantees:

* Two processes never send one file at once. A sender takes the file's exclusive
  ``flock`` without waiting and only then renames it; whoever holds the lock owns the
  file, and the rename fails if its owner finished with it meanwhile.
* A dead sender's or writer's files are taken over: the kernel drops a dead process's
  locks, so its ``*.open.<pid>`` and ``*.sending.<pid>`` files become claimable.
* A claim ends once, one way: delivered (deleted, then unlocked, so nobody claims a
  file being deleted), released (renamed back to its pending name for whoever sends
  next), or parked (moved whole into a folder nothing sends from).
* Only regular files are taken, never a symbolic link, and in a folder other users may
  write to only the files of the expected owner.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from onceover_jobs.outbox.disk import fsync_dir


class FileHolder(Protocol):
    """What keeps track of the files this process holds (the spool a claim came from),
    so a forked child can close them without unlocking them."""

    def hold(self, fd: int) -> None: ...
    def let_go(self, fd: int) -> None: ...


@dataclass
class Claim:
    """A spool file this process holds (locked, renamed to ``*.sending.<pid>``)."""

    fd: int
    path: Path
    pending: Path
    spool: FileHolder
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
        fsync_dir(folder)
        self.finished = True
        self.spool.let_go(self.fd)
        return parked


def claim_file(
    directory: Path, name: str, pending: str, *, owner: int | None, holder: FileHolder
) -> Claim | None:
    """Claim ``directory/name`` (to be given back as ``pending``), or None when a live
    process holds it, it is gone, or it is not a regular file ``owner`` (if set) owns."""
    path = directory / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # gone meanwhile, a symbolic link, or not ours to read
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or owner not in (None, info.st_uid):
        os.close(fd)
        return None
    try:
        # Lock first, rename second: whoever holds the lock owns the file, and a
        # dead owner's lock is gone, which is what makes its file ours to take.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        claimed = directory / f"{pending}.sending.{os.getpid()}"
        os.rename(path, claimed)  # fails if its owner finished with it meanwhile
    except OSError:
        os.close(fd)
        return None
    holder.hold(fd)
    return Claim(fd, claimed, directory / pending, holder)
