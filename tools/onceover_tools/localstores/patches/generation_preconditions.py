"""``generation_preconditions``: ``ifGenerationMatch`` and ``ifGenerationNotMatch`` hold.

Cloud Storage's JSON API documents them on objects.insert, get, patch and delete:

    ``ifGenerationMatch``: "Makes the operation conditional on whether the object's
    current generation matches the given value. Setting to 0 makes the operation succeed
    only if there are no live versions of the object."

    ``ifGenerationNotMatch``: "Makes the operation conditional on whether the object's
    current generation does not match the given value. If no live object exists, the
    precondition fails. Setting to 0 makes the operation succeed only if there is a live
    version of the object."

and "Request preconditions" says what a failure answers: for ``ifGenerationMatch`` (the
XML API's ``x-goog-if-generation-match`` header) "the request fails with a 412
Precondition Failed response"; for ``ifGenerationNotMatch``, "If the values match, the
request fails with a 304 Not Modified response". A JSON 412 carries the reason
``conditionNotMet``.

gcp-storage-emulator 2026.7.19 ignores them all: a second create-if-absent
(``ifGenerationMatch=0``) and a swap from a generation that is no longer live both
overwrite, last write wins. They are the whole of a ledger's protection in a bucket
(create if absent, replace if unchanged), so without them a lost race passes unseen.

Enforced on every upload (media, multipart, resumable, the XML API's PUT), on the
destination of copy, rewrite and compose, on delete, on metadata get and patch, and on
downloads (JSON and XML). A resumable upload's preconditions are its session's: checked
when the session starts and again when its last chunk completes the object, since
another writer may have written in between. An operation on an object that must exist
still answers 404 first when there is none. Every request through these handlers runs
under one lock, so no other write comes between a check and the write it guards (the
stand-in serves one request at a time today; the lock keeps it so if it did not).

Not covered (still ignored): ``ifMetagenerationMatch`` / ``ifMetagenerationNotMatch``,
the ``ifSource*`` preconditions of copy and rewrite, and the sub-requests of a batch.

Switched off with ``--without-patch generation_preconditions`` (gcs_server), which the
test that shows the stand-in without it starts.

Pinned by ``tests/localstores/test_gcs_patches.py``:
``test_create_if_absent_refuses_a_second_create``,
``test_a_swap_from_a_stale_generation_is_refused``,
``test_delete_with_a_wrong_generation_is_refused``,
``test_reads_check_generation_preconditions``,
``test_a_resumable_upload_checks_when_it_completes``,
``test_xml_api_uploads_check_the_generation_header``; shown needed by
``test_without_the_patch_the_stand_in_ignores_preconditions``.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from onceover_tools.localstores.patches import answers
from onceover_tools.localstores.patches.wrapping import Handler, wrap_handler

_lock = threading.RLock()
"""Held by every request through a wrapped handler, from its check to the end of its
write."""

_sessions: dict[str, Preconditions] = {}
"""The preconditions of each resumable upload session not yet completed, by upload id."""


@dataclass(frozen=True)
class Preconditions:
    """A request's generation preconditions (None: not given)."""

    match: int | None = None
    not_match: int | None = None

    @classmethod
    def of_json(cls, request: Any) -> Preconditions:
        """From the JSON API's query parameters; raises ValueError on a non-number."""
        match = answers.first(request.query, "ifGenerationMatch")
        not_match = answers.first(request.query, "ifGenerationNotMatch")
        return cls(_number(match), _number(not_match))

    @classmethod
    def of_xml(cls, request: Any) -> Preconditions:
        """From the XML API's header (it has no not-match); raises ValueError on a
        non-number."""
        return cls(_number(request.get_header("x-goog-if-generation-match")))

    @classmethod
    def of(cls, request: Any) -> Preconditions:
        return cls.of_xml(request) if answers.is_xml(request) else cls.of_json(request)

    @property
    def given(self) -> bool:
        return self.match is not None or self.not_match is not None

    def refusal(self, live: int | None) -> HTTPStatus | None:
        """How Cloud Storage refuses the request when the object's live generation is
        ``live`` (None: no live object); None when the request may proceed."""
        if self.not_match is not None:
            if live is None:
                return HTTPStatus.PRECONDITION_FAILED
            if live == self.not_match:
                return HTTPStatus.NOT_MODIFIED
        if self.match is not None:
            holds = live is None if self.match == 0 else live == self.match
            if not holds:
                return HTTPStatus.PRECONDITION_FAILED
        return None


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _refused(response: Any, status: HTTPStatus, *, xml: bool) -> None:
    if status is HTTPStatus.NOT_MODIFIED:
        answers.not_modified(response)
    else:
        answers.precondition_failed(response, xml=xml)


