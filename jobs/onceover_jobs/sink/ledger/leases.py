"""Who may write: the probe that proves every executor sees the driver's ledger, and the
lease that lets one driver at a time write a query or a run (invariant 6, fencing).

A probe is a file the driver leaves before any task runs; a task that cannot find it
works on another ledger than the driver's and refuses before a row. A driver's claim
(``driver.json`` under the scope) names its owner and when it was last renewed: a driver
still running on this host is never taken over, one on another host only once its lease
lapsed without a commit; every commit renews it and refuses if another driver took over.
Neither is fsynced: both matter only while the driver that wrote them lives
(:class:`onceover_jobs.sink.ledger.writes.Sync`).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onceover.ledger_files import read_payload, safe_name
from onceover_jobs.sink.errors import ConcurrentDriverError, LedgerError, LedgerNotSharedError
from onceover_jobs.sink.ledger.writes import Sync, write_exclusively, write_replacing

SHARED_PROBES = ".shared"

# -- proof that the executors see the driver's ledger ----------------------------------


def leave_probe(root: str | os.PathLike[str]) -> str:
    """On the driver, before any task: a file the tasks must find where the driver left
    it. Returns its name, which travels to the tasks in the job."""
    name = uuid.uuid4().hex
    path = Path(root) / SHARED_PROBES / name
    try:
        # Seen by this write's tasks, or by none: no fsync (ledger_writes).
        write_exclusively(path, {"probe": name}, sync=Sync.NONE)
    except OSError as exc:
        raise LedgerError(f"cannot write the ledger at {root}: {exc}") from exc
    return name


def check_probe(root: str | os.PathLike[str], name: str, where: str) -> None:
    """In a task: the driver's probe must be here, or this executor has another ledger."""
    if not (Path(root) / SHARED_PROBES / name).is_file():
        raise LedgerNotSharedError(
            f"{where} cannot see the ledger the driver writes at {root} (the driver's "
            f"probe {SHARED_PROBES}/{name} is not there): this executor would keep its "
            "own ledger, and a retried or replayed task could write its rows again. Put "
            "the ledger (the 'ledger' option, or ONCEOVER_LEDGER) on storage the driver "
            "and every executor mount at the same path (NFS, Filestore); nothing was written"
        )


# -- one driver at a time per query or run ---------------------------------------------

DRIVER_FILE = "driver.json"


DEFAULT_DRIVER_LEASE_S = 120
"""How long a driver on another host keeps its claim without a commit (sink option
``driver.lease_s``): a driver there cannot be seen, so its claim is trusted this long
after its last commit, and taken over after."""


def claim_driver(
    root: str | os.PathLike[str],
    scope: str,
    what: str,
    lease_s: float = DEFAULT_DRIVER_LEASE_S,
    *,
    owner: str | None = None,
) -> None:
    """Record this driver (``owner``, else the one this process works for) as the one
    writing ``scope``. Refuse when the one recorded is another that still runs on this
    host, or one on another host whose claim was renewed (at a commit) less than
    ``lease_s`` ago: whether it still runs cannot be seen from here. An older claim is
    taken over; an intent its driver left is settled with its own streams, and that
    driver, if it wakes, is refused at its next commit."""
    from onceover_jobs.sink.driver import alive_here, driver_owner, on_this_host

    me = owner or driver_owner()
    path = _driver_path(root, scope)
    recorded = read_payload(path)
    other = None if recorded is None else str(recorded.get("owner"))
    if other is not None and other != me and alive_here(other):
        raise ConcurrentDriverError(
            f"{what} is being written by another driver that still runs ({other}, recorded "
            f"in {path}). Two drivers on one checkpoint or run id race to commit the same "
            "batches. Stop that one (or wait for it to finish) and start this again; if it "
            "is not a Spark driver of yours, delete the file. Nothing was written"
        )
    if recorded is not None and other is not None and other != me and not on_this_host(other):
        age = _lease_age(recorded)
        if lease_s > 0 and age is not None and age < lease_s:
            until = datetime.fromtimestamp(time.time() + lease_s - age, UTC)
            raise ConcurrentDriverError(
                f"{what} is held by a driver on another host ({other}), whose claim was "
                f"renewed {age:.0f} s ago (recorded in {path}). A driver renews it at every "
                f"commit; it lapses after driver.lease_s={lease_s:g} s without one. Stop "
                "that driver; if it is gone, start this again after "
                f"{until:%Y-%m-%d %H:%M:%S} UTC, or delete the file. Nothing was written"
            )
    _write_claim(path, me)


def renew_driver(root: str | os.PathLike[str], scope: str, what: str) -> None:
    """Before a commit: renew this driver's claim on ``scope``; refuse if another driver
    took it over meanwhile (this one stalled past its lease, or was taken for gone).
    Nothing to do where no driver claimed the scope (a foreachBatch query)."""
    from onceover_jobs.sink.driver import driver_owner

    me = driver_owner()
    path = _driver_path(root, scope)
    recorded = read_payload(path)
    if recorded is None:
        return
    owner = str(recorded.get("owner"))
    if owner != me:
        raise ConcurrentDriverError(
            f"{what}: another driver ({owner}) took over from this one ({me}), recorded "
            f"in {path}, after this one's claim lapsed or was taken for gone. This driver "
            "stops before it commits; the other goes on (and settles what this one left)"
        )
    _write_claim(path, me)


def _driver_path(root: str | os.PathLike[str], scope: str) -> Path:
    return Path(root) / safe_name(scope) / DRIVER_FILE


def _lease_age(recorded: dict[str, Any]) -> float | None:
    """Seconds since the claim was renewed, by this host's clock; None for a claim from
    before leases (taken over, as it was then)."""
    renewed = recorded.get("renewed_at")
    if not isinstance(renewed, int | float):
        return None
    return max(0.0, time.time() - float(renewed))


def _write_claim(path: Path, owner: str) -> None:
    try:
        # No fsync (ledger_writes): a crash that loses the claim ends its driver too, and
        # a claim found older than it was (or none) lets the next driver take over, as it
        # may once its writer is gone. Intents, which fence the commits, are fsynced.
        write_replacing(path, {"owner": owner, "renewed_at": round(time.time(), 3)}, sync=Sync.NONE)
    except OSError as exc:
        raise LedgerError(f"cannot write the ledger at {path.parent.parent}: {exc}") from exc
