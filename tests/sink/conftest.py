"""What the sink's tests share: no failpoint armed unless a test arms one, and a ledger
root on every store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from onceover_jobs.sink import failpoints


@pytest.fixture(autouse=True)
def no_failpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(failpoints.ENV, raising=False)
    failpoints.reset()
    yield
    failpoints.reset()


LEDGER_STORES = ("posix", "s3", "gcs")
"""The stores every ledger test runs against: a disk, and the S3 and Cloud Storage
stand-ins (tests/helpers/object_stores.py)."""


@pytest.fixture(params=LEDGER_STORES)
def ledger_root(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A ledger root on each store in turn: a path on this disk, or a prefix in a bucket
    of the test's own on a stand-in (whose variables this test's process then has, as a
    driver's would)."""
    kind = str(request.param)
    if kind == "posix":
        return str(tmp_path / "ledger")
    stand_in = request.getfixturevalue(f"local_{kind}")
    for name, value in stand_in.environment().items():
        monkeypatch.setenv(name, value)
    bucket: str = request.getfixturevalue(f"{kind}_bucket")
    return f"{bucket}/ledger"
