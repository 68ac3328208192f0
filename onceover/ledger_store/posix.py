"""The ledger on a mounted disk: a local path for one machine, a shared one (NFS,
Filestore) for a cluster. The files are what the ledger has always written.

A write is a temporary file beside its target, fsynced as :class:`Sync` says, then
renamed over it (a replace) or hard-linked to it (a create: the link fails if another
writer created it first), then the directory fsynced. A crash leaves the old file or
the new one, never half of one. Each read, listing, write and removal is counted as an
object store's request would be (:class:`onceover.ledger_store.base.RequestCounts`). A
compare-and-swap holds an exclusive ``flock`` on a
lock file beside its target while it compares and renames; the ledger only swaps files
no hot path writes (a driver's claim, a retention summary).

A disk without hard links (a FUSE mount of a bucket: gcsfuse, DBFS, s3fs; some volumes)
cannot give a create-if-absent, so a create there is refused with the fix
(:class:`onceover.errors.UnsuitableLedgerStorageError`): the ledger belongs on the
bucket's URL instead.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from onceover.errors import LedgerStoreError, UnsuitableLedgerStorageError
from onceover.ledger_store.base import LedgerStore, Listing, Stored, Sync

NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}
)
"""What ``link(2)`` answers on a filesystem that has no hard links (FUSE mounts answer
EPERM, ENOSYS or ENOTSUP; vfat EPERM)."""
RMTREE_RACES = 3


def version_of(stat: os.stat_result) -> str:
    """A file's version: it is only ever replaced by a rename, so a changed file has a
    new inode even where the clock is coarse."""
    return f"{stat.st_ino}-{stat.st_mtime_ns}-{stat.st_size}"


def _hidden(name: str) -> bool:
    """A write's temporary file or a swap's lock file, never a ledger file."""
    return name.startswith(".") and (name.endswith(".tmp") or name.endswith(".lock"))


class PosixStore(LedgerStore):
    KIND = "posix"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__()
        self.root = Path(os.path.abspath(os.path.expanduser(os.fspath(root))))
        self.url = str(self.root)

    def path(self, key: str) -> Path:
        return self.root / key if key else self.root

    def read(self, key: str) -> Stored | None:
        with self.requests.timed("get"):
            return self._read(key)

    def _read(self, key: str) -> Stored | None:
        path = self.path(key)
        try:
            with open(path, "rb") as handle:
                version = version_of(os.fstat(handle.fileno()))
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            return None
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        return Stored(data, version)

    def exists(self, key: str) -> bool:
        with self.requests.timed("head"):
            return self.path(key).is_file()

    def list(self, prefix: str) -> Listing:
        with self.requests.timed("list"):
            return self._list(prefix)

    def _list(self, prefix: str) -> Listing:
        files: dict[str, str] = {}
        folders: list[str] = []
        try:
            with os.scandir(self.path(prefix)) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.name)
                    elif not _hidden(entry.name):
                        try:
                            files[entry.name] = version_of(entry.stat(follow_symlinks=False))
                        except FileNotFoundError:
                            continue  # removed since the listing
        except (FileNotFoundError, NotADirectoryError):
            return Listing()
        except OSError as exc:
            raise LedgerStoreError(self.where(prefix), exc) from exc
        return Listing(files, tuple(sorted(folders)))

    def create(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str | None:
        return self._write(key, data, exclusive=True, sync=sync)

    def put(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str:
        version = self._write(key, data, exclusive=False, sync=sync)
        assert version is not None
        return version

    def swap(self, key: str, data: bytes, version: str, *, sync: Sync = Sync.DURABLE) -> str | None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path.parent / f".{path.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = version_of(path.stat())
            except FileNotFoundError:
                return None  # gone since it was read
            if current != version:
                return self.ours_after_all(key, data)
            return self.put(key, data, sync=sync)
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        finally:
            os.close(fd)  # releases the lock

    def delete(self, key: str) -> None:
        try:
            with self.requests.timed("delete"):
                self.path(key).unlink(missing_ok=True)
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc

    def delete_tree(self, prefix: str) -> None:
        path = self.path(prefix)
        for _ in range(RMTREE_RACES):
            try:
                shutil.rmtree(path)
                return
            except FileNotFoundError:
                # Gone already, or a part of it removed at the same moment by another
                # remover (two writes of one call share a registry): look again.
                if not path.exists():
                    return
            except OSError as exc:
                raise LedgerStoreError(self.where(prefix), exc) from exc
        shutil.rmtree(path, ignore_errors=True)

    def settle(self, prefix: str) -> None:
        try:
            fsync_directory(self.path(prefix))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LedgerStoreError(self.where(prefix), exc) from exc

    def _write(self, key: str, data: bytes, *, exclusive: bool, sync: Sync) -> str | None:
        with self.requests.timed("put"):
            return self._write_file(key, data, exclusive=exclusive, sync=sync)

    def _write_file(self, key: str, data: bytes, *, exclusive: bool, sync: Sync) -> str | None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if sync is not Sync.NONE:
                    os.fsync(handle.fileno())
                version = version_of(os.fstat(handle.fileno()))
            if exclusive:
                try:
                    os.link(temp, path)  # fails if another writer created it first
                except FileExistsError:
                    return self.ours_after_all(key, data)
                except OSError as exc:
                    if exc.errno in NO_HARD_LINKS:
                        raise UnsuitableLedgerStorageError(
                            self.url,
                            f"the filesystem at {self.url} has no hard links ({exc.strerror}), "
                            "so the ledger cannot create a record only if it is absent: it "
                            "is likely a FUSE mount of a bucket (gcsfuse, DBFS, s3fs) or a "
                            "volume without them, where renames are not atomic either. Give "
                            "the bucket's own URL instead (gs://bucket/path, s3://bucket/path, "
                            "abfss://container@account.dfs.core.windows.net/path), or a disk "
                            "with hard links (local, NFS, Filestore)",
                        ) from exc
                    raise
                version = version_of(path.stat())
            else:
                os.replace(temp, path)
            if sync is Sync.DURABLE:
                fsync_directory(path.parent)
            return version
        except LedgerStoreError:
            raise
        except OSError as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        finally:
            if os.path.exists(temp):
                os.unlink(temp)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
