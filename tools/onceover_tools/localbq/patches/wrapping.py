"""How every patch replaces a bqemulator function: on the pinned release only, loudly.

Each patch wraps a private function of bqemulator, whose shape may change in another
release; so the patches run against :data:`PINNED_VERSION` only (:func:`check_version`),
and :func:`wrap` fails when the function it is to replace is gone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from onceover.errors import LocalBigQueryVersionError

PINNED_VERSION = "1.4.0"
"""The bqemulator release these patches were written against and tested with."""

F = TypeVar("F", bound=Callable[..., Any])


def check_version() -> str:
    """Return the installed bqemulator version, or raise when it is not the pinned one."""
    import bqemulator

    installed = getattr(bqemulator, "__version__", "unknown")
    if installed != PINNED_VERSION:
        raise LocalBigQueryVersionError(
            f"bqemulator {installed} is installed but the local BigQuery launcher is "
            f"written for bqemulator {PINNED_VERSION}; run `make install` (uv sync) to "
            f"get the pinned version, or re-check every patch in onceover_tools/localbq/patches/"
        )
    return installed


def wrap(owner: Any, name: str, make_wrapper: Callable[[F], F]) -> None:
    """Replace ``owner.name`` by ``make_wrapper(original)``; fail loudly if it moved."""
    original = getattr(owner, name, None)
    if original is None:
        raise LocalBigQueryVersionError(
            f"bqemulator no longer has {owner.__name__}.{name}; the launcher's patches "
            "need to be re-checked against this release"
        )
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    setattr(owner, name, wrapper)
