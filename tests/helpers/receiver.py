"""A stand-in for the control plane's ``POST /api/events`` until the event store exists.

It checks the bearer token, validates the batch with the shared schema (422 naming the
bad events by index, as FastAPI does), stores events in a dict by id, counts every
POST, and can go down (port closed, open connections cut) and come back up on the same
port.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from pydantic import ValidationError

from onceover.events import EVENT_LIST
from tests.helpers.local_http import JsonPostHandler, LocalServer

TOKEN = "ingest-token"
POISON_RUN = "poison-run"


class Receiver(LocalServer):
    """A stand-in for the control plane's event intake (see the module docstring)."""

    handler = JsonPostHandler

    def __init__(self) -> None:
        super().__init__()
        self.events: dict[str, dict[str, Any]] = {}
        self.received: Counter[str] = Counter()  # how often each id arrived (re-sends allowed)
        self.posts = 0
        self.authorizations: list[str | None] = []
        self.fail_with: list[int] = []  # statuses to answer the next posts with
        self.answer_after_s = 0.0  # a slow control plane: each POST answered this late
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ids(self) -> set[str]:
        with self._lock:
            return set(self.events)

    def receive(self, path: str, authorization: str | None, body: bytes) -> tuple[int, Any]:
        if self.answer_after_s:
            time.sleep(self.answer_after_s)  # the slowness stood in for, not a wait
        with self._lock:
            self.posts += 1
            self.authorizations.append(authorization)
            if self.fail_with:
                return self.fail_with.pop(0), {"detail": "try again later"}
        if path != "/api/events":
            return 404, {"detail": "Not Found"}
        if authorization != f"Bearer {TOKEN}":
            return 401, {"detail": "invalid token"}
        try:
            batch = EVENT_LIST.validate_json(body)
        except ValidationError as exc:
            errors = [{"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in exc.errors()]
            return 422, {"detail": errors}
        poisoned = [
            {"loc": ["body", i, "run_id"], "msg": "run is not accepted here"}
            for i, event in enumerate(batch)
            if event.run_id == POISON_RUN
        ]
        if poisoned:
            return 422, {"detail": poisoned}
        with self._lock:
            for event in batch:
                self.received[event.id] += 1
                self.events.setdefault(event.id, event.model_dump(mode="json"))
        return 200, {"stored": len(batch)}

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """Stored events of one ``type``."""
        with self._lock:
            return [event for event in self.events.values() if event["type"] == kind]
