"""What the ledger needs of the storage it lives on, in five operations, and nothing else.

A ledger is a tree of small JSON files (the layout: :mod:`onceover.ledger_files`). Its
writes are of three kinds, and each storage gives all three with strong consistency:

- **create if absent** (:meth:`LedgerStore.create`): an intent, a partition's next
  progress version, a stream slot's next version, a write's ordinal. On a mounted disk a
  hard link of a complete temporary file; on Cloud Storage ``ifGenerationMatch=0``; on
  S3 and Azure ``If-None-Match: *``. Two writers racing: exactly one wins.
- **replace if unchanged** (:meth:`LedgerStore.swap`): a driver's claim, a retention
  summary; a compare-and-swap on the version the writer read (a generation, an ETag).
- **replace** (:meth:`LedgerStore.put`): a record only its one writer moves forward.

Reads see the newest complete file (:meth:`read`, :meth:`list`); no write is ever seen
half done. Which writes must be on disk before what (:class:`Sync`) stays the caller's
to say; an object store's successful put is durable, so there it asks nothing more.

Keys are ``/``-separated paths relative to the store's root, never starting with ``/``.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum


class Sync(Enum):
    """What of a write is durable when it returns (a mounted disk; an object store's put
    is always durable)."""

    DURABLE = "durable"
    """The content, then the name (fsync of the file and of its directory): a record that
    must survive a crash of the machine (an intent before its commit: invariant 3)."""
    WHOLE = "whole"
    """The content only: after a crash of the machine the file holds the new payload or
    the old, never half, but may hold the old. For a record whose loss is settled from
    elsewhere (a committed mark: the intent before it is settled from BigQuery)."""
    NONE = "none"
    """Neither: for files that matter only while the driver that wrote them lives (a
    probe, the write ordinals of a driver session, a driver's claim), since a crash of
    its machine ends that driver too."""


@dataclass(frozen=True)
class Stored:
    """A file as read: its bytes and the version they are (what :meth:`LedgerStore.swap`
    compares)."""

    data: bytes
    version: str


@dataclass(frozen=True)
class Listing:
    """One level of a folder: its files (name → version) and its sub-folders' names."""

    files: dict[str, str] = field(default_factory=dict)
    folders: tuple[str, ...] = ()


REQUEST_KINDS = ("put", "get", "head", "list", "delete")


class RequestCounts:
    """Requests a store made, by kind: what a ledger costs on a priced store (the bench
    reads them; ``onceover bench``). Thread-safe: a driver's heartbeat reads beside its
    commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(REQUEST_KINDS, 0)
        self._seconds = dict.fromkeys(REQUEST_KINDS, 0.0)

    def add(self, kind: str, seconds: float, count: int = 1) -> None:
        with self._lock:
            self._counts[kind] += count
            self._seconds[kind] += seconds

    @contextmanager
    def timed(self, kind: str) -> Iterator[None]:
        """Count one request of ``kind`` and the time spent in it."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(kind, time.perf_counter() - started)

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """Each kind's (requests, seconds spent in them) so far."""
        with self._lock:
            return {k: (self._counts[k], self._seconds[k]) for k in REQUEST_KINDS}


class LedgerStore(ABC):
    """The storage under one ledger root (:mod:`onceover.ledger_store` opens one by URL).

    Every method raises :class:`onceover.errors.LedgerStoreError` naming the URL and the
    cause when the storage cannot be reached or refuses; an absent file is not an error
    (None, False, an empty listing). Instances are picklable (a Spark job carries one to
    its executors) and open their clients lazily."""

    url: str
    """The root, as a user would write it: a path, or ``gs://bucket/prefix``."""

    def __init__(self) -> None:
        self.requests = RequestCounts()

    def where(self, key: str = "") -> str:
        """``key`` as a user finds it: a path or a URL."""
        return join(self.url, key)

    @property
    def kind(self) -> str:
        """A word for the storage in messages and metrics: ``posix``, ``gcs``, ``s3``, ``azure``."""
        return type(self).KIND  # type: ignore[attr-defined, no-any-return]

    # -- the five operations ---------------------------------------------------------

    @abstractmethod
    def read(self, key: str) -> Stored | None:
        """The file at ``key`` and its version; None when there is none."""

    @abstractmethod
    def list(self, prefix: str) -> Listing:
        """What the folder ``prefix`` holds, one level; empty when it is absent."""

    @abstractmethod
    def create(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str | None:
        """Write ``key`` only if it is absent; its version, or None when another writer's
        is there. A file already holding exactly ``data`` counts as this write's
        (:meth:`ours_after_all`)."""

    @abstractmethod
    def swap(self, key: str, data: bytes, version: str, *, sync: Sync = Sync.DURABLE) -> str | None:
        """Replace ``key`` only if it is still at ``version``; the new version, or None
        when it changed or is gone since it was read (unless it holds exactly ``data``)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; nothing to do when it is gone already."""

    # -- built on them (a store may do better) ----------------------------------------

    @abstractmethod
    def put(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str:
        """Write ``key`` whatever it held; its version."""

    def exists(self, key: str) -> bool:
        return self.read(key) is not None

    def ours_after_all(self, key: str, data: bytes) -> str | None:
        """After a conditional write was refused: the version of ``key`` if it holds
        exactly ``data``. A client retries a request whose answer it lost, and the retry
        of a write that took is refused by its own condition; the object holding this
        write's bytes is this write (or one no reader can tell from it)."""
        found = self.read(key)
        if found is not None and found.data == data:
            return found.version
        return None

    def walk(self, prefix: str) -> Iterator[tuple[str, str]]:
        """Every file under ``prefix`` (key, version), at any depth, in no set order."""
        listing = self.list(prefix)
        for name, version in listing.files.items():
            yield join(prefix, name), version
        for folder in listing.folders:
            yield from self.walk(join(prefix, folder))

    def delete_tree(self, prefix: str) -> None:
        """Remove every file under ``prefix`` (deepest first on a disk); what another
        remover took first is not an error."""
        for key, _ in list(self.walk(prefix)):
            self.delete(key)

    def settle(self, prefix: str) -> None:  # noqa: B027 - a no-op where puts are durable
        """Make what was written or removed in folder ``prefix`` durable (a disk's
        directory fsync); nothing to do on an object store."""

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state.pop("requests", None)
        for name in self._clients:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.requests = RequestCounts()

    _clients: tuple[str, ...] = ()
    """Attributes holding connections, left behind when the store is pickled."""


def join(base: str, *keys: str) -> str:
    """``keys`` under ``base`` (a path, a URL, or a key), one ``/`` between each."""
    for key in keys:
        if not key:
            continue
        base = key if not base else f"{base.rstrip('/')}/{key.lstrip('/')}"
    return base
