"""The store dimension: where a schedule's ledger is, and what reaches it.

==========  ===========================================================================
``posix``   this disk, where each job keeps it when told nothing: the load job in its
            checkpoint (``<checkpoint>/onceover``), the users' jobs in ``work/ledger``
``s3``      ``s3://<bucket>/ledger`` on the session's local S3 (moto's server)
``gcs``     ``gs://<bucket>/ledger`` on the session's local Cloud Storage (patched to
            honour generation preconditions)
==========  ===========================================================================

A stand-in starts the first time a schedule of the session needs it, and serves every
later one; each schedule gets a bucket of its own. Its variables (``AWS_ENDPOINT_URL``
and keys, ``STORAGE_EMULATOR_HOST``) go to the job's environment, as a user exports
them for a driver (the cluster workload ships them to the executors with
``spark.executorEnv.*``), and into this process's, where the verdict reads the ledger
(:mod:`onceover.ledger_files`), as the control plane does with its own credentials.
The checkpoint stays on this disk: the ledger goes to the bucket by the sink's
``ledger`` option.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from onceover_tools.chaos.schedule import Schedule
from onceover_tools.localstores import LocalGCS, LocalS3, StandInProcess

logger = logging.getLogger(__name__)

LEDGER_PREFIX = "ledger"
"""The ledger's prefix in a schedule's bucket."""


@dataclass(frozen=True)
class BucketLedger:
    """One schedule's ledger in a bucket: its URL, and what a client needs to reach it."""

    url: str
    environment: Mapping[str, str] = field(default_factory=dict)


MAKERS: Mapping[str, Callable[[Path], StandInProcess]] = {
    "s3": lambda log: LocalS3(log_path=log),
    "gcs": lambda log: LocalGCS(log_path=log),
}
"""The stand-in of each object store, given where it logs."""


class StandIns:
    """The session's object-store stand-ins, each started when a schedule first needs
    it; safe to share between lanes. ``log_dir`` keeps their logs; ``makers``: how
    each store's stand-in is made (:data:`MAKERS`; a test hands in others)."""

    def __init__(
        self, log_dir: Path, makers: Mapping[str, Callable[[Path], StandInProcess]] = MAKERS
    ) -> None:
        self.log_dir = log_dir
        self._makers = makers
        self._running: dict[str, StandInProcess] = {}
        self._replaced: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def ledger_for(self, schedule: Schedule) -> BucketLedger | None:
        """A fresh bucket for ``schedule``'s ledger, on its store's stand-in (started now
        if none runs yet); None for a schedule whose ledger is on this disk."""
        maker = self._makers.get(schedule.store)
        if maker is None:
            return None
        with self._lock:
            stand_in = self._running.get(schedule.store)
            if stand_in is None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                stand_in = maker(self.log_dir / f"local-{schedule.store}.log").start()
                self._running[schedule.store] = stand_in
                self._export(stand_in.environment())
            # Never a bucket another schedule used, even one of the same name.
            bucket = stand_in.create_bucket(f"{schedule.name}-{uuid.uuid4().hex[:8]}")
        return BucketLedger(f"{bucket}/{LEDGER_PREFIX}", dict(stand_in.environment()))

    def _export(self, environment: Mapping[str, str]) -> None:
        """Give this process the stand-in's variables (the same for every schedule of
        the session), remembering what they replace."""
        for name, value in environment.items():
            self._replaced.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def stop(self) -> None:
        """Stop every stand-in started (their buckets go with them) and give this
        process back the variables it had."""
        with self._lock:
            for stand_in in self._running.values():
                try:
                    stand_in.stop()
                except Exception:  # the others are still stopped
                    logger.warning("%s did not stop cleanly", stand_in.child.name, exc_info=True)
            self._running.clear()
            for name, value in self._replaced.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._replaced.clear()