def _guard(
    target: Callable[[Any], tuple[str, str] | None],
    *,
    must_exist: bool,
    after: Callable[[Any, Any, Preconditions], None] | None = None,
) -> Callable[[Handler], Handler]:
    """A wrapper for a handler whose request names its object with ``target(request)``
    (None: leave the request to the handler). With ``must_exist`` a missing object is
    left to the handler's 404. ``after`` runs once the handler has answered."""

    def make(original: Handler) -> Handler:
        def guarded(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
            named = target(request)
            try:
                conditions = Preconditions.of(request)
            except ValueError as exc:
                answers.invalid(
                    response, f"Invalid generation precondition: {exc}", xml=answers.is_xml(request)
                )
                return None
            with _lock:
                if named is None or not conditions.given:
                    return original(request, response, storage, *args, **kwargs)
                bucket, name = named
                if bucket not in storage.buckets:  # the handler answers 404
                    return original(request, response, storage, *args, **kwargs)
                live = answers.live_generation(storage, bucket, name)
                if must_exist and live is None:
                    return original(request, response, storage, *args, **kwargs)
                status = conditions.refusal(live)
                if status is not None:
                    _refused(response, status, xml=answers.is_xml(request))
                    return None
                result = original(request, response, storage, *args, **kwargs)
                if after is not None:
                    after(request, response, conditions)
                return result

        return guarded

    return make


def _object(request: Any) -> tuple[str, str]:
    return request.params["bucket_name"], request.params["object_id"]


def _destination(request: Any) -> tuple[str, str]:
    return request.params["dest_bucket_name"], request.params["dest_object_id"]


def _inserted(request: Any) -> tuple[str, str] | None:
    """The object an objects.insert request writes; None for a resumable upload's chunk
    (checked where it completes) or a request the handler refuses anyway."""
    upload_type = answers.first(request.query, "uploadType")
    if upload_type == "resumable" and "upload_id" in request.query:
        return None
    name = answers.first(request.query, "name")
    if name is None:
        try:
            if upload_type == "multipart":
                name = request.data["meta"].get("name")
            elif upload_type == "resumable" and request.data:
                name = request.data.get("name")
        except (AttributeError, KeyError, TypeError):
            return None
    return None if name is None else (request.params["bucket_name"], name)


def _metadata_get(request: Any) -> tuple[str, str] | None:
    if answers.first(request.query, "alt") == "media":
        return None  # the download handler it hands over to checks
    return _object(request)


def _remember_session(_request: Any, response: Any, conditions: Preconditions) -> None:
    """Keep a new resumable session's preconditions for when it completes."""
    try:
        location = response["Location"]
    except KeyError:
        return  # no session was opened
    upload_id = answers.first(
        urllib.parse.parse_qs(urllib.parse.urlsplit(location).query), "upload_id"
    )
    if upload_id is not None:
        _sessions[upload_id] = conditions


def _check_on_completion(original: Handler) -> Handler:
    """``_finalize_resumable_object``: a session's preconditions hold when the object is
    made. A refused session stays refused, so a client retrying its last chunk is refused
    again."""

    def finalize(response: Any, storage: Any, obj: Any, data: Any, upload_id: str) -> Any:
        with _lock:
            conditions = _sessions.get(upload_id)
            if conditions is not None:
                live = answers.live_generation(storage, obj["bucket"], obj["name"])
                status = conditions.refusal(live)
                if status is not None:
                    _refused(response, status, xml=False)  # chunks come in on the JSON API
                    return None
            _sessions.pop(upload_id, None)
            return original(response, storage, obj, data, upload_id)

    return finalize


def apply() -> None:
    """Enforce generation preconditions on every handler that reads or writes an object."""
    wrap_handler("insert", _guard(_inserted, must_exist=False, after=_remember_session))
    wrap_handler("_finalize_resumable_object", _check_on_completion)
    wrap_handler("xml_upload", _guard(_object, must_exist=False))
    wrap_handler("copy", _guard(_destination, must_exist=False))
    wrap_handler("rewrite", _guard(_destination, must_exist=False))
    wrap_handler("compose", _guard(_object, must_exist=False))
    wrap_handler("delete", _guard(_object, must_exist=True))
    wrap_handler("patch", _guard(_object, must_exist=True))
    wrap_handler("get", _guard(_metadata_get, must_exist=True))
    wrap_handler("download", _guard(_object, must_exist=True))
