"""``one_duckdb_user_at_a_time``: queries and appends run at once without a deadlock.

bqemulator shares one DuckDB connection between the REST server's event loop and the gRPC
threads, and uses it from both at once (queries take no lock; only writes to the same
table do). A DuckDB connection is not thread-safe: a query over REST while another table
took an append over gRPC deadlocked the whole server (seen in chaos sessions with parallel
lanes: every REST and gRPC call then hung). BigQuery serves queries and appends
concurrently. The patch takes one process-wide lock around each use of the connection:
``execute``, ``fetch_arrow`` (the query and its fetch), an append's insert, a load's
insert.

Pinned by ``tests/localbq/test_patches.py``:
``test_queries_and_appends_on_other_tables_run_at_once_without_hanging``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

_duckdb_lock = threading.RLock()
"""Held by whichever thread uses bqemulator's DuckDB connection (re-entrant: a fetch runs
``execute`` inside, an append's insert reads the catalog inside)."""


def apply() -> None:
    """Serialise every use of bqemulator's one DuckDB connection."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.jobs import executor
    from bqemulator.storage.engine import DuckDBEngine

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def locked(*args: Any, **kwargs: Any) -> Any:
            with _duckdb_lock:
                return original(*args, **kwargs)

        return locked

    wrap(DuckDBEngine, "execute", make)
    wrap(DuckDBEngine, "fetch_arrow", make)
    wrap(BigQueryWriteHandler, "_flush_to_target", make)
    wrap(executor, "_insert_via_arrow_view", make)  # looked up by name at each call
