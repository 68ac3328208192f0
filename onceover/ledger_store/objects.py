"""The ledger in an S3 bucket (``s3://``, ``s3a://``) or Azure Blob / ADLS Gen2 container
(``abfss://``, ``az://``), through obstore, one client for both stores' conditional writes.

- create if absent: ``PutObject`` with ``If-None-Match: *`` (S3 since 2024-08; Azure);
- replace if unchanged: ``If-Match: <ETag>`` (S3 since 2024-11; Azure);
- reads, listings and both are strongly consistent on each.

Credentials and endpoints are found as each cloud's own clients find them: for S3 the
``AWS_*`` variables (``AWS_ENDPOINT_URL`` for an S3-compatible store or a local stand-in,
``AWS_ALLOW_HTTP`` for a plain-HTTP one), web identity (EKS), the container's and the
instance's metadata (EMR); for Azure the ``AZURE_*`` variables (an account key, a SAS, a
service principal, a managed identity). Executors use what they are given
(``spark.executorEnv.*``, their instance's role).

A request the client cannot complete after its retries raises
:class:`onceover.errors.LedgerStoreError` naming the URL and the cause.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from onceover.errors import ConfigurationError, LedgerStoreError
from onceover.ledger_store.base import LedgerStore, Listing, Stored, Sync

RETRY_TIMEOUT_ENV = "ONCEOVER_LEDGER_RETRY_TIMEOUT_S"
"""How long a ledger request is retried before the write fails naming the store (default
:data:`DEFAULT_RETRY_TIMEOUT_S`)."""
DEFAULT_RETRY_TIMEOUT_S = 60.0
REQUEST_TIMEOUT = "30s"

T = TypeVar("T")


def retry_timeout_s() -> float:
    text = os.environ.get(RETRY_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_RETRY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(
            f"{RETRY_TIMEOUT_ENV}={text!r} is not a number of seconds"
        ) from None
    if value <= 0:
        raise ConfigurationError(f"{RETRY_TIMEOUT_ENV}={text!r}: give a positive number of seconds")
    return value


class ObjectStore(LedgerStore):
    """An obstore store under one bucket (container) and prefix."""

    _clients = ("_store",)

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url.rstrip("/")
        self._store: Any = None

    # -- what each cloud builds -----------------------------------------------------------

    def _build(self, client_options: Any, retry: Any) -> Any:
        raise NotImplementedError

    @property
    def client(self) -> Any:
        if self._store is None:
            retry: Any = {
                "max_retries": 10,
                "retry_timeout": timedelta(seconds=retry_timeout_s()),
                "backoff": {
                    "init_backoff": timedelta(milliseconds=50),
                    "max_backoff": timedelta(seconds=5),
                    "base": 2.0,
                },
            }
            options: Any = {"timeout": REQUEST_TIMEOUT, "connect_timeout": "5s"}
            try:
                self._store = self._build(options, retry)
            except Exception as exc:  # the client's own configuration errors
                raise LedgerStoreError(self.url, exc) from exc
        return self._store

    def _call(self, kind: str, key: str, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self.requests.add(kind, time.perf_counter() - started)

    # -- the operations ------------------------------------------------------------------

    def read(self, key: str) -> Stored | None:
        import obstore

        try:
            result = self._call("get", key, lambda: obstore.get(self.client, key))
            data = bytes(result.bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        return Stored(data, _version(result.meta))

    def exists(self, key: str) -> bool:
        import obstore

        try:
            self._call("head", key, lambda: obstore.head(self.client, key))
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise LedgerStoreError(self.where(key), exc) from exc
        return True

    def list(self, prefix: str) -> Listing:
        import obstore

        try:
            found = self._call(
                "list", prefix, lambda: obstore.list_with_delimiter(self.client, prefix or None)
            )
        except FileNotFoundError:
            return Listing()
        except Exception as exc:
            raise LedgerStoreError(self.where(prefix), exc) from exc
        cut = len(prefix.rstrip("/")) + 1 if prefix else 0
        files = {str(o["path"])[cut:]: _version(o) for o in found["objects"]}
        folders = tuple(sorted(str(p)[cut:].rstrip("/") for p in found["common_prefixes"]))
        return Listing(files, folders)

    def walk(self, prefix: str) -> Iterator[tuple[str, str]]:
        """One flat listing (paged), not one a folder."""
        import obstore

        folder = prefix.rstrip("/")

        def listing() -> list[tuple[str, str]]:
            chunks = obstore.list(self.client, f"{folder}/" if folder else None)
            return [(str(o["path"]), _version(o)) for chunk in chunks for o in chunk]

        try:
            found = self._call("list", prefix, listing)
        except FileNotFoundError:
            return iter(())
        except Exception as exc:
            raise LedgerStoreError(self.where(prefix), exc) from exc
        return iter(found)

    def create(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str | None:
        return self._put(key, data, "create")

    def swap(self, key: str, data: bytes, version: str, *, sync: Sync = Sync.DURABLE) -> str | None:
        return self._put(key, data, {"e_tag": version})

    def put(self, key: str, data: bytes, *, sync: Sync = Sync.DURABLE) -> str:
        version = self._put(key, data, "overwrite")
        assert version is not None
        return version

    def delete(self, key: str) -> None:
        import obstore

        try:
            self._call("delete", key, lambda: obstore.delete(self.client, key))
        except FileNotFoundError:
            return
        except Exception as exc:
            raise LedgerStoreError(self.where(key), exc) from exc

    def _put(self, key: str, data: bytes, mode: Any) -> str | None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        deadline = time.monotonic() + retry_timeout_s()
        for attempt in range(CONFLICT_RETRIES):
            try:
                result = self._call(
                    "put", key, lambda: obstore.put(self.client, key, data, mode=mode)
                )
                return _version(result)
            except (AlreadyExistsError, PreconditionError) as exc:
                if not _conflict(exc):  # refused by its condition
                    return self.ours_after_all(key, data)
                refused: Exception = exc
            except FileNotFoundError as exc:
                if isinstance(mode, dict):
                    return self.ours_after_all(key, data)  # gone since it was read
                raise LedgerStoreError(self.where(key), exc) from exc  # no such bucket
            except Exception as exc:
                if not _conflict(exc):
                    raise LedgerStoreError(self.where(key), exc) from exc
                refused = exc
            # S3 answers 409 ConditionalRequestConflict to a conditional write racing
            # another on the key, and documents the fix: retry it (it then wins, or is
            # refused by its condition like any other loser). The client raises it as
            # "already exists", naming the 409 and S3's code.
            if time.monotonic() >= deadline:
                raise LedgerStoreError(self.where(key), refused)
            time.sleep(min(CONFLICT_BACKOFF_S * 2**attempt, 1.0))
        raise LedgerStoreError(self.where(key), "kept answering 409 ConditionalRequestConflict")


CONFLICT_RETRIES = 8
CONFLICT_BACKOFF_S = 0.05


def _conflict(exc: Exception) -> bool:
    """S3's answer to concurrent conditional writes on one key (409 Conflict)."""
    text = str(exc)
    return "ConditionalRequestConflict" in text or "409 Conflict" in text


