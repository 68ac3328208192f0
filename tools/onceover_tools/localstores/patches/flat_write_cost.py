"""``flat_write_cost``: a write costs the same however many objects the server holds.

Cloud Storage's requests do not slow down as a bucket fills: a ledger writes a few
objects a micro-batch, forever, and the tests write thousands in one session.

gcp-storage-emulator 2026.7.19, even serving from memory, serialises the metadata of
every object it ever held (the soft-deleted ones too, kept seven days) into an in-memory
``.meta`` file after each write and each delete, which only a server restarted on a disk
would read back. Measured: a put took 19 ms with 400 objects held and 165 ms with 2,000.
This patch skips that file in memory (its data lives in the server's dicts, which every
request reads); a server on a disk still writes it.

Pinned by ``tests/localstores/test_gcs_patches.py``:
``test_in_memory_a_write_rewrites_no_metadata_file``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localstores.errors import LocalStoreVersionError

Method = Callable[[Any], None]


def skip_in_memory(original: Method) -> Method:
    """``Storage._write_config_to_file``, a no-op for a server in memory."""

    def _write_config_to_file(self: Any) -> None:
        if getattr(self, "_use_memory_fs", False):
            return
        original(self)

    return _write_config_to_file


def apply() -> None:
    """Skip the in-memory metadata file on every write."""
    from gcp_storage_emulator.storage import Storage

    original = getattr(Storage, "_write_config_to_file", None)
    if original is None:
        raise LocalStoreVersionError(
            "gcp-storage-emulator no longer has Storage._write_config_to_file; the Cloud "
            "Storage stand-in's patches need to be re-checked against this release"
        )
    Storage._write_config_to_file = skip_in_memory(original)
