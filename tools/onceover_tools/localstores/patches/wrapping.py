"""How every patch replaces a gcp-storage-emulator function: on the pinned release only,
loudly.

Each patch wraps a private function of the stand-in, whose shape may change in another
release; so the patches run against :data:`PINNED_VERSION` only (:func:`check_version`),
and :func:`wrap_handler` fails when the function it is to replace is gone. The stand-in's
routing table (``gcp_storage_emulator.server.HANDLERS``) holds its handler functions by
reference, so a replaced handler is replaced there too.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable
from typing import Any

from onceover_tools.localstores.errors import LocalStoreVersionError

PINNED_VERSION = "2026.7.19"
"""The gcp-storage-emulator release these patches were written against and tested with."""

Handler = Callable[..., Any]


def check_version() -> str:
    """Return the installed gcp-storage-emulator version, or raise when it is not the
    pinned one."""
    try:
        installed = importlib.metadata.version("gcp-storage-emulator")
    except importlib.metadata.PackageNotFoundError:
        installed = "none"
    if installed != PINNED_VERSION:
        raise LocalStoreVersionError(
            f"gcp-storage-emulator {installed} is installed but the Cloud Storage stand-in's "
            f"patches are written for {PINNED_VERSION}; run `make install` (uv sync) to get "
            "the pinned version, or re-check every patch in onceover_tools/localstores/patches/"
        )
    return installed


def wrap_handler(name: str, make_wrapper: Callable[[Handler], Handler]) -> None:
    """Replace ``gcp_storage_emulator.handlers.objects.<name>`` by ``make_wrapper(original)``,
    in the module (for the handlers that call it) and in the routing table (for requests
    routed to it); fail loudly if it moved."""
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    original = getattr(objects, name, None)
    if original is None:
        raise LocalStoreVersionError(
            f"gcp-storage-emulator no longer has handlers.objects.{name}; the Cloud Storage "
            "stand-in's patches need to be re-checked against this release"
        )
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    setattr(objects, name, wrapper)
    for _pattern, methods in server.HANDLERS:
        for method, handler in methods.items():
            if handler is original:
                methods[method] = wrapper
