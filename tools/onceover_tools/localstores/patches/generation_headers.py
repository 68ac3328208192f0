"""``generation_headers``: an object's data comes with its generation.

Cloud Storage answers a download, and the XML API's upload, with the object's
``x-goog-generation`` and ``x-goog-metageneration`` headers (XML API reference headers), and
Google's own client relies on them: python-storage's ``Blob.download_as_bytes`` sets the
blob's ``generation`` and ``metageneration`` from those headers of the download's answer.

gcp-storage-emulator 2026.7.19 sends neither, so after a download ``blob.generation`` is
None: a reader that reads an object and keeps ``blob.generation`` to swap on later keeps
None, and ``upload_from_string(..., if_generation_match=None)`` is an unconditional
upload. The patch adds both headers to every successful download (JSON and XML, whole or
ranged) and XML upload, naming the object served or made.

Pinned by ``tests/localstores/test_gcs_patches.py``:
``test_a_download_names_the_generation_it_served``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from onceover_tools.localstores.patches import answers
from onceover_tools.localstores.patches.wrapping import Handler, wrap_handler

_SERVED = (HTTPStatus.OK, HTTPStatus.PARTIAL_CONTENT)


def _make(original: Handler) -> Handler:
    def with_generation(
        request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any
    ) -> Any:
        result = original(request, response, storage, *args, **kwargs)
        if response.status in _SERVED:
            bucket, name = request.params["bucket_name"], request.params["object_id"]
            obj = answers.live_object(storage, bucket, name)
            if obj is not None:
                response["x-goog-generation"] = str(obj["generation"])
                response["x-goog-metageneration"] = str(obj["metageneration"])
        return result

    return with_generation


def apply() -> None:
    """Name the generation in the answers of downloads and XML uploads."""
    wrap_handler("download", _make)
    wrap_handler("xml_upload", _make)
