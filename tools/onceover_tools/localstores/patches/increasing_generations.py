"""``increasing_generations``: each new generation of an object is greater than the last.

Cloud Storage gives an object a new generation number each time its data is written,
and a later write's generation is greater: a reader compares generations to know which
write it saw, and a swap (``ifGenerationMatch=<generation read>``) relies on a generation
never coming back.

gcp-storage-emulator 2026.7.19 takes ``time.time_ns()`` at each write: the wall clock,
which steps back when it is corrected, so a write could get a generation smaller than (or
equal to) the one it replaces. This patch makes it the wall clock's or one more than the
last generation this server gave, whichever is greater, so generations only grow, for
every object, across deletes too. (An object restored from soft delete keeps the
stand-in's own clock reading; the ledger never restores.)

Pinned by ``tests/localstores/test_gcs_patches.py``:
``test_each_write_gets_a_greater_generation``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from onceover_tools.localstores.patches.wrapping import Handler, wrap_handler

_lock = threading.Lock()
_last = 0


def next_generation(clock: Callable[[], int] = time.time_ns) -> int:
    """A generation greater than every one this server has given: ``clock()``, the wall
    clock in nanoseconds as the stand-in takes it, unless that is not greater."""
    global _last  # noqa: PLW0603 - one counter per server process
    with _lock:
        _last = max(clock(), _last + 1)
        return _last


def _make(original: Handler) -> Handler:
    def _make_object_resource(*args: Any, **kwargs: Any) -> Any:
        obj = original(*args, **kwargs)
        old, new = obj["generation"], str(next_generation())
        # The stand-in writes its clock reading into the id and the media link too.
        obj["generation"] = new
        obj["id"] = f"{obj['id'].rpartition('/')[0]}/{new}"
        obj["mediaLink"] = obj["mediaLink"].replace(f"generation={old}&", f"generation={new}&")
        return obj

    return _make_object_resource


def apply() -> None:
    """Give every object resource the stand-in makes an increasing generation."""
    wrap_handler("_make_object_resource", _make)
