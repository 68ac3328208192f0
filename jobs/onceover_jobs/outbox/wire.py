"""What goes over the wire: where a batch is posted and what one request carries.

A spooled event is only ever sent the way it was meant to go: a wire with a
``spool_folder`` of its own keeps its spools apart from the control plane's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EVENTS_PATH = "/api/events"


@dataclass(frozen=True)
class Wire:
    """What the receiver at the other end takes, and what log lines call it.

    ``path``: where batches are posted, relative to the emitter's URL or absolute.
    ``one_per_request``: each event is the whole body of its own POST (OpenLineage's
    HTTP transport) rather than a JSON array of up to ``batch_size`` (ours).
    """

    path: str = EVENTS_PATH
    one_per_request: bool = False
    receiver: str = "control plane"
    credential: str = "token (monitor.token, --monitor-token)"
    spool_folder: str | None = None
    """A folder of the spool root for this wire's spools alone (None: the root itself),
    so a spooled event is only ever sent the way it was meant to go."""

    def body(self, lines: Sequence[bytes]) -> bytes:
        if self.one_per_request:
            assert len(lines) == 1, "one event a request"
            return lines[0]
        return b"[" + b",".join(lines) + b"]"


CONTROL_PLANE = Wire()
"""The control plane's ``POST <url>/api/events``."""
