"""The checks themselves: read what a run (or a table) expects, ask BigQuery, compare,
and store the result whole, once it has ended."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Engine
from sqlmodel import Session

from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover.errors import ConfigurationError
from onceover.identifiers import TABLE_ID_RE
from onceover.stamp import BATCH_ID_COLUMN, RUN_ID_COLUMN
from onceover_backend.core.db import write_transaction
from onceover_backend.errors import (
    InvalidParameterError,
    NotFoundError,
    ReconciliationFailedError,
)
from onceover_backend.models import ReconciliationPublic
from onceover_backend.services.reads.runs import tables_of_run
from onceover_backend.services.reconciliation.bigquery_counts import Counts, Scope, TableCounter
from onceover_backend.services.reconciliation.change_check import (
    KeyCounts,
    SourceDiff,
    compare_with_source,
    count_keys,
    judge,
)
from onceover_backend.services.reconciliation.comparison import (
    DeadLettered,
    compare,
    compare_receipts,
)
from onceover_backend.services.reconciliation.expected import (
    Expected,
    expected_of_run,
    expected_of_table,
)
from onceover_backend.services.reconciliation.reads import public
from onceover_backend.services.reconciliation.receipt_check import ReceiptCheck, check_receipts
from onceover_backend.tables import Reconciliation, Run, utcnow

logger = logging.getLogger(__name__)

Trigger = Literal["api", "run_succeeded"]

SHARED_DEAD_LETTERS = (
    "the dead-letter table {dead_letter_table} has no table column and also holds rows set "
    "aside from other tables ({others}): rows_in_dead_letter_table counts them too, and is "
    "compared with the rows set aside there from every table"
)


@dataclass(frozen=True)
class _Counted:
    """What BigQuery answered for one check."""

    counts: Counts
    dead_lettered: DeadLettered | None
    receipts: ReceiptCheck | None
    queries: int


class Reconciler:
    """Runs checks against BigQuery and stores each result (those that follow a run's
    success are made by :class:`.automatic.AutomaticChecks`)."""

    def __init__(self, engine: Engine, bigquery: BigQueryConfig, timeout_s: float) -> None:
        self.engine = engine
        self.bigquery = bigquery
        self.timeout_s = timeout_s

    # -- a run ----------------------------------------------------------------------

    def reconcile_run(
        self,
        run_id: str,
        *,
        table: str | None = None,
        trigger: Trigger,
        actor: str,
        not_checked: str | None = None,
        against: str | None = None,
    ) -> ReconciliationPublic:
        """Check one run in one of the tables it wrote (default: the run's own table);
        :class:`NotFoundError` when there is no such run, or it wrote no batch there.
        ``against``: a change data capture run's source state, a table to compare with.

        With ``not_checked``, BigQuery is not asked: the check is stored as an ``error``
        giving that reason (an automatic check there was no room for)."""
        with Session(self.engine) as session:
            run = _run(session, run_id)
            written = tables_of_run(session, run)
            chosen = table or run.table_id
            if chosen not in written:
                raise NotFoundError(
                    f"run {run_id!r} wrote no batch to table {chosen!r}; it wrote "
                    + ", ".join(written)
                )
            expected = expected_of_run(session, run, chosen, several=len(written) > 1)
        return self._check(
            "run", run_id, expected, trigger=trigger, actor=actor, not_checked=not_checked,
            against=against,
        )  # fmt: skip

    def reconcile_run_tables(
        self, run_id: str, *, trigger: Trigger, actor: str, not_checked: str | None = None
    ) -> list[ReconciliationPublic]:
        """Check one run in every table it wrote: a job that writes a detail table and a
        summary (or several tables from one foreachBatch) is checked in each."""
        with Session(self.engine) as session:
            written = tables_of_run(session, _run(session, run_id))
        return [
            self.reconcile_run(
                run_id, table=table, trigger=trigger, actor=actor, not_checked=not_checked
            )
            for table in written
        ]

    # -- a table --------------------------------------------------------------------

    def reconcile_table(
        self,
        table: str,
        key: str | None,
        *,
        trigger: Trigger,
        actor: str,
        against: str | None = None,
    ) -> ReconciliationPublic:
        """Check a whole table against every run recorded for it (a change data capture
        table, with ``against``, against the source's state too)."""
        with Session(self.engine) as session:
            expected = expected_of_table(session, table, key)
        return self._check("table", None, expected, trigger=trigger, actor=actor, against=against)

    # -- the check ------------------------------------------------------------------

    def _check(
        self,
        kind: Literal["run", "table"],
        run_id: str | None,
        expected: Expected,
        *,
        trigger: Trigger,
        actor: str,
        not_checked: str | None = None,
        against: str | None = None,
    ) -> ReconciliationPublic:
        if against is not None and expected.changes is None:
            raise InvalidParameterError(
                "against", "only a change data capture table is compared with its source's "
                f"state; {expected.table} was written no changes", against,
            )  # fmt: skip
        started = time.perf_counter()
        checked_at = utcnow()
        record = Reconciliation(
            scope=kind,
            run_id=run_id,
            table_id=expected.table,
            key_column=expected.key,
            stamped=expected.stamped,
            status="error",
            expected_rows=expected.rows,
            rows_set_aside=expected.rows_set_aside,
            rows_redriven=expected.rows_redriven,
            dead_letter_table=expected.dead_letter_table,
            overwrite=expected.overwrite,
            replaced_partitions=None if expected.partitions is None else list(expected.partitions),
            warnings=expected.warnings,
            trigger=trigger,
            actor=actor,
            checked_at=checked_at,
            duration_ms=0.0,
        )
        by_receipt = kind == "run" and expected.receipts is not None
        record.method = "receipts" if by_receipt else "counts"
        not_checked = not_checked or expected.cannot_check
        if not_checked is not None:
            record.error = not_checked
        elif expected.changes is not None:  # a CDC table: by its primary key
            try:
                keys, diff, record.queries = self._count_keys(expected.table, against)
            except ReconciliationFailedError as exc:
                record.error = str(exc)
            else:
                judge(record, expected.changes, keys, diff)
        else:
            try:
                counted = self._count(_scope(kind, run_id, expected), expected)
            except ReconciliationFailedError as exc:
                record.error = str(exc)
            else:
                record.queries = counted.queries
                compare(record, expected, counted.counts, kind, counted.dead_lettered)
                if counted.receipts is not None:
                    compare_receipts(record, counted.receipts)
                elif expected.untallied is not None and record.status == "mismatch":
                    record.warnings = [*record.warnings, expected.untallied]
        record.duration_ms = round((time.perf_counter() - started) * 1000, 1)
        with write_transaction(self.engine) as session:
            session.add(record)
            run = session.get(Run, run_id) if run_id is not None else None
            # A run's verdict is part of what its page and the runs list show, so the
            # change feed (which watches updated_at) announces it like any change; not
            # while resuming, where updated_at is the clock the stall sweep reads.
            if run is not None and run.status != "resuming":
                run.updated_at = utcnow()
            session.flush()
            stored = public(record)
        logger.info(
            "reconciled %s %s: %s", kind, run_id or expected.table, record.error or record.status
        )
        return stored

    def _count_keys(
        self, table: str, against: str | None
    ) -> tuple[KeyCounts, SourceDiff | None, int]:
        """A CDC table's rows and keys (:mod:`.change_check`), against the source's state
        when given, and the queries it took."""
        if not TABLE_ID_RE.match(table):  # nothing else may go between backticks
            raise ReconciliationFailedError(f"table id {table!r} cannot be checked")
        with self._counter() as counter:
            keys = count_keys(counter, table)
            diff = None
            if against is not None:
                diff = compare_with_source(counter, table, against, keys.key)
            return keys, diff, counter.queries

    @contextmanager
    def _counter(self) -> Iterator[TableCounter]:
        """A counter of this check's queries on a client of its own, closed after."""
        try:
            client = bigquery_client(self.bigquery)
        except ConfigurationError as exc:
            raise ReconciliationFailedError(f"BigQuery is not configured: {exc}") from None
        try:
            yield TableCounter(client, self.timeout_s)
        finally:
            client.close()

    def _count(self, scope: Scope, expected: Expected) -> _Counted:
        """The scope's counts (by receipt when ``expected`` has receipts and ``scope`` is a
        run's), and the rows of its runs in the dead-letter tables its batches named."""
        with self._counter() as counter:
            counter.check_scope(scope, counter.columns(scope.table))
            if scope.partitions is not None:
                scope = counter.in_partitions(scope)
            receipts = None
            if expected.receipts is not None and scope.run_id is not None:
                receipts = check_receipts(counter, scope, expected.receipts)
                counts = receipts.counts
            else:
                counts = counter.count(scope)
            if not expected.dead_letters:
                return _Counted(counts, None, receipts, counter.queries)
            found = wanted = 0
            warnings = []
            for table, rows in expected.dead_letters.items():
                if not TABLE_ID_RE.match(table):  # nothing else may go between backticks
                    raise ReconciliationFailedError(
                        f"dead-letter table id {table!r} cannot be checked: it is not "
                        "project.dataset.table"
                    )
                count, by_table = counter.count_dead_letters(
                    table, expected.dead_letter_runs, expected.table
                )
                found += count
                if by_table:
                    wanted += rows
                    continue
                # Without a table column, the runs' rows from every table are counted.
                wanted += expected.dead_letters_everywhere[table]
                if sharers := expected.dead_letter_sharers.get(table):
                    warnings.append(
                        SHARED_DEAD_LETTERS.format(
                            dead_letter_table=table, others=", ".join(sharers)
                        )
                    )
            dead_lettered = DeadLettered(found, wanted, warnings)
            return _Counted(counts, dead_lettered, receipts, counter.queries)


def _scope(kind: Literal["run", "table"], run_id: str | None, expected: Expected) -> Scope:
    """What to count: the scope an overwrite replaced, a stamped run's own rows by batch,
    a table's by run, else all."""
    if not TABLE_ID_RE.match(expected.table):  # nothing else may go between backticks
        raise ReconciliationFailedError(
            f"table id {expected.table!r} cannot be checked: it is not project.dataset.table"
        )
    if expected.overwrite:
        return Scope(expected.table, expected.key, partitions=expected.partitions)
    if not expected.stamped:
        return Scope(expected.table, expected.key)
    if kind == "run":
        return Scope(expected.table, expected.key, run_id=run_id, group_by=BATCH_ID_COLUMN)
    return Scope(expected.table, expected.key, group_by=RUN_ID_COLUMN)


def _run(session: Session, run_id: str) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r}")
    return run
