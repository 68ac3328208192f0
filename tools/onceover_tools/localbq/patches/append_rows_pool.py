"""``append_rows_pool``: many AppendRows connections are served at once.

bqemulator's handlers are synchronous and run on grpc.aio's migration thread pool, whose
default size is ``min(32, cpus + 4)``: on 2 cores only 6 AppendRows connections are served
and the 7th stalls silently. BigQuery serves many concurrent connections per project
(5,000 per region). The patch gives the gRPC server a pool of :data:`APPEND_ROWS_WORKERS`
threads (each open AppendRows connection holds one); :func:`shutdown_pool` releases it
when the server stops.

Pinned by ``tests/localbq/test_patches.py``: ``test_32_appendrows_connections_are_served_at_once``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

APPEND_ROWS_WORKERS = 128
"""Threads serving synchronous gRPC handlers; each open AppendRows connection holds one."""


@contextlib.contextmanager
def _grpc_servers_with_pool(pool: ThreadPoolExecutor) -> Iterator[None]:
    """While active, ``grpc.aio.server(...)`` gets ``migration_thread_pool=pool``."""
    import grpc.aio

    original = grpc.aio.server

    def server(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("migration_thread_pool", pool)
        return original(*args, **kwargs)

    grpc.aio.server = server
    try:
        yield
    finally:
        grpc.aio.server = original


_pool_lock = threading.Lock()


def apply() -> None:
    """Serve up to :data:`APPEND_ROWS_WORKERS` synchronous gRPC calls at once."""
    import bqemulator.server

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def build_grpc_server(context: Any) -> Any:
            pool = ThreadPoolExecutor(
                max_workers=APPEND_ROWS_WORKERS, thread_name_prefix="local-bigquery-grpc"
            )
            # The lock keeps two servers starting at once from swapping each
            # other's pools; grpc.aio.server is only replaced for this one call.
            with _pool_lock, _grpc_servers_with_pool(pool):
                server, port = original(context)
            server._onceover_pool = pool  # shut down by LocalBigQuery.stop()
            return server, port

        return build_grpc_server

    # server.py imported the factory by name, so the name there is the one to wrap.
    wrap(bqemulator.server, "build_grpc_server", make)


def shutdown_pool(grpc_server: Any) -> None:
    """Release the thread pool :func:`apply` gave ``grpc_server``."""
    pool = getattr(grpc_server, "_onceover_pool", None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
        # A handler whose client went away can stay blocked on the stopped event loop
        # for good; the interpreter must not wait for it at exit.
        import concurrent.futures.thread as pool_threads

        for thread in list(getattr(pool, "_threads", ())):
            pool_threads._threads_queues.pop(thread, None)  # type: ignore[attr-defined]
