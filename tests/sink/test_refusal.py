"""What counts as a driver refused because another runs the same query or run id."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import ConcurrentDriverError, LedgerError, refused_as_concurrent


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (ConcurrentDriverError("the query is being written by another driver"), True),
        # As Spark hands it back from the data source's driver-side worker.
        (
            RuntimeError(
                "[STREAM_FAILED] ... onceover_jobs.sink.errors.ConcurrentDriverError: the query"
            ),
            True,
        ),
        (
            RuntimeError(
                "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple "
                "streaming jobs detected for 1."
            ),
            True,
        ),
        (LedgerError("cannot write the ledger"), False),
        (RuntimeError("[STREAM_FAILED] failpoint commit.after fired"), False),
    ],
)
def test_refused_as_concurrent(error: BaseException, refused: bool) -> None:
    assert refused_as_concurrent(error) is refused
