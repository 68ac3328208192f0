"""What a forked child does with the emitters it inherits from its parent.

Spark forks its Python workers from a daemon that may already hold emitters. In the
child only the forking thread exists: a sender thread is gone, and any lock may be held
by a thread that no longer exists. So, in the child, before anything else runs:

* every emitter is closed, with locks of its own; what it still buffered belongs to
  the parent, which sends it (sent once, not by both); what the child emits goes
  straight to the spool, into files of its own (named with its pid);
* the parent's spool files are closed without being unlocked: a ``flock`` belongs to
  the open file description, which the parent still uses, so its claims stay its own;
* the per-process registry is emptied, so the child's first ``emitter_for`` builds an
  emitter, and a sender thread, of its own.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class ForkAware(Protocol):
    """What holds state a forked child must not share with its parent."""

    def after_fork_in_child(self) -> None: ...


_inherited: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def reset_in_children(holder: ForkAware) -> None:
    """Have ``holder.after_fork_in_child()`` run in every child forked from now on
    (while ``holder`` lives)."""
    _inherited.add(holder)


def _after_fork_in_child() -> None:
    for holder in list(_inherited):
        holder.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
