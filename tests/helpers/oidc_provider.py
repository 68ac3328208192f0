"""A real OpenID Provider on 127.0.0.1 for the single sign-on tests: panva's
``oidc-provider`` (npm), run by tests/helpers/oidc_provider/server.mjs with three people
(vera: viewers; otto: viewers and operators; mallory: marketing; each one's subject is
its name) and one confidential client, ``onceover``, that must use PKCE. Its login form
takes the person's name and any password."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.helpers.waiting import wait_until

HERE = Path(__file__).parent / "oidc_provider"
CLIENT_ID = "onceover"
CLIENT_SECRET = "provider-client-secret-0123456789"
ROLES = "data-viewers:viewer,data-operators:operator"


@contextmanager
def oidc_provider(port: int, redirect_uri: str, log: Path) -> Iterator[str]:
    """The provider's issuer URL while the block runs."""
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        pytest.fail("the OpenID Provider is not installed: `make test` runs npm ci in " + str(HERE))
    issuer = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen(
            [node, str(HERE / "server.mjs"), str(port), redirect_uri, CLIENT_SECRET],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip

        def ready() -> bool | None:
            try:
                answer = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=2)
            except httpx.TransportError:
                return None
            return answer.status_code == 200 or None

        def alive() -> None:
            assert process.poll() is None, log.read_text()[-2000:]

        try:
            wait_until("the OpenID Provider answering", ready, 60, every_s=0.1, between=alive)
            yield issuer
        finally:
            process.terminate()
            process.wait(timeout=20)
