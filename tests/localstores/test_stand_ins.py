"""Starting and stopping the stand-ins, as ``onceover up --object-stores`` and the test
fixtures do: both side by side, a bucket in each, failures that name their cause."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from onceover_tools.localstores import LocalGCS, LocalObjectStores, LocalStoreError

from onceover.errors import PortInUseError


def test_both_start_side_by_side_and_stop_together(tmp_path: Path) -> None:
    stores = LocalObjectStores(log_dir=tmp_path)
    with stores:
        urls = stores.create_bucket("onceover-ledger")
        environment = stores.environment()
        endpoints = [store.endpoint for store in stores.stores]
        answers = [httpx.get(f"{url}/", trust_env=False).status_code for url in endpoints]

    assert urls == ("s3://onceover-ledger", "gs://onceover-ledger")
    assert environment["AWS_ENDPOINT_URL"] == stores.s3.endpoint
    assert environment["STORAGE_EMULATOR_HOST"] == stores.gcs.endpoint
    assert all(status < 500 for status in answers)
    assert [store.child.poll() for store in stores.stores] == [0, 0]  # stopped, cleanly
    assert {path.name for path in tmp_path.iterdir()} == {"local-s3.log", "local-gcs.log"}
    for endpoint in endpoints:
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{endpoint}/", trust_env=False)


def test_a_bucket_name_s3_would_refuse_is_refused(local_gcs: LocalGCS) -> None:
    for name in ("Ledger", "ab", "-ledger", "led..ger", "ledger_1"):
        with pytest.raises(LocalStoreError, match="not a bucket name"):
            local_gcs.create_bucket(name)


def test_a_busy_port_is_refused_before_anything_starts(busy_port: int) -> None:
    gcs = LocalGCS(port=busy_port)

    with pytest.raises(PortInUseError):
        gcs.start()
    assert gcs.child.popen is None


def test_a_stand_in_that_exits_at_start_says_so(tmp_path: Path) -> None:
    gcs = LocalGCS(without_patches=["no_such_patch"], log_path=tmp_path / "gcs.log")

    with pytest.raises(LocalStoreError, match=r"exited with status 2 .*gcs\.log"):
        gcs.start()
    assert "invalid choice: 'no_such_patch'" in (tmp_path / "gcs.log").read_text()


def test_a_bucket_before_the_start_is_refused() -> None:
    with pytest.raises(LocalStoreError, match="not running"):
        LocalGCS().create_bucket("onceover-ledger")
