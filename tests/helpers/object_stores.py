"""The object-store stand-ins as pytest fixtures (a plugin: ``tests/conftest.py``).

``local_s3`` and ``local_gcs`` are one server each per test session, started only when a
test asks for one; ``s3_bucket`` and ``gcs_bucket`` give each test a bucket of its own
(its URL, ``s3://<bucket>`` / ``gs://<bucket>``), so no test sees another's objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from onceover_tools.localstores import LocalGCS, LocalS3

if TYPE_CHECKING:
    from google.cloud.storage import Client


def bucket_name() -> str:
    """A new bucket name, valid on S3 and Cloud Storage."""
    return f"t-{uuid.uuid4().hex[:16]}"


def bucket_of(url: str) -> str:
    """The bucket of ``s3://bucket`` or ``gs://bucket/...``."""
    return url.split("://", 1)[1].split("/", 1)[0]


def gcs_client(gcs: LocalGCS) -> Client:
    """google-cloud-storage pointed at ``gcs``, without credentials and without reading
    (or changing) the environment."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.storage import Client

    return Client(
        project="onceover-test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs.endpoint},
    )


@pytest.fixture(scope="session")
def local_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """moto's S3 server for this test session."""
    with LocalS3(log_path=tmp_path_factory.mktemp("local-s3") / "local-s3.log") as s3:
        yield s3


@pytest.fixture(scope="session")
def local_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGCS]:
    """The patched Cloud Storage stand-in for this test session."""
    with LocalGCS(log_path=tmp_path_factory.mktemp("local-gcs") / "local-gcs.log") as gcs:
        yield gcs


@pytest.fixture
def s3_bucket(local_s3: LocalS3) -> str:
    """A bucket of this test's own on the local S3: ``s3://<bucket>``."""
    return local_s3.create_bucket(bucket_name())


@pytest.fixture
def gcs_bucket(local_gcs: LocalGCS) -> str:
    """A bucket of this test's own on the local Cloud Storage: ``gs://<bucket>``."""
    return local_gcs.create_bucket(bucket_name())
