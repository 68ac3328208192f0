"""The write modes, one module each behind one interface (:mod:`.base`):
:mod:`.pending`, :mod:`.buffered`, :mod:`.committed` and :mod:`.default`; what every
mode's task does with a stream is :mod:`.staging`. Ask :func:`mode_of` for a mode by its
name; what a mode is (its traits) is in :mod:`onceover.modes`.
"""

from __future__ import annotations

from onceover.modes import Mode
from onceover_jobs.sink.modes.base import WriteMode
from onceover_jobs.sink.modes.buffered import BufferedMode
from onceover_jobs.sink.modes.committed import CommittedMode
from onceover_jobs.sink.modes.default import DefaultMode
from onceover_jobs.sink.modes.pending import PendingMode

_MODES: dict[Mode, WriteMode] = {
    mode.traits.mode: mode
    for mode in (PendingMode(), BufferedMode(), CommittedMode(), DefaultMode())
}


def mode_of(name: str) -> WriteMode:
    """The mode called ``name`` (the ``mode`` option, or a ledger record's); a
    ``ValueError`` naming the modes for any other."""
    try:
        return _MODES[name]  # type: ignore[index]
    except KeyError:
        raise ValueError(
            f"unknown write mode {name!r}; the modes are {', '.join(_MODES)}"
        ) from None
