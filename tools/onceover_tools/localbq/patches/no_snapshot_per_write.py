"""``no_snapshot_per_write``: an append does not copy the table.

Every successful write copied the whole target table into a time-travel snapshot
(``CREATE TABLE ... AS SELECT *``), making appends O(table size) and memory grow without
bound. BigQuery's appends do not depend on table size. The patch keeps the part of
``SnapshotManager.record_change`` that matters (the ``TableDataChanged`` event that
invalidates the query cache and marks materialized views stale) and drops the copy.
``FOR SYSTEM_TIME AS OF`` then reads the live table; Onceover does not use time travel.
``python -m onceover_tools.bench.localbq_snapshot`` measures an append's time and the
memory it grows with and without the copy.

Pinned by ``tests/localbq/test_patches.py``:
``test_appends_copy_no_snapshot_and_queries_still_see_every_append``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Publish ``TableDataChanged`` on a write without copying the table."""
    from bqemulator.domain.events import TableDataChanged
    from bqemulator.versioning.snapshots import SnapshotManager

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def record_change(
            manager: SnapshotManager, project_id: str, dataset_id: str, table_id: str
        ) -> None:
            manager._events.publish(TableDataChanged(project_id, dataset_id, table_id))

        return record_change

    wrap(SnapshotManager, "record_change", make)
