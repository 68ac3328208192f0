"""Each patch of the Cloud Storage stand-in, pinned by the documented behaviour it restores.

Cloud Storage's JSON API documents, on objects.insert, get, patch and delete:

    ``ifGenerationMatch``: "Makes the operation conditional on whether the object's
    current generation matches the given value. Setting to 0 makes the operation succeed
    only if there are no live versions of the object."

    ``ifGenerationNotMatch``: "Makes the operation conditional on whether the object's
    current generation does not match the given value. If no live object exists, the
    precondition fails."

and "Request preconditions": a failed ``ifGenerationMatch`` (``x-goog-if-generation-match``
in the XML API) "fails with a 412 Precondition Failed response", a matching
``ifGenerationNotMatch`` "fails with a 304 Not Modified response". A ledger in a bucket
is built on exactly these: create if absent is ``ifGenerationMatch=0``, replace if
unchanged is ``ifGenerationMatch=<the generation read>``.

Every test goes through google-cloud-storage (or plain HTTP where the client has no
call for it) to a stand-in in its own process; the tests at the end start the stand-in
without a patch and show what it does then, so each patch is known to be needed.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from google.api_core import exceptions
from google.cloud.storage import Bucket, Client
from onceover_tools.localstores import LocalGCS, LocalStoreError, patches
from onceover_tools.localstores.patches import increasing_generations

from tests.helpers.object_stores import bucket_name, bucket_of, gcs_client

KEY = "ledger/intents/q-1/batch-7.json"


def bucket_at(gcs: LocalGCS, url: str) -> Bucket:
    return gcs_client(gcs).bucket(bucket_of(url))


def upload(bucket: Bucket, data: bytes, *, generation: int | None) -> int:
    """Upload ``data`` to :data:`KEY` with ``ifGenerationMatch=generation``; the new
    generation."""
    blob = bucket.blob(KEY)
    blob.upload_from_string(data, content_type="application/json", if_generation_match=generation)
    assert blob.generation is not None
    return int(blob.generation)


def read(bucket: Bucket) -> bytes:
    blob = bucket.get_blob(KEY)
    assert blob is not None
    return bytes(blob.download_as_bytes())


# -- generation_preconditions -----------------------------------------------------------


def test_create_if_absent_refuses_a_second_create(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    bucket = bucket_at(local_gcs, gcs_bucket)
    upload(bucket, b'{"first": true}', generation=0)

    with pytest.raises(exceptions.PreconditionFailed) as refused:
        upload(bucket, b'{"second": true}', generation=0)

    assert refused.value.code == 412
    assert '"reason": "conditionNotMet"' in str(refused.value)  # the answer's body
    assert read(bucket) == b'{"first": true}'


def test_a_swap_from_a_stale_generation_is_refused(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    bucket = bucket_at(local_gcs, gcs_bucket)
    first = upload(bucket, b"1", generation=0)
    second = upload(bucket, b"2", generation=first)  # the right generation replaces
    assert second > first

    with pytest.raises(exceptions.PreconditionFailed):
        upload(bucket, b"3", generation=first)  # no longer the live generation

    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("never-written").upload_from_string(b"x", if_generation_match=second)

    assert read(bucket) == b"2"


def test_delete_with_a_wrong_generation_is_refused(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    bucket = bucket_at(local_gcs, gcs_bucket)
    live = upload(bucket, b"1", generation=0)

    for wrong in (live + 1, 0):
        with pytest.raises(exceptions.PreconditionFailed):
            bucket.blob(KEY).delete(if_generation_match=wrong)
    assert read(bucket) == b"1"

    bucket.blob(KEY).delete(if_generation_match=live)
    assert bucket.get_blob(KEY) is None
    with pytest.raises(exceptions.NotFound):  # nothing to delete: 404 before any check
        bucket.blob(KEY).delete(if_generation_match=live)


def test_reads_check_generation_preconditions(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    bucket = bucket_at(local_gcs, gcs_bucket)
    live = upload(bucket, b"1", generation=0)

    with pytest.raises(exceptions.PreconditionFailed):
        bucket.get_blob(KEY, if_generation_match=live + 1)
    with pytest.raises(exceptions.NotModified):
        bucket.get_blob(KEY, if_generation_not_match=live)
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob(KEY).download_as_bytes(if_generation_match=live + 1)
    with pytest.raises(exceptions.NotModified):
        bucket.blob(KEY).download_as_bytes(if_generation_not_match=live)

    found = bucket.get_blob(KEY, if_generation_match=live)
    assert found is not None
    assert found.generation == live
    assert bucket.blob(KEY).download_as_bytes(if_generation_not_match=live + 1) == b"1"
    assert bucket.get_blob("never-written", if_generation_match=live) is None  # 404 first


def test_a_resumable_upload_checks_when_it_completes(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    """A resumable upload's preconditions are given when its session starts and hold when
    it completes: a writer that created the object in between wins."""
    bucket = bucket_at(local_gcs, gcs_bucket)
    data = b"late writer"
    session = bucket.blob(KEY).create_resumable_upload_session(
        content_type="application/json", size=len(data), if_generation_match=0
    )
    upload(bucket, b"early writer", generation=0)

    answer = httpx.put(
        session,
        content=data,
        headers={"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}"},
        trust_env=False,
    )

    assert answer.status_code == 412, answer.text
    assert read(bucket) == b"early writer"
    with pytest.raises(exceptions.PreconditionFailed):  # and at its start, once it exists
        bucket.blob(KEY).create_resumable_upload_session(size=1, if_generation_match=0)


def test_xml_api_uploads_check_the_generation_header(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    url = f"{local_gcs.endpoint}/{bucket_of(gcs_bucket)}/{KEY}"
    create = {"x-goog-if-generation-match": "0"}

    first = httpx.put(url, content=b"1", headers=create, trust_env=False)
    second = httpx.put(url, content=b"2", headers=create, trust_env=False)

    assert first.status_code == 200
    assert second.status_code == 412
    assert "<Code>PreconditionFailed</Code>" in second.text
    generation = first.headers["x-goog-generation"]
    stale = httpx.get(url, headers={"x-goog-if-generation-match": "1"}, trust_env=False)
    fresh = httpx.get(url, headers={"x-goog-if-generation-match": generation}, trust_env=False)
    assert stale.status_code == 412
    assert (fresh.status_code, fresh.content) == (200, b"1")


def test_a_precondition_that_is_not_a_number_is_refused(
    local_gcs: LocalGCS, gcs_bucket: str
) -> None:
    url = f"{local_gcs.endpoint}/storage/v1/b/{bucket_of(gcs_bucket)}/o/x"
    assert httpx.get(url, params={"ifGenerationMatch": "soon"}, trust_env=False).status_code == 400


# -- increasing_generations -----------------------------------------------------------


def test_each_write_gets_a_greater_generation(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    bucket = bucket_at(local_gcs, gcs_bucket)
    generations = [upload(bucket, b"0", generation=0)]
    for n in range(1, 6):
        generations.append(upload(bucket, str(n).encode(), generation=generations[-1]))
    bucket.blob(KEY).delete()
    generations.append(upload(bucket, b"again", generation=0))  # across a delete too

    assert generations == sorted(set(generations))


def test_a_clock_that_steps_back_gives_no_smaller_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = iter([5_000, 4_000, 4_000, 6_000])
    monkeypatch.setattr(increasing_generations, "_last", 0)

    given = [increasing_generations.next_generation(lambda: next(readings)) for _ in range(4)]

    assert given == [5_000, 5_001, 5_002, 6_000]


# -- generation_headers ---------------------------------------------------------------


def test_a_download_names_the_generation_it_served(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    """python-storage takes a download's generation from its ``x-goog-generation``: a
    reader keeps the generation of the bytes it read to swap on."""
    bucket = bucket_at(local_gcs, gcs_bucket)
    live = upload(bucket, b"1", generation=0)

    blob = bucket.blob(KEY)
    assert blob.download_as_bytes() == b"1"

    assert blob.generation == live
    assert blob.metageneration is not None


# -- selected_generation --------------------------------------------------------------


def test_a_replaced_generation_is_not_found(local_gcs: LocalGCS, gcs_bucket: str) -> None:
    """A reader that read an object's metadata and then asks for that generation's bytes
    after another writer replaced it is told it is gone, and looks again."""
    bucket = bucket_at(local_gcs, gcs_bucket)
    first = upload(bucket, b"1", generation=0)
    second = upload(bucket, b"2", generation=first)

    with pytest.raises(exceptions.NotFound):
        bucket.blob(KEY, generation=first).download_as_bytes()
    assert bucket.get_blob(KEY, generation=first) is None
    assert bucket.blob(KEY, generation=second).download_as_bytes() == b"2"


# -- what the stand-in does without them ----------------------------------------------


@pytest.fixture(scope="module")
def gcs_without_preconditions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGCS]:
    log = tmp_path_factory.mktemp("gcs-without-preconditions") / "local-gcs.log"
    with LocalGCS(without_patches=["generation_preconditions"], log_path=log) as gcs:
        yield gcs


@pytest.fixture(scope="module")
def bare_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGCS]:
    log = tmp_path_factory.mktemp("bare-gcs") / "local-gcs.log"
    with LocalGCS(without_patches=patches.NAMES, log_path=log) as gcs:
        yield gcs


def test_without_the_patch_the_stand_in_ignores_preconditions(
    gcs_without_preconditions: LocalGCS,
) -> None:
    """The same calls as the tests above: every one is accepted, last write wins."""
    bucket = bucket_at(
        gcs_without_preconditions, gcs_without_preconditions.create_bucket(bucket_name())
    )
    first = upload(bucket, b"1", generation=0)

    second = upload(bucket, b"2", generation=0)  # a second create-if-absent
    third = upload(bucket, b"3", generation=first)  # a swap from a stale generation
    bucket.blob(KEY).delete(if_generation_match=first)  # a delete of a stale generation

    assert first < second < third
    assert bucket.get_blob(KEY) is None


def test_without_the_patches_a_read_names_no_generation_and_any_generation_reads(
    bare_gcs: LocalGCS,
) -> None:
    bucket = bucket_at(bare_gcs, bare_gcs.create_bucket(bucket_name()))
    first = upload(bucket, b"1", generation=0)
    upload(bucket, b"2", generation=first)

    blob = bucket.blob(KEY)
    blob.download_as_bytes()
    stale = bucket.blob(KEY, generation=first).download_as_bytes()

    assert blob.generation is None  # a swap on it would be unconditional
    assert stale == b"2"  # the newer bytes, under the older generation


def test_an_unknown_patch_is_refused_naming_the_patches() -> None:
    with pytest.raises(LocalStoreError, match="generation_preconditions"):
        patches.install(["generation_precondition"])


def test_the_environment_is_what_google_cloud_storage_reads(
    local_gcs: LocalGCS, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in local_gcs.environment().items():
        monkeypatch.setenv(name, value)

    bucket = Client().bucket(bucket_of(gcs_bucket))  # finds it, asks no credentials
    bucket.blob(KEY).upload_from_string(b"via the environment", if_generation_match=0)

    assert read(bucket) == b"via the environment"


# -- flat_write_cost ------------------------------------------------------------------


def test_in_memory_a_write_rewrites_no_metadata_file() -> None:
    """Cloud Storage's writes do not slow down as a bucket fills. The stand-in serialises
    every object's metadata after each write, in memory too; patched, it does not (the
    data lives in its dicts), and a server on a disk still does."""
    from gcp_storage_emulator.storage import Storage
    from onceover_tools.localstores.patches.flat_write_cost import skip_in_memory

    class Patched(Storage):  # type: ignore[misc]
        _write_config_to_file = skip_in_memory(Storage._write_config_to_file)

    def written(storage: Storage) -> bool:
        storage.create_bucket("b", {"name": "b"})
        storage.create_file("b", "k", b"1", {"name": "k", "bucket": "b"})
        try:
            storage._store.read_bytes(".meta")
        except FileNotFoundError:
            return False
        return True

    assert written(Storage(use_memory_fs=True))  # without the patch: rewritten each time
    assert not written(Patched(use_memory_fs=True))
