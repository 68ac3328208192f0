"""Job logs as structured JSON, one object per line, in Cloud Logging's format.

Uses google-cloud-logging's ``StructuredLogHandler``: on GKE, Cloud Run or Dataproc
the lines are parsed into ``severity``, ``message``, labels and source location;
locally they are still one JSON object per line, easy to grep and to ship.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

LOG_FORMAT_ENV = "ONCEOVER_LOG_FORMAT"


def configure_job_logging(
    job: str, *, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """Send this process's logs to ``stream`` (stderr) as Cloud Logging JSON lines.

    ``ONCEOVER_LOG_FORMAT=text`` switches to plain lines for a person at a terminal.
    """
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    target = stream or sys.stderr
    handler: logging.Handler
    if os.environ.get(LOG_FORMAT_ENV, "json") == "text":
        handler = logging.StreamHandler(target)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    else:
        from google.cloud.logging.handlers import StructuredLogHandler

        handler = StructuredLogHandler(labels={"onceover_job": job}, stream=target)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("httpx", "py4j", "urllib3", "google.auth"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
