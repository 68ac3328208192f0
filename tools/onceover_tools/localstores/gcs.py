"""The local Cloud Storage: gcp-storage-emulator, patched, in a child process
(:mod:`onceover_tools.localstores.gcs_server`).

Clients find it through ``STORAGE_EMULATOR_HOST``, which every Google Cloud Storage client
reads; google-cloud-storage then sends no credentials. What is patched, and why, is in
:mod:`onceover_tools.localstores.patches`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import httpx

from onceover_tools.localstores.child import StandInProcess, local_http

PROJECT = "onceover-local"
"""The project the stand-in's buckets are created in (it keeps no projects)."""


class LocalGCS(StandInProcess):
    """The Cloud Storage stand-in on ``host:port`` (0: a free port), in a child process.

    ``without_patches`` leaves patches out (their names:
    :data:`onceover_tools.localstores.patches.NAMES`), for a test that shows what the
    stand-in does without one; everything else runs them all.
    """

    scheme = "gs"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        without_patches: Sequence[str] = (),
        log_path: Path | None = None,
    ) -> None:
        self.without_patches = tuple(without_patches)

        def argv(host: str, port: int) -> list[str]:
            command = [sys.executable, "-m", "onceover_tools.localstores.gcs_server"]
            command += ["--host", host, "--port", str(port)]
            for name in self.without_patches:
                command += ["--without-patch", name]
            return command

        super().__init__("the local Cloud Storage", argv, host=host, port=port, log_path=log_path)

    def environment(self) -> dict[str, str]:
        """``STORAGE_EMULATOR_HOST``: where google-cloud-storage (and every Google Cloud
        Storage client) sends its requests instead of Google, without credentials."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def _create_bucket(self, name: str) -> httpx.Response:
        return local_http(
            "POST",
            f"{self.endpoint}/storage/v1/b",
            params={"project": PROJECT},
            json={"name": name},
        )

    def _answering(self) -> bool:
        return local_http("GET", f"{self.endpoint}/storage/v1/b").is_success
