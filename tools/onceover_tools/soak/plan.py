"""What a soak is asked to do: its load, its mode, its faults, where it reports (read by
the command line without the harness's imports)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onceover.modes import STREAMING_DEFAULT_MODE
from onceover_tools.soak.shapes import Shape

FAULT_KINDS = ("driver_kill", "worker_kill", "commit_error", "connection_drop")
"""The soak's fault kinds, taken in turn (:mod:`onceover_tools.soak.faults`)."""


@dataclass(frozen=True)
class SoakPlan:
    shape: Shape
    mode: str | None
    """The sink's ``mode`` option; ``None``: none given (writeStream's default)."""
    crash_every_s: float | None
    fault_kinds: tuple[str, ...] = FAULT_KINDS
    sample_every_s: float = 5.0
    partitions: int = 2
    request_max_bytes: int | None = None
    report_dir: Path = Path(".onceover/soak")
    data_dir: Path | None = None
    drain_timeout_s: float = 900.0
    bigquery: str = "local"
    """``local`` (started by the soak) or ``real`` (:mod:`onceover_tools.soak.target`)."""
    options: tuple[tuple[str, str], ...] = ()
    """Real BigQuery's connection options, as the sink takes them."""
    dataset: str = "onceover_soak"

    @property
    def mode_name(self) -> str:
        return self.mode or STREAMING_DEFAULT_MODE
