"""The ledger in a Cloud Storage bucket (``gs://bucket/prefix``), through Google's own
client (the JSON API).

- create if absent: an upload with ``ifGenerationMatch=0``;
- replace if unchanged: ``ifGenerationMatch=<the generation read>``;
- a read is one download, which names the generation it served (``x-goog-generation``),
  so bytes and version always agree; listings and all of these are strongly consistent.

Credentials are found as every Google client finds them: the sink's connection options
(``credentialsFile``, ``credentials``, ``gcpAccessToken``, impersonation), else
Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, the gcloud user's,
the metadata server on Dataproc and GKE). ``STORAGE_EMULATOR_HOST`` points the client at
a local stand-in, without credentials, as it does for every Google Cloud Storage client.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from onceover.errors import ConfigurationError, LedgerStoreError
from onceover.ledger_store.base import LedgerStore, Listing, Stored, Sync, join

if TYPE_CHECKING:
    from onceover.connection import Connection

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
REQUEST_TIMEOUT_S = (5.0, 30.0)
"""Connect and read timeouts of one request."""
T = TypeVar("T")


class GcsLedgerStore(LedgerStore):
    KIND = "gcs"
    _clients = ("_bucket",)

    def __init__(self, url: str, connection: Connection | None = None) -> None:
        super().__init__()
        parts = urlsplit(url)
        if not parts.netloc:
            raise ConfigurationError(f"{url!r}: name the bucket (gs://bucket/path)")
        self.url = f"gs://{parts.netloc}{parts.path}".rstrip("/")
        self.bucket_name = parts.netloc
        self.prefix = parts.path.strip("/")
        self.connection = connection
        self._bucket: Any = None

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            from google.cloud.storage import Client

            try:
                credentials, project = self._credentials()
                client = Client(project=project, credentials=credentials)
                self._bucket = client.bucket(self.bucket_name)
            except Exception as exc:
                raise LedgerStoreError(self.url, exc) from exc
        return self._bucket

    def _credentials(self) -> tuple[Any, str | None]:
        given = self.connection is not None and not self.connection.is_default
        if os.environ.get(EMULATOR_ENV) and not given:
            return None, None  # the client goes to the stand-in without credentials
        from onceover.connection import Connection

        return (self.connection or Connection()).credentials()

    def _name(self, key: str) -> str:
        return join(self.prefix, key)

    def _call(
        self, kind: str, key: str, call: Callable[[], T], *, answers: tuple[type, ...] = ()
    ) -> T:
        """``call``, counted; an exception in ``answers`` is the caller's to read (an absent
        object, a failed precondition), any other a :class:`LedgerStoreError`."""
        started = time.perf_counter()
        try:
            return call()
        except LedgerStoreError:
            raise
        except Exception as exc:
            if answers and isinstance(exc, answers):
                raise
            raise LedgerStoreError(self.where(key), exc) from exc
        finally:
            self.requests.add(kind, time.perf_counter() - started)

    @property
    def _retry(self) -> Any:
        """Google's default retry (transient errors, 429, 5xx), bounded by the ledger's
        retry time (``ONCEOVER_LEDGER_RETRY_TIMEOUT_S``); a conditional write is
        idempotent, and an unconditional one writes the same bytes again."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        from onceover.ledger_store.objects import retry_timeout_s

        return DEFAULT_RETRY.with_timeout(retry_timeout_s())

    # -- the operations ------------------------------------------------------------------

    def read(self, key: str) -> Stored | None:
        from google.api_core.exceptions import NotFound

        blob = self.bucket.blob(self._name(key))
        try:
            data = self._call(
                "get",
                key,
                lambda: blob.download_as_bytes(retry=self._retry, timeout=REQUEST_TIMEOUT_S),
                answers=(NotFound,),
            )
        except NotFound:
            return None
        # One request: a download names the generation it served (x-goog-generation),
        # which the client sets on the blob, so bytes and version always agree.
        if blob.generation is None:
            raise LedgerStoreError(self.where(key), "a download named no generation")
        return Stored(bytes(data), str(blob.generation))

    def exists(self, key: str) -> bool:
        found = self._call(
            "head",
            key,
            lambda: self.bucket.get_blob(
                self._name(key), retry=self._retry, timeout=REQUEST_TIMEOUT_S
            ),
        )
        return found is not None

    def list(self, prefix: str) -> Listing:
        folder = self._name(prefix).rstrip("/")
        start = f"{folder}/" if folder else ""

        def listing() -> Listing:
            pages = self.bucket.client.list_blobs(
                self.bucket,
                prefix=start,
                delimiter="/",
                retry=self._retry,
                timeout=REQUEST_TIMEOUT_S,
            )
            files = {b.name[len(start) :]: str(b.generation) for b in pages}
            folders = tuple(sorted(p[len(start) :].rstrip("/") for p in pages.prefixes))
            return Listing(files, folders)

        return self._call("list", prefix, listing)

    def walk(self, prefix: str) -> Iterator[tuple[str, str]]:
        """One flat listing (paged), not one a folder."""
        folder = self._name(prefix).rstrip("/")
        start = f"{folder}/" if folder else ""
        cut = len(self.prefix) + 1 if self.prefix else 0

        def listing() -> list[tuple[str, str]]:
            pages = self.bucket.client.list_blobs(
                self.bucket, prefix=start, retry=self._retry, timeout=REQUEST_TIMEOUT_S
            )
            return [(b.name[cut:], str(b.generation)) for b in pages]

        return iter(self._call("list", prefix, listing))

    def create(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str | None:
        return self._upload(key, data, 0)

    def swap(self, key: str, data: bytes, version: str, *, sync: Sync = Sync.DURABLE) -> str | None:
        return self._upload(key, data, int(version))

    def put(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str:
        version = self._upload(key, data, None)
        assert version is not None
        return version

    def delete(self, key: str) -> None:
        from google.api_core.exceptions import NotFound

        blob = self.bucket.blob(self._name(key))
        try:
            self._call(
                "delete",
                key,
                lambda: blob.delete(retry=self._retry, timeout=REQUEST_TIMEOUT_S),
                answers=(NotFound,),
            )
        except NotFound:
            return

    def _upload(self, key: str, data: bytes, generation: int | None) -> str | None:
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(self._name(key))
        try:
            self._call(
                "put",
                key,
                lambda: blob.upload_from_string(
                    data,
                    content_type="application/json",
                    if_generation_match=generation,
                    retry=self._retry,
                    timeout=REQUEST_TIMEOUT_S,
                ),
                answers=(PreconditionFailed,),
            )
        except PreconditionFailed:
            # The client retries a conditional upload whose answer it lost (it is
            # idempotent), and the retry of one that took is refused by its condition.
            return self.ours_after_all(key, data)
        return str(blob.generation)
