"""What the ledger-store bench runs: the stores, the modes, the run's defaults, its target."""

from __future__ import annotations

from onceover_tools.bench.stream_economy.plan import HOUR_S, MODES, PARTITIONS, TRIGGER_S

OBJECT_STORES = ("s3", "gcs")
"""The stores whose requests are counted (:data:`~.api.APIS`), each a stand-in behind a
counting proxy."""
POSIX = "posix"
"""The reference: the ledger on the disk beside the checkpoint, no request to count."""
STORES = (*OBJECT_STORES, POSIX)
DEFAULT_STORES = OBJECT_STORES
"""The disk only when asked for: the stream economy times every mode with its ledger on
the disk already, and four more queries would add minutes to every full bench."""
__all__ = ["MODES", "PARTITIONS", "STORES"]

BATCHES = 60
QUICK_BATCHES = 12
WINDOW = 10
"""Micro-batches in each of the windows compared: the first steady ones and the last."""
ROWS_PER_BATCH = 200
BATCHES_PER_HOUR = HOUR_S / TRIGGER_S
"""A 1-second trigger kept: 3,600 micro-batches an hour."""
FLAT_TARGET = 1.10
"""Requests per micro-batch over the last window at most this many times the first's: a
ledger's cost must not grow with the batches it holds (issue 53, item 6)."""
DATASET = "bench_ledger_stores"
BUCKET_PREFIX = "ledger-bench"
FIRST_BATCH_S = 180.0  # a cold JVM, the workers' imports, the first claim of the ledger
BATCH_S = 60.0
JSON_NAME = "ledger-stores.json"
MARKDOWN_NAME = "ledger-stores.md"


def window(batches: int) -> int:
    """Batches in each window: :data:`WINDOW`, or half the steady batches (every batch
    but the first) when there are fewer, so the two never overlap; at least one."""
    return max(1, min(WINDOW, (batches - 1) // 2))
