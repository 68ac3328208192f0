"""Writing one ledger file in one step, through the ledger's store
(:mod:`onceover.ledger_store`): created only if absent (the first writer wins),
replaced only if unchanged since it was read (a compare-and-swap), or replaced. A
reader finds the old file or the new one, never half of one (the format:
onceover.ledger_files).

How much of that is durable when a call returns is the caller's to say (:class:`Sync`);
on a disk an fsync is most of a write's cost (docs/journal/profiling.md), on an object
store every successful put is durable. Readers on other hosts see a file once the call
returned, whatever was synced (NFS's close-to-open consistency; an object store's
read-after-write)."""

from __future__ import annotations

from typing import Any

from onceover.ledger_files import encode_payload
from onceover.ledger_store import LedgerStore, Sync

__all__ = ["Sync", "write_exclusively", "write_replacing", "write_swapping"]


def write_exclusively(
    store: LedgerStore, key: str, payload: dict[str, Any], *, sync: Sync = Sync.DURABLE
) -> bool:
    """Create ``key`` holding ``payload``; False if it exists (another writer won)."""
    return store.create(key, encode_payload(payload), sync=sync) is not None


def write_replacing(
    store: LedgerStore, key: str, payload: dict[str, Any], *, sync: Sync = Sync.DURABLE
) -> None:
    """Write ``key`` holding ``payload``, replacing what it held."""
    store.put(key, encode_payload(payload), sync=sync)


def write_swapping(
    store: LedgerStore,
    key: str,
    payload: dict[str, Any],
    version: str | None,
    *,
    sync: Sync = Sync.DURABLE,
) -> bool:
    """Write ``key`` holding ``payload`` if it is still at ``version`` (None: if it is
    still absent); False when another writer changed it since it was read."""
    data = encode_payload(payload)
    if version is None:
        return store.create(key, data, sync=sync) is not None
    return store.swap(key, data, version, sync=sync) is not None
