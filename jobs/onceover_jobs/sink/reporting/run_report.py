"""The run a user's own script is: its start, heartbeats and end, reported by the sink.

A job that reports its run itself (``onceover_jobs.load_files``) sets ``run_events`` to
false; every other writer, a plain ``df.write``, a ``writeStream`` or the writes inside
``foreachBatch``, is reported here, from the driver's commit and abort:

- the **attempt** is the driver: one Spark application's JVM (:func:`driver_owner`), so
  the writes of one script share an attempt and a restarted query is a new one;
- ``run_started`` carries the JVM's start time and an id made of the run and the
  attempt, so each commit may send it again and the control plane stores it once;
- a batch write ends its run: ``run_finished`` after its commit, ``run_failed`` after
  its abort. Several writes under one ``run_id`` end it each time; the last one stands;
- a streaming query (or ``foreachBatch``) sends ``run_heartbeat`` after each committed
  micro-batch and ``run_failed`` when one is aborted, which stops the query. A query
  stopped cleanly sends nothing the sink could see (PySpark's stream writer has no
  stop call); the control plane marks its run stalled once it hears nothing more.

Counts are the run's committed batches and rows as its ledger holds them
(:class:`onceover.ledger_files.ScopeTotals`, kept a process). Reporting never fails a write.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from onceover.ledger_files import ScopeTotals
from onceover.ledger_store import LedgerStore
from onceover_jobs.sink.driver import driver_owner, driver_pid, started_at
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.reporting.telemetry import DRIVER_EVENT_FLUSH_S, Telemetry

if TYPE_CHECKING:
    from onceover import events

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000
"""What ``run_failed`` keeps of an error (the event's limit)."""


def driver_attempt_id() -> str:
    """The attempt a driver's writes belong to: a digest of host, JVM pid and start."""
    return "driver-" + hashlib.sha256(driver_owner().encode()).hexdigest()[:16]


def driver_started_at() -> datetime:
    """When the driver's JVM (outside Spark, this process) started."""
    return started_at(driver_pid()) or datetime.now(UTC)


class RunReport:
    """The run events of one write, sent after its driver commits or aborts a batch."""

    def __init__(self, job: SinkJob, batch_id: int | None) -> None:
        self.job = job
        self.batch_id = batch_id
        self.telemetry = Telemetry(job, batch_id)
        self.attempt_id = driver_attempt_id()

    @property
    def enabled(self) -> bool:
        return self.job.options.run_events and self.job.options.monitor_url is not None

    @property
    def _ends_with_the_write(self) -> bool:
        return not self.job.in_query

    def committed(self) -> None:
        """After a commit: the run started; a batch write's run is finished, a query's
        run alive."""
        if not self.enabled:
            return
        from onceover import (
            events,  # only with a monitor: see onceover_jobs.sink.reporting.telemetry
        )

        try:
            self._started()
            batches, rows = self._totals()
            fields = self._fields("finished" if self._ends_with_the_write else "heartbeat")
            event: events.RunFinished | events.RunHeartbeat
            if self._ends_with_the_write:
                event = events.RunFinished(rows_committed=rows, batches_committed=batches, **fields)
            else:
                event = events.RunHeartbeat(
                    rows_committed=rows, batches_committed=batches, **fields
                )
            self.telemetry.emit(event)
        except Exception:
            logger.exception("could not report the run of %s", self.job.run_id)
        finally:
            self.telemetry.flush(DRIVER_EVENT_FLUSH_S)

    def aborted(self, why: str) -> None:
        """After an abort: the run failed (a failed micro-batch stops its query)."""
        if not self.enabled:
            return
        from onceover import events

        try:
            self._started()
            _, rows = self._totals()
            self.telemetry.emit(
                events.RunFailed(
                    error=why[:MAX_ERROR_CHARS], rows_committed=rows, **self._fields("failed")
                )
            )
        except Exception:
            logger.exception("could not report the run of %s", self.job.run_id)
        finally:
            self.telemetry.flush(DRIVER_EVENT_FLUSH_S)

    def _started(self) -> None:
        from onceover import events

        self.telemetry.emit(
            events.RunStarted(
                mode=self.job.options.mode,
                query_id=None if self._ends_with_the_write else self.job.query_id,
                **{**self._fields("started", once=True), "time": driver_started_at()},
            )
        )

    def _fields(self, what: str, *, once: bool = False) -> dict[str, object]:
        # An ending or heartbeat names its batch and write, so each batch's is stored once
        # (a replayed commit sends the same); the start names only the run and attempt,
        # so it is stored once however often it is sent.
        from onceover.events import event_id

        facts = () if once else (self.batch_id, self.telemetry.write_place())
        return {
            "id": event_id("run", what, self.job.run_id, self.attempt_id, *facts),
            "attempt_id": self.attempt_id,
            **self.telemetry.common(),
        }

    def _totals(self) -> tuple[int, int]:
        """(batches, rows) the run's ledger holds committed, pruned ones included."""
        totals = totals_of(self.job.store, self.job.query_id).read()
        return totals.batches, totals.rows


_KEPT_TOTALS = 64
_totals: OrderedDict[tuple[str, str], ScopeTotals] = OrderedDict()
_totals_lock = threading.Lock()


def totals_of(store: LedgerStore, scope: str) -> ScopeTotals:
    """The scope's totals, kept while this process lives (a driver's commits, a reused
    Python worker's): each read opens only the records that are new or changed since the
    last, so a micro-batch reads its own record, not the ledger's hundred (on a bucket,
    a hundred requests a batch)."""
    key = (store.url, scope)
    with _totals_lock:
        found = _totals.get(key)
        if found is None:
            found = _totals[key] = ScopeTotals(store, scope)
            while len(_totals) > _KEPT_TOTALS:
                _totals.popitem(last=False)
        _totals.move_to_end(key)
        return found
