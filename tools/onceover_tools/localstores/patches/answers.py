"""What the patches read of a request and of the stand-in's objects, and how they answer.

The stand-in serves Cloud Storage's JSON API (``/storage/v1``, ``/upload/storage/v1``,
``/download/storage/v1``, and ``/b/...`` without the prefix, as the Node client calls it)
and a little of its XML API (``/<bucket>/<object>``); an answer's body is JSON or XML as
the API the request came in on.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from xml.sax.saxutils import escape

JSON_PREFIXES = ("/storage/v1/", "/upload/storage/v1/", "/download/storage/v1/", "/b/")

CONDITION_NOT_MET = "At least one of the pre-conditions you specified did not hold."
"""The message of Cloud Storage's 412 (reason ``conditionNotMet`` in the JSON API, code
``PreconditionFailed`` in the XML API)."""


def is_xml(request: Any) -> bool:
    """Whether ``request`` came in on the XML API (``/<bucket>/<object>``)."""
    return not str(request.path).startswith(JSON_PREFIXES)


def first(query: dict[str, list[str]], name: str) -> str | None:
    """The first value of a query parameter, or None."""
    values = query.get(name)
    return values[0] if values else None


def live_object(storage: Any, bucket: str, name: str) -> dict[str, Any] | None:
    """The resource of the live object ``bucket/name``, or None when there is none."""
    found: dict[str, Any] | None = storage.objects.get(bucket, {}).get(name)
    return found


def live_generation(storage: Any, bucket: str, name: str) -> int | None:
    """The generation of the live object ``bucket/name``, or None when there is none."""
    found = live_object(storage, bucket, name)
    return None if found is None else int(found["generation"])


def precondition_failed(response: Any, *, xml: bool) -> None:
    """Answer 412 Precondition Failed as Cloud Storage does on the XML or the JSON API."""
    response.status = HTTPStatus.PRECONDITION_FAILED
    if xml:
        _xml_error(response, "PreconditionFailed", CONDITION_NOT_MET)
    else:
        _json_error(response, HTTPStatus.PRECONDITION_FAILED, "conditionNotMet", CONDITION_NOT_MET)


def not_modified(response: Any) -> None:
    """Answer 304 Not Modified, which has no body."""
    response.status = HTTPStatus.NOT_MODIFIED
    response.write_file(b"", content_type=None)


def invalid(response: Any, message: str, *, xml: bool) -> None:
    """Answer 400 Bad Request naming what is wrong."""
    response.status = HTTPStatus.BAD_REQUEST
    if xml:
        _xml_error(response, "InvalidArgument", message)
    else:
        _json_error(response, HTTPStatus.BAD_REQUEST, "invalid", message)


def not_found(response: Any, bucket: str, name: str, *, xml: bool) -> None:
    """Answer 404 Not Found for the object ``bucket/name``."""
    response.status = HTTPStatus.NOT_FOUND
    message = f"No such object: {bucket}/{name}"
    if xml:
        _xml_error(response, "NoSuchKey", message)
    else:
        _json_error(response, HTTPStatus.NOT_FOUND, "notFound", message)


def _json_error(response: Any, status: HTTPStatus, reason: str, message: str) -> None:
    response.json(
        {
            "error": {
                "code": status.value,
                "message": message,
                "errors": [{"domain": "global", "reason": reason, "message": message}],
            }
        }
    )


def _xml_error(response: Any, code: str, message: str) -> None:
    body = (
        "<?xml version='1.0' encoding='UTF-8'?>"
        f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>"
    )
    response.write_file(body.encode(), content_type="application/xml; charset=UTF-8")
