"""Who may write: the probe that proves every executor sees the driver's ledger, and the
lease that lets one driver at a time write a query or a run (invariant 6, fencing).

A probe is a file the driver leaves before any task runs; a task that cannot find it
works on another ledger than the driver's and refuses before a row. Leaving it also
proves the storage can hold a ledger at all, before anything is written: a disk without
hard links (a FUSE mount of a bucket) fails its create-if-absent, and a store that
ignores conditional writes accepts a second create of the same key; both are refused
with the fix (:class:`onceover.errors.UnsuitableLedgerStorageError`).

A driver's claim (``driver.json`` under the scope) names its owner and when it was last
renewed: a driver still running on this host is never taken over, one on another host
only once its lease lapsed without a commit; every commit renews it and refuses if
another driver took over. Each claim and renewal is a compare-and-swap on the version
of the claim it read, so of two drivers racing for one scope the store lets one win and
the other reads the winner's claim and is refused. Neither file is fsynced: both matter
only while the driver that wrote them lives (:class:`onceover_jobs.sink.ledger.writes.Sync`).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from onceover.errors import LedgerStoreError, UnsuitableLedgerStorageError
from onceover.ledger_files import decode_payload, encode_payload, safe_name
from onceover.ledger_store import LedgerStore, StoreLike, join, open_store
from onceover_jobs.sink.errors import ConcurrentDriverError, LedgerError, LedgerNotSharedError
from onceover_jobs.sink.ledger.writes import Sync, write_swapping

SHARED_PROBES = ".shared"
CLAIM_RACES = 5
PROBE_REFRESH_S = 24 * 3600
"""A probe this process left is used for its writes this long, then a new one is left."""
PROBE_KEEP_S = 7 * 24 * 3600
"""Probes older than this are removed by the next driver process that leaves one: none
is in use (a driver leaves a new one after PROBE_REFRESH_S), and a query on a 1-second
trigger would otherwise leave thousands an hour."""
_checked: set[str] = set()
"""Stores this process proved honour a create-if-absent (once a process, not a write)."""
_left: dict[str, tuple[str, float]] = {}
"""The probe this process left in each store (by URL), and when."""

logger = logging.getLogger(__name__)

# -- proof that the executors see the driver's ledger ----------------------------------


def leave_probe(root: StoreLike) -> str:
    """On the driver, before any task: a file the tasks must find where the driver left
    it. Returns its name, which travels to the tasks in the job. Refuses storage that
    cannot hold a ledger (the module's docstring), before anything else is written.

    One probe serves this process's writes for a day (a micro-batch asks only whether it
    is still there: a read, where a new one was a write); the first one a process leaves
    removes those older than a week, so ``.shared/`` holds a few per driver, not one per
    micro-batch."""
    store = open_store(root)
    now = time.time()
    kept = _left.get(store.url)
    fresh = kept is not None and now - kept[1] < PROBE_REFRESH_S
    if kept is not None and fresh and store.exists(join(SHARED_PROBES, kept[0])):
        return kept[0]
    name = f"{int(now)}-{uuid.uuid4().hex}"
    key = join(SHARED_PROBES, name)
    # Seen by this write's tasks, or by none: no fsync (ledger_writes).
    if store.create(key, encode_payload({"probe": name}), sync=Sync.NONE) is None:
        raise LedgerError(f"{store.where(key)}: a new probe's name was taken")
    if store.url not in _checked:
        check_conditional_writes(store, key, name)
        _checked.add(store.url)
    if kept is None:
        _remove_old_probes(store, now)
    _left[store.url] = (name, now)
    return name


def _remove_old_probes(store: LedgerStore, now: float) -> None:
    """Remove the probes left more than PROBE_KEEP_S ago (their names start with the
    second they were left; a name without one is left alone). Best effort: a store that
    lets this driver write but not delete keeps them, and the write goes on."""
    try:
        for name in store.list(SHARED_PROBES).files:
            left_at, _, rest = name.partition("-")
            if rest and left_at.isdigit() and now - int(left_at) > PROBE_KEEP_S:
                store.delete(join(SHARED_PROBES, name))
    except LedgerStoreError as exc:
        logger.warning("old probes in %s were not removed: %s", store.where(SHARED_PROBES), exc)


def check_conditional_writes(store: LedgerStore, key: str, name: str) -> None:
    """A second create of ``key`` (a probe just made, called ``name``; other bytes) must
    be refused: a store that accepts it would let two drivers both write one intent, and
    two attempts one progress version. Raises UnsuitableLedgerStorageError if accepted."""
    second = encode_payload({"probe": name, "second": True})
    if store.create(key, second, sync=Sync.NONE) is not None:
        raise UnsuitableLedgerStorageError(
            store.url,
            f"the store at {store.url} ignores conditional writes: a second "
            f"create-if-absent of {key} was accepted (Cloud Storage's ifGenerationMatch=0, "
            "S3's If-None-Match: *, Azure's If-None-Match). Without them two drivers, or two "
            "attempts of a task, can both write what only one may; the ledger needs a store "
            "that honours them (Cloud Storage, S3 since 2024-08, Azure Blob / ADLS Gen2, a "
            "disk with hard links)",
        )


def check_probe(root: StoreLike, name: str, where: str) -> None:
    """In a task: the driver's probe must be here, or this executor has another ledger."""
    store = open_store(root)
    key = join(SHARED_PROBES, name)
    try:
        seen = store.exists(key)
    except LedgerStoreError as exc:
        raise LedgerNotSharedError(
            f"{where} cannot reach the ledger the driver writes at {store.url}: "
            f"{exc.cause}. Give the executors what the driver has to reach it "
            "(credentials and endpoints through spark.executorEnv.*, or their instance's "
            "role); nothing was written"
        ) from exc
    if not seen:
        raise LedgerNotSharedError(
            f"{where} cannot see the ledger the driver writes at {store.url} (the driver's "
            f"probe {SHARED_PROBES}/{name} is not there): this executor would keep its "
            "own ledger, and a retried or replayed task could write its rows again. Put "
            "the ledger (the 'ledger' option, or ONCEOVER_LEDGER) in a bucket (gs://, "
            "s3://, abfss://) or on a disk the driver and every executor mount at the "
            "same path (NFS, Filestore); nothing was written"
        )


