"""Local stand-ins for the object stores a ledger can live in: S3 and Cloud Storage.

Each is a real server in a child process on a port of its own, data in memory:
:class:`LocalS3` (moto's S3 server) and :class:`LocalGCS` (gcp-storage-emulator, patched
where it differs from documented Cloud Storage behaviour the ledger relies on: see
:mod:`onceover_tools.localstores.patches`). :class:`LocalObjectStores` runs both, as
``onceover up --object-stores`` does; each one's :meth:`environment` names the variables
a client reads to reach it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from onceover.processes import StartStop
from onceover_tools.localstores.child import START_TIMEOUT_S, StandInProcess
from onceover_tools.localstores.errors import LocalStoreError, LocalStoreVersionError
from onceover_tools.localstores.gcs import LocalGCS
from onceover_tools.localstores.s3 import LocalS3

__all__ = [
    "LocalGCS",
    "LocalObjectStores",
    "LocalS3",
    "LocalStoreError",
    "LocalStoreVersionError",
    "StandInProcess",
]


class LocalObjectStores(StartStop):
    """Both stand-ins, started side by side and stopped together.

    ``log_dir``: where each writes its log (``local-s3.log``, ``local-gcs.log``); None
    leaves their output on this process's.
    """

    def __init__(self, *, host: str = "127.0.0.1", log_dir: Path | None = None) -> None:
        self.s3 = LocalS3(host=host, log_path=log_dir / "local-s3.log" if log_dir else None)
        self.gcs = LocalGCS(host=host, log_path=log_dir / "local-gcs.log" if log_dir else None)

    @property
    def stores(self) -> tuple[StandInProcess, ...]:
        return (self.s3, self.gcs)

    def environment(self) -> dict[str, str]:
        """Every variable a client needs to reach either stand-in."""
        merged: dict[str, str] = {}
        for store in self.stores:
            merged.update(store.environment())
        return merged

    def create_bucket(self, name: str) -> tuple[str, ...]:
        """Create bucket ``name`` in each; their URLs (``s3://name``, ``gs://name``)."""
        return tuple(store.create_bucket(name) for store in self.stores)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Start both and wait until both answer; if either fails, neither is left running."""
        try:
            for store in self.stores:
                store.launch()
            for store in self.stores:
                store.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both (each is stopped even when stopping the other fails)."""
        try:
            self.s3.stop()
        finally:
            self.gcs.stop()
