"""Writing one ledger file in one step: a temporary file, fsync, then a rename (or a
link, when only the first writer may win), then fsync of the directory. A crash leaves
the old file or the new one, never half of one (the format: onceover.ledger_files).

``durable=False`` keeps the one step and leaves out both fsyncs (5 to 50 ms each on the
machines measured, docs/profiling.md), for files whose loss in a crash of the machine
costs nothing: files that matter only while the driver that wrote them lives (a probe,
the write ordinals of a driver session, a driver's claim), since such a crash ends that
driver too. Readers on other hosts of a shared ledger see them after ``close``, as they
see the others (NFS's close-to-open consistency)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from onceover.ledger_files import LEDGER_VERSION


def write_exclusively(path: Path, payload: dict[str, Any], *, durable: bool = True) -> bool:
    """Create ``path`` holding ``payload``; False if it exists (another writer won)."""
    return write_atomically(path, payload, exclusive=True, durable=durable)


def write_replacing(path: Path, payload: dict[str, Any], *, durable: bool = True) -> None:
    """Write ``path`` holding ``payload``, replacing what it held."""
    write_atomically(path, payload, durable=durable)


def write_atomically(
    path: Path, payload: dict[str, Any], *, exclusive: bool = False, durable: bool = True
) -> bool:
    """Write ``payload`` as ``path`` in one step; with ``exclusive``, only if it is absent;
    ``durable``: on disk before this returns (the module docstring says when not)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"version": LEDGER_VERSION, **payload}, sort_keys=True).encode()
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if exclusive:
            try:
                os.link(temp, path)  # fails if another attempt created it first
            except FileExistsError:
                return False
        else:
            os.replace(temp, path)
        if durable:
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
