"""The checks made when runs succeed: on threads of their own, never a request's, and each
audited under the ingest whose events finished the run."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import anyio
from prometheus_client import Gauge

from onceover_backend.services.access import audit
from onceover_backend.services.reconciliation.reads import summary
from onceover_backend.services.reconciliation.runner import Reconciler

logger = logging.getLogger(__name__)


def reconcile_after_success(
    reconciler: Reconciler, run_ids: list[str], request_id: str, *, not_checked: str | None = None
) -> None:
    """Check each run that just succeeded, in every table it wrote, auditing each check
    under the ingest request whose events finished the run (with ``not_checked``, store
    each as an error giving that reason instead). Runs after the answer is sent:
    failures are logged."""
    for run_id in run_ids:
        try:
            results = reconciler.reconcile_run_tables(
                run_id, trigger="run_succeeded", actor=audit.SYSTEM_ACTOR, not_checked=not_checked
            )
        except Exception as exc:  # a background check must not fail silently
            logger.exception("automatic reconciliation of run %s failed", run_id)
            outcome = f"error: {type(exc).__name__}: {exc}"
            _audit_automatic(reconciler, run_id, None, request_id, status_code=500, outcome=outcome)
            continue
        for result in results:
            table = result.table if len(results) > 1 else None
            outcome = f"ok: {summary(result)}"
            _audit_automatic(
                reconciler, run_id, table, request_id, status_code=200, outcome=outcome
            )


def _audit_automatic(
    reconciler: Reconciler,
    run_id: str,
    table: str | None,
    request_id: str,
    *,
    status_code: int,
    outcome: str,
) -> None:
    audit.record_automatic(
        reconciler.engine,
        action="reconcileRun",
        path=f"/api/runs/{run_id}/reconcile" + (f"?table={table}" if table else ""),
        target=f"run {run_id}" + (f" in {table}" if table else "") + " (succeeded)",
        request_id=request_id,
        status_code=status_code,
        outcome=outcome,
    )


class AutomaticChecks:
    """The checks made when runs succeed, on ``workers`` threads of their own.

    They never take a request's thread: with BigQuery hanging, each check holds its
    thread until its deadline, and forty of them once left ingest none. At most
    ``queue`` checks wait for a thread; a run that succeeds past that is not checked: its
    check is stored at once as an ``error`` saying why, without asking BigQuery, and an
    operator can reconcile it by hand. A backend that stops does the same for the checks
    still waiting, and waits for those under way (each ends within its deadline).
    """

    WAIT_S = 10.0

    def __init__(
        self,
        reconciler: Reconciler,
        workers: int = 2,
        queue: int = 100,
        *,
        depth: Gauge | None = None,
    ) -> None:
        self.reconciler = reconciler
        self.workers = workers
        self.queue = queue
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: dict[Future[None], tuple[str, str]] = {}  # -> (run id, request id)
        self._depth = depth  # checks under way or waiting, for GET /metrics

    async def after_success(self, run_ids: list[str], request_id: str) -> None:
        """Check each run (see :func:`reconcile_after_success`); the ingest route runs
        this after its answer is sent.

        It waits for the checks, holding no thread, for at most ``WAIT_S``: a quick check
        is stored by the time the exchange ends (the audit log lists it before the ingest
        that caused it), and a server stopping, which waits for exchanges to end, is not
        held longer by a slow one.
        """
        waiting: list[asyncio.Future[None]] = []
        for run_id in run_ids:
            future = self._submit(run_id, request_id)
            if future is not None:
                waiting.append(asyncio.wrap_future(future))
                continue
            reason = (
                f"not checked: {self.queue} automatic checks were already waiting for the "
                f"{self.workers} reconciliation threads (ONCEOVER_RECONCILE_QUEUE, "
                "ONCEOVER_RECONCILE_WORKERS); reconcile the run by hand"
            )
            logger.warning("automatic reconciliation of run %s: %s", run_id, reason)
            # A short write, on a request thread like the ingest that caused it.
            await anyio.to_thread.run_sync(
                functools.partial(
                    reconcile_after_success, self.reconciler, [run_id], request_id,
                    not_checked=reason,
                )
            )  # fmt: skip
        if waiting:
            await asyncio.wait(waiting, timeout=min(self.WAIT_S, self.reconciler.timeout_s))

    def _submit(self, run_id: str, request_id: str) -> Future[None] | None:
        with self._lock:
            if len(self._pending) >= self.workers + self.queue:
                return None
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.workers, thread_name_prefix="onceover-reconcile"
                )
            future = self._executor.submit(
                reconcile_after_success, self.reconciler, [run_id], request_id
            )
            self._pending[future] = (run_id, request_id)
            self._measure()
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.pop(future, None)
            self._measure()

    def _measure(self) -> None:
        if self._depth is not None:
            self._depth.set(len(self._pending))

    def close(self) -> None:
        """Store the checks still waiting as not made, and wait for those under way."""
        with self._lock:
            executor, self._executor = self._executor, None
            pending = dict(self._pending)
        if executor is None:
            return
        executor.shutdown(wait=True, cancel_futures=True)
        dropped = [ids for future, ids in pending.items() if future.cancelled()]
        if dropped:
            logger.warning(
                "the backend stopped before %d automatic reconciliation(s): runs %s",
                len(dropped),
                ", ".join(run_id for run_id, _ in dropped),
            )
        for run_id, request_id in dropped:
            reconcile_after_success(
                self.reconciler, [run_id], request_id,
                not_checked="not checked: the backend stopped before a thread was free for "
                "it; reconcile the run by hand",
            )  # fmt: skip
