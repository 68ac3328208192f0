"""The patches that make gcp-storage-emulator 2026.7.19 behave like Cloud Storage where a
ledger in a bucket relies on it.

This package (with :mod:`onceover_tools.localstores.gcs_server`) is the only code in the
project that knows the stand-in's internals. Each patch is a module of its own, named as
the server's ``--without-patch`` and the tests call it; its docstring states the
documented Cloud Storage behaviour it restores and names the tests (over HTTP, through
google-cloud-storage, in ``tests/localstores/``) that pin it. Every patch replaces
private functions of the stand-in through :mod:`~.wrapping`, which refuses any release
other than :data:`PINNED_VERSION`. :func:`install` applies them, once per process, in the
order of :data:`PATCHES`.

``increasing_generations``
    each new generation of an object is greater than the one before.
``generation_headers``
    downloads answer ``x-goog-generation`` and ``x-goog-metageneration``.
``selected_generation``
    ``generation=`` of a generation that is not the live one answers 404.
``generation_preconditions``
    ``ifGenerationMatch`` / ``ifGenerationNotMatch`` (and ``x-goog-if-generation-match``)
    are enforced: 412 Precondition Failed, 304 Not Modified.
``flat_write_cost``
    a write costs the same however many objects the server holds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from onceover_tools.localstores.errors import LocalStoreError
from onceover_tools.localstores.patches import (
    flat_write_cost,
    generation_headers,
    generation_preconditions,
    increasing_generations,
    selected_generation,
)
from onceover_tools.localstores.patches.wrapping import PINNED_VERSION, check_version

__all__ = ["NAMES", "PATCHES", "PINNED_VERSION", "check_version", "install", "name_of"]


class Patch(Protocol):
    """A patch module: named as the server's options and the tests call it."""

    __name__: str

    def apply(self) -> None: ...


PATCHES: tuple[Patch, ...] = (
    flat_write_cost,
    increasing_generations,
    generation_headers,
    selected_generation,
    generation_preconditions,  # last, so outermost: it checks before anything is served
)
"""Every patch, in the order :func:`install` applies them."""


def name_of(patch: Patch) -> str:
    """The patch's name: its module's."""
    return patch.__name__.rpartition(".")[2]


NAMES = tuple(name_of(patch) for patch in PATCHES)

_install_lock = threading.Lock()
_installed: list[str] | None = None


def install(without: Iterable[str] = ()) -> list[str]:
    """Apply every patch but those named in ``without``, once per process, and return the
    names applied.

    Raises :class:`LocalStoreVersionError` on a release other than :data:`PINNED_VERSION`
    and :class:`LocalStoreError` on a name that is no patch, or on a second call that asks
    for another set.
    """
    global _installed  # noqa: PLW0603 - patches are applied to the process, once
    skipped = set(without)
    unknown = skipped.difference(NAMES)
    if unknown:
        raise LocalStoreError(
            f"no Cloud Storage stand-in patch is called {', '.join(sorted(unknown))}; "
            f"the patches are {', '.join(NAMES)}"
        )
    check_version()
    wanted = [name for name in NAMES if name not in skipped]
    with _install_lock:
        if _installed is None:
            for patch in PATCHES:
                if name_of(patch) in wanted:
                    patch.apply()
            _installed = wanted
        elif _installed != wanted:
            raise LocalStoreError(
                f"this process already runs the stand-in with {_installed or 'no patches'}"
            )
        return list(_installed)
