"""How the interpreter of a server process runs: the GIL's hand-over, the garbage collector.

Both are the process's, not the app's: :func:`server_interpreter` sets them for the
app's lifetime (its lifespan) and puts back what it found, so an app started and stopped
inside another program (a test) leaves that program as it was.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GIL_SWITCH_INTERVAL_S = 0.001
"""How long a thread may hold the GIL while another waits for it (Python's default is
5 ms). A read gives the GIL up at each SQL statement and waits to get it back; beside
ingest's CPU-bound threads each wait was up to the whole interval, so a read of many
statements waited that long many times over. A shorter interval still costs more than
it saves: the threads spend their turns handing the GIL over (docs/journal/profiling.md,
"Third round")."""

YOUNG_COLLECTION_THRESHOLD = 10_000
"""Container objects allocated, net, before the collector looks at the youngest
generation (Python's default: 700). Ingest makes tens of them an event (each event a
pydantic model, its dicts, lists and rows); at 700 the server collected four to five
times a 500-event batch, and each collection of the older generations walked everything
alive since startup. With the startup's objects frozen (below) and this threshold, the
server spends less CPU an event on both databases (docs/journal/profiling.md, "The garbage
collector"); a young collection is short, and few are needed."""


class _Servers:
    """The servers running in this process, and what the first of them found
    (switch interval, collector thresholds), put back by the last."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.found: tuple[float, tuple[int, ...]] = (0.0, ())


_SERVERS = _Servers()


@contextmanager
def server_interpreter() -> Iterator[None]:
    """The GIL's switch interval and the collector's settings for a server process.

    The objects alive at startup (modules, the app, SQLAlchemy's and pydantic's
    schemas: most of the process's objects, and all of them long-lived) are frozen, so
    no collection walks them again (``gc.freeze``, as Python's documentation suggests
    for what a process keeps for its whole life). No collection first: a full one costs
    a large process (a test run) far more than the little garbage startup leaves.

    Apps that overlap in one process (tests) share the settings: the first to start
    sets them, the last to stop puts back what the first found.
    """
    servers = _SERVERS
    with servers.lock:
        servers.running += 1
        if servers.running == 1:
            servers.found = (sys.getswitchinterval(), gc.get_threshold())
            sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
            gc.freeze()
            gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *servers.found[1][1:])
    try:
        yield
    finally:
        with servers.lock:
            servers.running -= 1
            if servers.running == 0:
                switch_interval, thresholds = servers.found
                gc.set_threshold(*thresholds)
                gc.unfreeze()
                sys.setswitchinterval(switch_interval)
