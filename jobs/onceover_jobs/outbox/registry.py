"""One emitter per receiver, token and wire in a process: :func:`emitter_for`.

Spark reuses Python workers across tasks, so one emitter (one buffer, one sender thread,
one spool folder) serves them all. A closed emitter is replaced on the next call; each
emitter is closed at exit, briefly (what does not make it in time is spooled for later).
In a forked child the registry starts empty (:mod:`onceover_jobs.outbox.fork`).
"""

from __future__ import annotations

import atexit
import logging
import os
import tempfile
import threading
from pathlib import Path

from onceover.errors import ConfigurationError
from onceover_jobs.outbox import fork
from onceover_jobs.outbox.emitter import EventEmitter
from onceover_jobs.outbox.interface import EventEmitterLike, NullEmitter
from onceover_jobs.outbox.spool_folders import SPOOL_DIR_ENV, default_spool_root, spool_dirs
from onceover_jobs.outbox.wire import CONTROL_PLANE, Wire

logger = logging.getLogger(__name__)

ATEXIT_TIMEOUT_S = 1.0


class _Registry:
    """The process's emitters by (url, token, wire)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.emitters: dict[tuple[str, str | None, Wire], EventEmitter] = {}

    def after_fork_in_child(self) -> None:
        # The parent's lock may be held at fork time, and its emitters are closed here.
        self.lock = threading.Lock()
        self.emitters.clear()


_registry = _Registry()
fork.reset_in_children(_registry)


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
    with _registry.lock:
        emitter = _registry.emitters.get(key)
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
        _registry.emitters[key] = emitter
        # Short: the job is over; what does not make it in time is spooled for later.
        atexit.register(emitter.close, ATEXIT_TIMEOUT_S)
        return emitter
