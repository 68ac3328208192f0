"""What callers rely on in an emitter (:class:`EventEmitterLike`), and the emitter that
does nothing (:class:`NullEmitter`), which they are given when events go nowhere."""

from __future__ import annotations

from typing import Protocol

from onceover_jobs.outbox.lines import Payload


class EventEmitterLike(Protocol):
    """What the sink needs from an emitter; :class:`NullEmitter` is the do-nothing one."""

    def emit(self, event: Payload) -> None: ...
    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool: ...
    def close(self, timeout_s: float) -> None: ...
    @property
    def delivered(self) -> int: ...
    @property
    def spooled(self) -> int: ...
    @property
    def rejected(self) -> int: ...
    @property
    def parked(self) -> int: ...


class NullEmitter:
    """The emitter when no ``monitor.url`` is set: accepts events and forgets them."""

    def emit(self, event: Payload) -> None:
        pass

    def flush(self, timeout_s: float, *, patience_s: float | None = None) -> bool:
        return True

    def close(self, timeout_s: float) -> None:
        pass

    @property
    def delivered(self) -> int:
        return 0

    @property
    def spooled(self) -> int:
        return 0

    @property
    def rejected(self) -> int:
        return 0

    @property
    def parked(self) -> int:
        return 0