def _version(meta: Any) -> str:
    tag = meta.get("e_tag")
    if not tag:
        raise LedgerStoreError("the store", "answered a write or read without an ETag")
    return str(tag)


class S3LedgerStore(ObjectStore):
    """``s3://bucket/prefix`` (``s3a://``, Hadoop's spelling, is the same place)."""

    KIND = "s3"

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if not parts.netloc:
            raise ConfigurationError(f"{url!r}: name the bucket (s3://bucket/path)")
        super().__init__(f"s3://{parts.netloc}{parts.path}")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")

    def _build(self, client_options: Any, retry: Any) -> Any:
        from obstore.store import S3Store

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        allow_http = os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true" or bool(
            endpoint and endpoint.startswith("http://")
        )
        # Passing client options replaces those read from the environment: say it again.
        client_options = {**client_options, "allow_http": allow_http}
        config: dict[str, Any] = {}
        if endpoint:
            config["endpoint"] = endpoint
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            config["region"] = region
        credential_provider = _boto3_credentials()
        return S3Store(
            self.bucket,
            prefix=self.prefix or None,
            client_options=client_options,
            retry_config=retry,
            credential_provider=credential_provider,
            **config,
        )


def _boto3_credentials() -> Any:
    """A named profile (``AWS_PROFILE``: SSO, an assumed role, ``~/.aws/credentials``) is
    read through boto3 where it is installed: obstore's own chain reads the variables,
    web identity and instance metadata, but no profile files."""
    if not os.environ.get("AWS_PROFILE"):
        return None
    try:
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        raise ConfigurationError(
            "AWS_PROFILE is set but boto3 is not installed: install boto3 beside the sink "
            "(pip install boto3), or give the credentials as AWS_* variables"
        ) from None
    return Boto3CredentialProvider()


class AzureLedgerStore(ObjectStore):
    """``abfss://container@account.dfs.core.windows.net/prefix`` (ADLS Gen2, as Hadoop
    spells it) or ``az://container/prefix`` (the account from ``AZURE_STORAGE_ACCOUNT_NAME``)."""

    KIND = "azure"

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        container, _, host = parts.netloc.partition("@")
        if not container:
            raise ConfigurationError(
                f"{url!r}: name the container (abfss://container@account.dfs.core.windows.net/"
                "path or az://container/path)"
            )
        self.container = container
        self.account = host.split(".", 1)[0] if host else None
        self.prefix = parts.path.strip("/")
        super().__init__(url)

    def _build(self, client_options: Any, retry: Any) -> Any:
        from obstore.store import AzureStore

        config: dict[str, Any] = {}
        if self.account:
            config["account_name"] = self.account
        return AzureStore(
            self.container,
            prefix=self.prefix or None,
            client_options=client_options,
            retry_config=retry,
            **config,
        )
