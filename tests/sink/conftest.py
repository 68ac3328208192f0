"""What the sink's tests share: no failpoint armed unless a test arms one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from onceover_jobs.sink import failpoints


@pytest.fixture(autouse=True)
def no_failpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(failpoints.ENV, raising=False)
    failpoints.reset()
    yield
    failpoints.reset()
