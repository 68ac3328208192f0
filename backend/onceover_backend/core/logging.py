"""The backend's logs: Cloud Logging JSON lines, each carrying the request id.

``configure_backend_logging`` is called by ``onceover serve`` only (an entry point);
modules log with ``logging.getLogger(__name__)``.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import TextIO

request_id_var: ContextVar[str | None] = ContextVar("onceover_request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Adds the current request id to every record (as a Cloud Logging JSON field)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = request_id_var.get()
        record.request_id = request_id or "-"
        if request_id is not None:
            fields = dict(getattr(record, "json_fields", None) or {})
            fields.setdefault("request_id", request_id)
            record.json_fields = fields
        return True


def configure_backend_logging(
    log_format: str = "json", level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    target = stream or sys.stderr
    handler: logging.Handler
    if log_format == "text":
        handler = logging.StreamHandler(target)
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s [%(request_id)s] %(message)s")
        )
    else:
        from google.cloud.logging.handlers import StructuredLogHandler

        handler = StructuredLogHandler(labels={"onceover_service": "backend"}, stream=target)
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's loggers come to the root handler instead of their own plain-text ones.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    for noisy in ("httpx", "urllib3", "google.auth", "alembic.runtime.migration"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
