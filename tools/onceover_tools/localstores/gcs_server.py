"""The Cloud Storage stand-in's process: gcp-storage-emulator, patched, data in memory.

::

    python -m onceover_tools.localstores.gcs_server --host 127.0.0.1 --port 9023
        [--without-patch NAME ...]

It serves Cloud Storage's JSON API (what google-cloud-storage speaks, pointed at it by
``STORAGE_EMULATOR_HOST``) until SIGTERM or Ctrl-C; what is patched, and why, is in
:mod:`onceover_tools.localstores.patches`. ``--without-patch NAME`` (repeatable) leaves
one patch out, to show what the stand-in does without it; every other use runs them all.
:class:`~onceover_tools.localstores.gcs.LocalGCS` starts it and waits until it answers.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Sequence

from onceover.console import configure_logging, port_number, run
from onceover_tools.localstores import patches

logger = logging.getLogger("onceover_tools.localstores.gcs_server")  # also when run as __main__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_tools.localstores.gcs_server",
        description="The Cloud Storage stand-in, patched, with its data in memory.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, required=True, help="port to listen on")
    parser.add_argument(
        "--without-patch",
        action="append",
        default=[],
        metavar="NAME",
        choices=patches.NAMES,
        help=f"leave this patch out (repeatable): {', '.join(patches.NAMES)}",
    )
    return parser


def serve(host: str, port: int, without: Sequence[str] = ()) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit status."""
    applied = patches.install(without)
    from gcp_storage_emulator.server import create_server

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = create_server(host, port, in_memory=True)
    # Its data is in memory and goes with the process: nothing to save on the way out, so
    # its serving thread does not hold the exit up (a graceful stop waits out a 0.5 s
    # poll, every time a test session or `onceover up` ends).
    server._api.daemon = True
    server.start()
    logger.info(
        "Cloud Storage stand-in on http://%s:%d, patches: %s",
        host,
        port,
        ", ".join(applied) or "none",
    )
    stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(logging.WARNING)
    logger.setLevel(logging.INFO)  # its one line: where it serves and which patches are on
    # One line per request, and a warning per plain-text answer: noise in a log.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)
    logging.getLogger("api.object").setLevel(logging.ERROR)
    return serve(args.host, args.port, args.without_patch)


if __name__ == "__main__":
    run(main)
