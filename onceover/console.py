"""How Onceover's entry points end: one line on failure, never a traceback for known errors."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from onceover.errors import OnceoverError

USAGE_ERROR = 2
INTERRUPTED = 130


def configure_logging(level: int = logging.INFO) -> None:
    """Log to stderr; called by entry points only (library modules never configure logging)."""
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", stream=sys.stderr
    )
    # One INFO line per HTTP request (readiness polls) is noise at the console.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def run(main: Callable[[], int], prog: str = "onceover") -> NoReturn:
    """Run ``main`` and exit with its status; an :class:`OnceoverError` prints one line."""
    try:
        status = main()
    except OnceoverError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        status = USAGE_ERROR
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        status = INTERRUPTED
    sys.exit(status)


def port_number(value: str) -> int:
    """An argparse type: a TCP port, 0 meaning "pick a free one"."""
    port = int(value) if value.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535)")
    return port


def minutes(value: str) -> float:
    """An argparse type: a length of time in minutes, zero or more (``0.5``)."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not (math.isfinite(number) and number >= 0):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of minutes (0 or more)")
    return number


def positive_number(value: str) -> int:
    """An argparse type: a whole number above zero."""
    number = int(value) if value.isdigit() else 0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return number
