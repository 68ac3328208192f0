"""``keep_host_logging``: embedding the local BigQuery leaves the host's logging alone.

At start bqemulator calls ``logging.basicConfig(force=True)``, replacing the handlers of
whatever process embeds it (pytest, ``onceover up``); BigQuery is a service and touches no
client's logging. The patch restores the host's root logger after bqemulator configured
structlog, so its lines go through the host's handlers at the host's levels.

Pinned by ``tests/localbq/test_patches.py``:
``test_starting_in_process_leaves_the_host_logging_alone``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Undo bqemulator's ``logging.basicConfig(force=True)`` on the host's root logger.

    Also configures bqemulator's structlog at WARNING before the rest of bqemulator
    is imported: some of its modules log at import time, and unconfigured structlog
    prints to stdout (where ``onceover bigquery --ready-json`` writes its ready line).
    """
    from bqemulator.config import LogFormat, LogLevel
    from bqemulator.observability import logging_

    def make(original: Callable[..., None]) -> Callable[..., None]:
        def configure_logging(*, level: Any, fmt: Any) -> None:
            root = logging.getLogger()
            handlers, root_level = list(root.handlers), root.level
            original(level=level, fmt=fmt)
            for handler in list(root.handlers):
                root.removeHandler(handler)
            for handler in handlers:
                root.addHandler(handler)
            root.setLevel(root_level)

        return configure_logging

    wrap(logging_, "configure_logging", make)
    logging_.configure_logging(level=LogLevel.WARNING, fmt=LogFormat.CONSOLE)
    logging.getLogger("bqemulator").setLevel(logging.WARNING)

    import bqemulator.server  # imported only now that structlog is configured

    # server.py imported the function by name before the wrap.
    bqemulator.server.configure_logging = logging_.configure_logging  # type: ignore[attr-defined]