# -- one driver at a time per query or run ---------------------------------------------

DRIVER_FILE = "driver.json"


DEFAULT_DRIVER_LEASE_S = 120
"""How long a driver on another host keeps its claim without a commit (sink option
``driver.lease_s``): a driver there cannot be seen, so its claim is trusted this long
after its last commit, and taken over after."""


def claim_driver(
    root: StoreLike,
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
    driver, if it wakes, is refused at its next commit. The claim is a compare-and-swap
    on the claim read: a driver that claimed meanwhile is read again, and refused."""
    from onceover_jobs.sink.driver import alive_here, driver_owner, on_this_host

    me = owner or driver_owner()
    store = open_store(root)
    key = _driver_key(scope)
    for _ in range(CLAIM_RACES):
        recorded, version = _read_claim(store, key)
        other = None if recorded is None else str(recorded.get("owner"))
        if other is not None and other != me and alive_here(other):
            raise ConcurrentDriverError(
                f"{what} is being written by another driver that still runs ({other}, "
                f"recorded in {store.where(key)}). Two drivers on one checkpoint or run id "
                "race to commit the same batches. Stop that one (or wait for it to finish) "
                "and start this again; if it is not a Spark driver of yours, delete the "
                "file. Nothing was written"
            )
        if recorded is not None and other is not None and other != me and not on_this_host(other):
            age = _lease_age(recorded)
            if lease_s > 0 and age is not None and age < lease_s:
                until = datetime.fromtimestamp(time.time() + lease_s - age, UTC)
                raise ConcurrentDriverError(
                    f"{what} is held by a driver on another host ({other}), whose claim was "
                    f"renewed {age:.0f} s ago (recorded in {store.where(key)}). A driver "
                    f"renews it at every commit; it lapses after driver.lease_s={lease_s:g} s "
                    "without one. Stop that driver; if it is gone, start this again after "
                    f"{until:%Y-%m-%d %H:%M:%S} UTC, or delete the file. Nothing was written"
                )
        if _write_claim(store, key, me, version):
            return
        # Another driver wrote the claim since it was read: read it again, and judge it.
    raise ConcurrentDriverError(
        f"{what}: the claim {store.where(key)} kept changing while this driver read it; "
        "another driver is starting on the same scope. Nothing was written"
    )


def renew_driver(root: StoreLike, scope: str, what: str) -> None:
    """Before a commit: renew this driver's claim on ``scope``; refuse if another driver
    took it over meanwhile (this one stalled past its lease, or was taken for gone).
    Nothing to do where no driver claimed the scope (a foreachBatch query)."""
    from onceover_jobs.sink.driver import driver_owner

    me = driver_owner()
    store = open_store(root)
    key = _driver_key(scope)
    for _ in range(CLAIM_RACES):
        recorded, version = _read_claim(store, key)
        if recorded is None:
            return
        owner = str(recorded.get("owner"))
        if owner != me:
            raise ConcurrentDriverError(
                f"{what}: another driver ({owner}) took over from this one ({me}), recorded "
                f"in {store.where(key)}, after this one's claim lapsed or was taken for gone. "
                "This driver stops before it commits; the other goes on (and settles what "
                "this one left)"
            )
        if _write_claim(store, key, me, version):
            return
    raise ConcurrentDriverError(
        f"{what}: the claim {store.where(key)} kept changing under this driver's renewal; "
        "another driver is taking over. This driver stops before it commits"
    )


def _driver_key(scope: str) -> str:
    return join(safe_name(scope), DRIVER_FILE)


def _read_claim(store: LedgerStore, key: str) -> tuple[dict[str, Any] | None, str | None]:
    found = store.read(key)
    if found is None:
        return None, None
    return decode_payload(found.data, store.where(key)), found.version


def _lease_age(recorded: dict[str, Any]) -> float | None:
    """Seconds since the claim was renewed, by this host's clock; None for a claim from
    before leases (taken over, as it was then)."""
    renewed = recorded.get("renewed_at")
    if not isinstance(renewed, int | float):
        return None
    return max(0.0, time.time() - float(renewed))


def _write_claim(store: LedgerStore, key: str, owner: str, version: str | None) -> bool:
    """The claim, if it is still at ``version`` (None: still absent); False when another
    driver wrote it first. No fsync (ledger_writes): a crash that loses the claim ends
    its driver too, and a claim found older than it was (or none) lets the next driver
    take over, as it may once its writer is gone. Intents, which fence the commits, are
    fsynced."""
    payload = {"owner": owner, "renewed_at": round(time.time(), 3)}
    return write_swapping(store, key, payload, version, sync=Sync.NONE)
