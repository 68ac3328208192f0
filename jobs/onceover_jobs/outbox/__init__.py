"""The outbox: events sent to a receiver (the control plane, an OpenLineage endpoint)
without ever slowing down or failing the write that emits them. It imports nothing of
the sink; the sink's telemetry and lineage, the load job and the tools use it.

Every event is delivered **at least once** and stored **exactly once**: each has a
deterministic id and the receiver stores an event once by id, so whenever it is unknown
whether a batch arrived, the batch is sent again rather than risk losing it. While the
receiver is unreachable, events wait in a spool on local disk, shared by every emitter
on the machine; a token the receiver refuses parks its events until it is fixed
(docs/guides/control-plane.md#the-spool).

Read top to bottom (each module imports only those below it):

1. :mod:`~onceover_jobs.outbox.registry`      one emitter per receiver and token a process
2. :mod:`~onceover_jobs.outbox.spool_folders` a spool folder per receiver and token, private
3. :mod:`~onceover_jobs.outbox.emitter`       ``emit``, ``flush``, ``close``: what callers use
4. :mod:`~onceover_jobs.outbox.interface`     what callers rely on; the do-nothing emitter
5. :mod:`~onceover_jobs.outbox.fork`          what a forked child does with inherited emitters
6. :mod:`~onceover_jobs.outbox.sender`        the thread: the spool first, then the buffer
7. :mod:`~onceover_jobs.outbox.buffer`        the bounded buffer, flushes, when the sender wakes
8. :mod:`~onceover_jobs.outbox.delivery`      one POST, and what is done with its answer
9. :mod:`~onceover_jobs.outbox.refusals`      events refused: rejected for good, or parked
10. :mod:`~onceover_jobs.outbox.health`       backoff, slow answers, a refused token
11. :mod:`~onceover_jobs.outbox.tally`        what became of the events, counted
12. :mod:`~onceover_jobs.outbox.answers`      the HTTP rules: what each answer means
13. :mod:`~onceover_jobs.outbox.spool`        durable spool files, sealed, rejected, parked
14. :mod:`~onceover_jobs.outbox.claims`       a spool file claimed by lock-then-rename
15. :mod:`~onceover_jobs.outbox.disk`         writes that outlive a crash
16. :mod:`~onceover_jobs.outbox.wire`         where batches go and what one request carries
17. :mod:`~onceover_jobs.outbox.lines`        an event as one line of JSON
"""

from onceover_jobs.outbox.emitter import WRITE_PATH_PATIENCE_S, EventEmitter
from onceover_jobs.outbox.interface import EventEmitterLike, NullEmitter
from onceover_jobs.outbox.lines import Payload, serialise
from onceover_jobs.outbox.registry import ATEXIT_TIMEOUT_S, emitter_for
from onceover_jobs.outbox.spool import PARKED_DIR, REJECTED_FILE
from onceover_jobs.outbox.spool_folders import SPOOL_DIR_ENV, default_spool_root, spool_dirs
from onceover_jobs.outbox.wire import CONTROL_PLANE, EVENTS_PATH, Wire

__all__ = [
    "ATEXIT_TIMEOUT_S",
    "CONTROL_PLANE",
    "EVENTS_PATH",
    "PARKED_DIR",
    "REJECTED_FILE",
    "SPOOL_DIR_ENV",
    "WRITE_PATH_PATIENCE_S",
    "EventEmitter",
    "EventEmitterLike",
    "NullEmitter",
    "Payload",
    "Wire",
    "default_spool_root",
    "emitter_for",
    "serialise",
    "spool_dirs",
]
