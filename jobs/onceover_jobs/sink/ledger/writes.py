"""Writing one ledger file in one step: a temporary file, fsync, then a rename (or a
link, when only the first writer may win), then fsync of the directory. A crash leaves
the old file or the new one, never half of one (the format: onceover.ledger_files).

How much of that is on disk when a call returns is the caller's to say (:class:`Sync`);
an fsync is most of a write's cost (docs/journal/profiling.md). Readers on other
hosts of a shared ledger see a file after ``close`` whatever was synced, as they see
the others (NFS's close-to-open consistency)."""

from __future__ import annotations

import json
import os
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any

from onceover.ledger_files import LEDGER_VERSION


class Sync(Enum):
    """What of a write is on disk when it returns."""

    DURABLE = "durable"
    """The content, then the name (fsync of the file and of its directory): a record that
    must survive a crash of the machine (an intent before its commit: invariant 3)."""
    WHOLE = "whole"
    """The content only: after a crash of the machine the file holds the new payload or
    the old, never half, but may hold the old. For a record whose loss is settled from
    elsewhere (a committed mark: the intent before it is settled from BigQuery)."""
    NONE = "none"
    """Neither: for files that matter only while the driver that wrote them lives (a
    probe, the write ordinals of a driver session, a driver's claim), since a crash of
    its machine ends that driver too."""


def write_exclusively(path: Path, payload: dict[str, Any], *, sync: Sync = Sync.DURABLE) -> bool:
    """Create ``path`` holding ``payload``; False if it exists (another writer won)."""
    return write_atomically(path, payload, exclusive=True, sync=sync)


def write_replacing(path: Path, payload: dict[str, Any], *, sync: Sync = Sync.DURABLE) -> None:
    """Write ``path`` holding ``payload``, replacing what it held."""
    write_atomically(path, payload, sync=sync)


def write_atomically(
    path: Path, payload: dict[str, Any], *, exclusive: bool = False, sync: Sync = Sync.DURABLE
) -> bool:
    """Write ``payload`` as ``path`` in one step; with ``exclusive``, only if it is absent;
    what is on disk when it returns: ``sync``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"version": LEDGER_VERSION, **payload}, sort_keys=True).encode()
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync is not Sync.NONE:
                os.fsync(handle.fileno())
        if exclusive:
            try:
                os.link(temp, path)  # fails if another attempt created it first
            except FileExistsError:
                return False
        else:
            os.replace(temp, path)
        if sync is Sync.DURABLE:
            fsync_directory(path.parent)
        return True
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
