"""``selected_generation``: ``generation=`` reads or deletes that generation, or answers 404.

objects.get, objects.delete and downloads take ``generation``, documented as "If
present, selects a specific revision of this object (as opposed to the latest version,
the default)". In a bucket without Object Versioning (the stand-in keeps no noncurrent
versions) only the live generation can be selected; any other is not found (404).

gcp-storage-emulator 2026.7.19 ignores the parameter and serves the live object whatever
generation is asked for. python-storage reads an object's metadata and then downloads
with ``generation=<the generation that metadata named>``; when another writer replaced
the object in between, Cloud Storage answers 404 and the reader looks again, while the
stand-in served the newer bytes to a reader that believed it had the older generation.
Soft-deleted generations (``softDeleted=true``) are left to the stand-in, which keeps them.

Pinned by ``tests/localstores/test_gcs_patches.py``:
``test_a_replaced_generation_is_not_found``.
"""

from __future__ import annotations

from typing import Any

from onceover_tools.localstores.patches import answers
from onceover_tools.localstores.patches.wrapping import Handler, wrap_handler


def _make(original: Handler) -> Handler:
    def selected(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        wanted = answers.first(request.query, "generation")
        soft_deleted = (answers.first(request.query, "softDeleted") or "").lower()
        if wanted is None or soft_deleted in ("1", "true", "yes"):
            return original(request, response, storage, *args, **kwargs)
        bucket, name = request.params["bucket_name"], request.params["object_id"]
        live = answers.live_generation(storage, bucket, name)
        try:
            selects_live = live is not None and int(wanted) == live
        except ValueError:
            answers.invalid(response, f"Invalid generation: {wanted}", xml=answers.is_xml(request))
            return None
        if live is not None and not selects_live:
            answers.not_found(response, bucket, name, xml=answers.is_xml(request))
            return None
        return original(request, response, storage, *args, **kwargs)  # live, or its 404

    return selected


def apply() -> None:
    """Answer 404 for a generation of an object other than its live one."""
    for handler in ("get", "download", "delete"):
        wrap_handler(handler, _make)
