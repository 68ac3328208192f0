"""Check 4: the ledger's store takes a create-if-absent, and refuses a second one.

The ledger's every record is written create-if-absent (:mod:`onceover.ledger_store`); a
store that cannot create, or that accepts a second create of the same key, cannot hold
one. The probe is written under the ledger's ``.shared/`` (where the driver's own probes
go) with a name no driver uses, and removed after.
"""

from __future__ import annotations

import uuid

from onceover.bigquery import BigQueryConfig
from onceover.errors import LedgerStoreError, UnsuitableLedgerStorageError
from onceover.ledger_store import Sync, join, open_store
from onceover_jobs.preflight.report import Check, fail, ok
from onceover_jobs.sink.job.options import SinkOptions
from onceover_jobs.sink.ledger.leases import SHARED_PROBES, check_conditional_writes

NAME = "ledger"
PROBE_PREFIX = "check-"
"""Probe names start so: not a second's count, so a driver's clean-up leaves them alone."""


def check_ledger(config: BigQueryConfig, options: SinkOptions) -> Check:
    assert options.ledger is not None  # parse_options always sets one
    store = open_store(options.ledger, config.connection)
    name = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    key = join(SHARED_PROBES, name)
    try:
        if store.create(key, b'{"probe": "check"}', sync=Sync.NONE) is None:
            return fail(NAME, f"{store.where(key)} was taken by another writer",
                        "run the check again")  # fmt: skip
        try:
            check_conditional_writes(store, key, name)  # the driver's own rule
        finally:
            store.delete(key)
    except UnsuitableLedgerStorageError as exc:
        return fail(
            NAME,
            f"the {store.kind} store at {store.url} accepted a second create-if-absent of "
            f"one key: {exc.cause}",
            "put the ledger on Cloud Storage, S3 (since 2024-08), Azure Blob / ADLS Gen2 or "
            "a disk with hard links (never a FUSE mount of a bucket)",
        )
    except LedgerStoreError as exc:
        return fail(
            NAME,
            f"the {store.kind} store at {store.url} refused a create-if-absent: {exc.cause}",
            f"give the job's driver and executors write access to {store.url} (a disk: a "
            "writable directory; a bucket: create, read, list and delete on its objects), "
            "or another ledger option",
        )
    return ok(NAME, f"{store.kind} store at {store.url} takes a create-if-absent and "
                    "refuses a second")  # fmt: skip
