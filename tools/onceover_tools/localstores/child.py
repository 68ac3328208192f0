"""What both stand-ins share: a server in a child process on a port of its own, ready
once it answers HTTP, holding buckets named as S3 names them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

import httpx

from onceover.preflight import check_port_free, free_port
from onceover.processes import ChildProcess, StartStop
from onceover_tools.localstores.errors import LocalStoreError

START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 5.0

BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""A bucket name both S3 and Cloud Storage take: 3 to 63 lowercase letters, digits,
dots and hyphens, starting and ending with a letter or digit."""


def local_http(
    method: str,
    url: str,
    *,
    params: dict[str, str] | None = None,
    json: dict[str, str] | None = None,
) -> httpx.Response:
    """One request to a stand-in: never through a proxy the environment names."""
    return httpx.request(
        method, url, params=params, json=json, timeout=REQUEST_TIMEOUT_S, trust_env=False
    )


class StandInProcess(StartStop):
    """A stand-in server in a child process; :meth:`start` returns once it answers.

    :meth:`launch` and :meth:`wait_ready` are :meth:`start` in two halves, so that
    several stand-ins start side by side.
    """

    scheme = ""
    """The URL scheme of its buckets (``s3``, ``gs``)."""

    def __init__(
        self,
        name: str,
        argv: Callable[[str, int], Sequence[str]],
        *,
        host: str,
        port: int,
        log_path: Path | None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.child = ChildProcess(name, argv(host, self.port), log_path=log_path)
        self._ready = False

    @property
    def endpoint(self) -> str:
        """Its HTTP endpoint, ``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def url(self, bucket: str, path: str = "") -> str:
        """The URL of ``path`` in ``bucket`` (``s3://bucket/path``; the bucket's own
        without a path)."""
        path = path.lstrip("/")
        return f"{self.scheme}://{bucket}/{path}" if path else f"{self.scheme}://{bucket}"

    def environment(self) -> dict[str, str]:
        """The variables a client needs to reach it."""
        raise NotImplementedError

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` and return its URL (``s3://name``)."""
        if not BUCKET_NAME.fullmatch(name) or ".." in name:
            raise LocalStoreError(
                f"{name!r} is not a bucket name: 3 to 63 lowercase letters, digits, dots "
                "and hyphens, starting and ending with a letter or digit"
            )
        self._started()
        response = self._create_bucket(name)
        if not response.is_success:
            raise LocalStoreError(
                f"{self.child.name} did not create bucket {name}: HTTP "
                f"{response.status_code} {response.text[:200]}"
            )
        return self.url(name)

    def _create_bucket(self, name: str) -> httpx.Response:
        raise NotImplementedError

    def _answering(self) -> bool:
        """Whether it answers a request yet (any answer: it is serving)."""
        raise NotImplementedError

    def launch(self) -> None:
        """Start the child without waiting for it (see :meth:`wait_ready`)."""
        if self.child.popen is None:
            check_port_free(self.host, self.port, "port=")
            self.child.start()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until the launched child answers; stop it and raise if it does not."""

        def answering() -> bool | None:
            try:
                return self._answering() or None
            except httpx.TransportError:
                return None

        try:
            self.child.wait_until(f"answering on {self.endpoint}", answering, timeout_s)
        except Exception as exc:
            self.child.stop()
            raise LocalStoreError(str(exc)) from exc
        self._ready = True

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Start the child and wait until it answers."""
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def stop(self) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL after a grace period); its data goes."""
        self._ready = False
        return self.child.stop()

    def _started(self) -> None:
        if not self._ready:
            raise LocalStoreError(f"{self.child.name} is not running; call start() first")
