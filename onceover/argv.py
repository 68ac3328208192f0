"""Command lines as argument lists."""

from __future__ import annotations

from collections.abc import Iterable


def without_options(argv: Iterable[str], names: Iterable[str]) -> list[str]:
    """``argv`` without the options ``names`` and their values (``--name V`` and
    ``--name=V`` alike)."""
    dropped = tuple(names)
    joined = tuple(f"{name}=" for name in dropped)
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in dropped:
            skip = True
        elif not arg.startswith(joined):
            kept.append(arg)
    return kept
