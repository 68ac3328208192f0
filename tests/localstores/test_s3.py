"""The S3 stand-in (moto's server) keeps S3's conditional writes, through obstore.

S3 documents on PutObject: with ``If-None-Match: *`` the object is written only if no
object has its key, otherwise the answer is 412 Precondition Failed (since 2024-08); with
``If-Match: <ETag>`` it is written only if the object's ETag is that one, otherwise 412
(since 2024-11). A ledger in a bucket is built on exactly these, and obstore asks for
them with ``mode="create"`` and ``mode={"e_tag": ...}``. No patch is needed: these tests
pin that the stand-in does so.
"""

from __future__ import annotations

import obstore
import pytest
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import S3Store
from onceover_tools.localstores import LocalS3

from tests.helpers.object_stores import bucket_of

KEY = "ledger/intents/q-1/batch-7.json"


def store_at(s3: LocalS3, url: str) -> S3Store:
    """obstore's S3 client for the bucket ``url``, its endpoint given explicitly."""
    return S3Store(
        bucket_of(url),
        endpoint=s3.endpoint,
        region="us-east-1",
        access_key_id="onceover-local",
        secret_access_key="onceover-local-secret",
        client_options={"allow_http": True},
    )


def test_create_if_absent_refuses_a_second_create(local_s3: LocalS3, s3_bucket: str) -> None:
    store = store_at(local_s3, s3_bucket)
    obstore.put(store, KEY, b'{"first": true}', mode="create")

    with pytest.raises(AlreadyExistsError):
        obstore.put(store, KEY, b'{"second": true}', mode="create")

    assert bytes(obstore.get(store, KEY).bytes()) == b'{"first": true}'


def test_a_swap_with_a_stale_etag_is_refused(local_s3: LocalS3, s3_bucket: str) -> None:
    store = store_at(local_s3, s3_bucket)
    first = obstore.put(store, KEY, b"1", mode="create")["e_tag"]
    assert first is not None

    second = obstore.put(store, KEY, b"2", mode={"e_tag": first})["e_tag"]  # replaces
    with pytest.raises(PreconditionError):
        obstore.put(store, KEY, b"3", mode={"e_tag": first})  # no longer its ETag

    got = obstore.get(store, KEY)
    assert (bytes(got.bytes()), got.meta["e_tag"]) == (b"2", second)


def test_the_environment_is_what_obstore_reads(
    local_s3: LocalS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in local_s3.environment().items():
        monkeypatch.setenv(name, value)
    store = S3Store(bucket_of(s3_bucket))  # endpoint, keys, region, plain HTTP: all from it

    obstore.put(store, KEY, b"via the environment", mode="create")
    listed = obstore.list_with_delimiter(store, "ledger/intents/q-1")
    obstore.delete(store, KEY)

    assert [meta["path"] for meta in listed["objects"]] == [KEY]
    with pytest.raises(FileNotFoundError):
        obstore.get(store, KEY)


def test_a_url_names_the_bucket_and_the_path() -> None:
    s3 = LocalS3()  # not started: its URLs are its buckets', not its endpoint's

    assert s3.url("onceover-ledger", "/runs/r-1") == "s3://onceover-ledger/runs/r-1"
    assert s3.url("onceover-ledger") == "s3://onceover-ledger"
