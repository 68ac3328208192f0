"""Writes that outlive a crash: every byte written, and the folder fsynced after a rename
so the new name is on disk too."""

from __future__ import annotations

import os
from pathlib import Path


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (``os.write`` may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(directory: Path) -> None:
    """Make the names created or renamed in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
