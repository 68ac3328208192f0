"""Where a ledger is: a path or a URL, and the store that serves it.

================================  ======================================================
``/mnt/shared/ledger``, ``file:``  a mounted disk (:mod:`.posix`): local, NFS, Filestore
``gs://bucket/path``               Cloud Storage (:mod:`.gcs`)
``s3://bucket/path``, ``s3a://``   S3 and S3-compatible stores (:mod:`.objects`)
``abfss://c@a.dfs.core.windows.net/path``, ``az://c/path``
                                   Azure Blob Storage / ADLS Gen2 (:mod:`.objects`)
================================  ======================================================

Anything else (``hdfs://``, ``dbfs:/``, ``wasbs://`` …) is refused naming what is
accepted: the sink's commit runs in a Python worker without the JVM, so HDFS would need
libhdfs on every node, and DBFS is a mount over a bucket whose own URL is the one to give.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from onceover.errors import ConfigurationError
from onceover.ledger_store.base import LedgerStore, join

if TYPE_CHECKING:
    from onceover.connection import Connection

OBJECT_SCHEMES = {
    "gs": "gcs",
    "s3": "s3",
    "s3a": "s3",
    "abfss": "azure",
    "abfs": "azure",
    "az": "azure",
}
ACCEPTED = "a path, file:, gs://, s3://, s3a://, abfss:// or az://"

StoreLike = LedgerStore | str | os.PathLike[str]

_opened: dict[tuple[str, Connection | None], LedgerStore] = {}
_lock = threading.Lock()


def scheme_of(location: str | os.PathLike[str]) -> str | None:
    """The URL scheme of ``location``; None for a plain path (a drive letter is a path)."""
    text = os.fspath(location)
    scheme = urlsplit(text).scheme.lower()
    return scheme if len(scheme) > 1 else None


def is_object_store(location: str | os.PathLike[str]) -> bool:
    return scheme_of(location) in OBJECT_SCHEMES


def check_location(location: str, option: str) -> str:
    """``location`` normalised (a path made absolute, a URL kept); raises
    :class:`ConfigurationError` naming ``option`` for what no store serves."""
    scheme = scheme_of(location)
    if scheme is None:
        return os.path.abspath(os.path.expanduser(location))
    if scheme == "file":
        return urlsplit(location).path
    if scheme in OBJECT_SCHEMES:
        parts = urlsplit(location)
        if not parts.netloc:
            raise ConfigurationError(
                f"{option}={location!r}: name the bucket ({scheme}://bucket/path)"
            )
        return location.rstrip("/")
    raise ConfigurationError(
        f"{option}={location!r}: {scheme}:// cannot hold the ledger; give {ACCEPTED}"
        + (
            " (DBFS is a mount over a bucket: give the bucket's own URL)"
            if scheme == "dbfs"
            else ""
        )
    )


def open_store(location: StoreLike, connection: Connection | None = None) -> LedgerStore:
    """The store at ``location`` (a store is returned as it is). One per location and
    connection in a process: its clients (and their connections) are reused."""
    if isinstance(location, LedgerStore):
        return location
    text = check_location(os.fspath(location), "ledger")
    key = (text, connection)
    with _lock:
        store = _opened.get(key)
        if store is None:
            store = _open(text, connection)
            _opened[key] = store
        return store


def _open(location: str, connection: Connection | None) -> LedgerStore:
    kind = OBJECT_SCHEMES.get(scheme_of(location) or "")
    if kind == "gcs":
        from onceover.ledger_store.gcs import GcsLedgerStore

        return GcsLedgerStore(location, connection)
    if kind == "s3":
        from onceover.ledger_store.objects import S3LedgerStore

        return S3LedgerStore(location)
    if kind == "azure":
        from onceover.ledger_store.objects import AzureLedgerStore

        return AzureLedgerStore(location)
    from onceover.ledger_store.posix import PosixStore

    return PosixStore(location)


def under(location: str | os.PathLike[str], *parts: str) -> str:
    """``parts`` under ``location``, a path or a URL alike."""
    text = os.fspath(location)
    for part in parts:
        text = join(text, part)
    return text
