"""Reconciliation: what the control plane recorded as committed against what BigQuery holds.

Expected rows are the rows of the committed batches the run (or every run of a table)
reported; actual rows are counted in BigQuery by :mod:`onceover_backend.services.bigquery_counts`.
Counts alone hide a lost row paired with a duplicated one, so with a key column the
check also compares distinct keys and looks for keys held more than once.

Rows BigQuery refused and the sink set aside in a dead-letter table are expected but set
aside, never missing: the batches' ``rows`` (the expected rows) count the target table's
rows only, and their ``dead_lettered_rows`` are reported apart, as ``rows_set_aside``, and
compared with the run's rows counted in the dead-letter table (its ``run_id`` column, and
its ``table`` column when it has one).

A stamped run with a key whose committed batches all carry a key tally is checked by
receipt (:mod:`onceover_backend.services.receipt_check`): each batch's rows and key
checksum against its receipt in one query, and a differing batch's duplicated, missing
and unexpected keys found by key-hash bucket, in at most three queries whatever the
table's size. Any other run is checked by counts, as before tallies.

Each check is stored whole, once it has ended (``ok``, ``mismatch``, or ``error`` with the
reason BigQuery could not answer); a check that cannot start (an unknown run, a table no
run wrote) raises :class:`~onceover_backend.errors.NotFoundError` and stores nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover.errors import ConfigurationError
from onceover.events import Mode
from onceover.identifiers import TABLE_ID_RE
from onceover.stamp import BATCH_ID_COLUMN, RUN_ID_COLUMN
from onceover_backend.core.db import write_transaction
from onceover_backend.errors import NotFoundError, ReconciliationFailedError
from onceover_backend.models import ReconciliationPublic, ReconciliationsPublic
from onceover_backend.services import audit
from onceover_backend.services.bigquery_counts import Counts, Scope, TableCounter
from onceover_backend.services.paging import page
from onceover_backend.services.receipt_check import (
    LISTED_KEYS,
    Receipt,
    ReceiptCheck,
    check_receipts,
)
from onceover_backend.services.runs import tables_of_run
from onceover_backend.tables import Batch, Reconciliation, Run, utcnow

logger = logging.getLogger(__name__)

Trigger = Literal["api", "run_succeeded"]

NOT_FINISHED = "the run is {status}: batches it commits after this check are not counted"
NOT_HEARD = (
    "the job reports {reported:,} rows committed and the control plane has heard of "
    "{committed:,}: some batch events may still be on their way"
)
NOT_STAMPED = (
    "the run's rows are not stamped, so the whole table is compared with this run's rows: "
    "rows other runs or writers put there count as extra (write with stamp=true to count "
    "a run's rows in place)"
)
PARTLY_STAMPED = (
    "only some of the run's batches are stamped: rows of the unstamped ones are not counted "
    "as the run's"
)
NO_KEY = (
    "no key column: only rows are counted, so a lost row paired with a duplicated one "
    "would go unseen (name one with the sink's key option)"
)
SHARED_DEAD_LETTERS = (
    "the dead-letter table {dead_letter_table} has no table column and also holds rows set "
    "aside from other tables ({others}): rows_in_dead_letter_table counts them too, and is "
    "compared with the rows set aside there from every table"
)
SEVERAL_DEAD_LETTER_TABLES = (
    "the batches named several dead-letter tables ({tables}): rows_in_dead_letter_table "
    "counts the rows in all of them"
)
NO_TALLY = (
    "{missing} of the run's {total} committed batches carry no key tally (written by a sink "
    "before receipts had one, or with a key neither INT64 nor STRING): checked by counts, "
    "not by receipt, so duplicated keys are only sampled and missing keys not named"
)
RECEIPTS_CUT = (
    "more than {limit:,} keys are held more than once: the keys listed, and each batch's "
    "duplicates, are the first {limit:,}"
)
OTHER_WRITERS = (
    "a table check counts every row of the table: rows written by anything but onceover "
    "count as extra, and rows deleted, expired or truncated since count as missing"
)
UNCOMMITTED_VISIBLE: dict[Mode, str] = {
    "buffered": (
        "{count} batch(es) of buffered-mode writes not recorded as committed: the driver "
        "may have flushed some of their streams before it stopped, so rows of those "
        "partitions can be in the table all the same (a replay of the batch flushes the rest)"
    ),
    "committed": (
        "{count} batch(es) of committed-mode writes not recorded as committed: the rows "
        "they appended were visible at once, so they can be in the table all the same"
    ),
}
"""The exactly-once modes whose rows can be visible before their batch commits, and what
to say of a run's batches of that mode left uncommitted (pending mode's rows stay
invisible until the commit)."""


@dataclass
class _Expected:
    """What the control plane recorded, read before BigQuery is asked."""

    table: str
    rows: int
    per_group: dict[Any, int]
    stamped: bool
    key: str | None
    warnings: list[str] = field(default_factory=list)
    rows_set_aside: int = 0
    """Rows the committed batches of this table set aside in a dead-letter table."""
    dead_letters: dict[str, int] = field(default_factory=dict)
    """Each dead-letter table the batches named -> rows they set aside there."""
    dead_letters_everywhere: dict[str, int] = field(default_factory=dict)
    """The same, from every table the runs wrote: what a dead-letter table without a
    ``table`` column holds of them."""
    dead_letter_sharers: dict[str, list[str]] = field(default_factory=dict)
    """Each dead-letter table -> the runs' other tables that set rows aside there."""
    dead_letter_runs: list[str] = field(default_factory=list)
    """The runs whose rows are counted in those tables (by their ``run_id`` column)."""
    receipts: dict[Any, Receipt] | None = None
    """Each batch id's receipt, when every committed batch reported a key tally: the run
    is then checked by receipt."""
    untallied: str | None = None
    """Why a stamped run with a key is checked by counts (said when the check differs)."""

    @property
    def dead_letter_table(self) -> str | None:
        """The one a report names: the last the batches named."""
        return next(reversed(self.dead_letters), None)


@dataclass(frozen=True)
class _Counted:
    """What BigQuery answered for one check."""

    counts: Counts
    dead_lettered: _DeadLettered | None
    receipts: ReceiptCheck | None
    queries: int


@dataclass(frozen=True)
class _DeadLettered:
    """The scope's runs' rows found in the dead-letter tables, against those expected."""

    found: int
    expected: int
    warnings: list[str]


def _is_committed(batch: Batch) -> bool:
    return batch.state == "committed"


def _batch_rows(batch: Batch) -> int:
    return int(batch.rows if batch.rows is not None else batch.expected_rows or 0)


class Reconciler:
    """Runs checks against BigQuery and stores each result; ``automatic`` makes those
    that follow a run's success, on ``workers`` threads with ``queue`` places."""

    def __init__(
        self,
        engine: Engine,
        bigquery: BigQueryConfig,
        timeout_s: float,
        *,
        workers: int = 2,
        queue: int = 100,
    ) -> None:
        self.engine = engine
        self.bigquery = bigquery
        self.timeout_s = timeout_s
        self.automatic = AutomaticChecks(self, workers, queue)

    # -- a run ----------------------------------------------------------------------

    def reconcile_run(
        self,
        run_id: str,
        *,
        table: str | None = None,
        trigger: Trigger,
        actor: str,
        not_checked: str | None = None,
    ) -> ReconciliationPublic:
        """Check one run in one of the tables it wrote (default: the run's own table);
        :class:`NotFoundError` when there is no such run, or it wrote no batch there.

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
            expected = _expected_of_run(session, run, chosen, several=len(written) > 1)
        return self._check(
            "run", run_id, expected, trigger=trigger, actor=actor, not_checked=not_checked
        )

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
        self, table: str, key: str | None, *, trigger: Trigger, actor: str
    ) -> ReconciliationPublic:
        """Check a whole table against every run recorded for it."""
        with Session(self.engine) as session:
            expected = _expected_of_table(session, table, key)
        return self._check("table", None, expected, trigger=trigger, actor=actor)

    # -- the check ------------------------------------------------------------------

    def _check(
        self,
        kind: Literal["run", "table"],
        run_id: str | None,
        expected: _Expected,
        *,
        trigger: Trigger,
        actor: str,
        not_checked: str | None = None,
    ) -> ReconciliationPublic:
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
            dead_letter_table=expected.dead_letter_table,
            warnings=expected.warnings,
            trigger=trigger,
            actor=actor,
            checked_at=checked_at,
            duration_ms=0.0,
        )
        by_receipt = kind == "run" and expected.receipts is not None
        record.method = "receipts" if by_receipt else "counts"
        if not_checked is not None:
            record.error = not_checked
        else:
            try:
                counted = self._count(_scope(kind, run_id, expected), expected)
            except ReconciliationFailedError as exc:
                record.error = str(exc)
            else:
                record.queries = counted.queries
                _compare(record, expected, counted.counts, kind, counted.dead_lettered)
                if counted.receipts is not None:
                    _compare_receipts(record, counted.receipts)
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

    def _count(self, scope: Scope, expected: _Expected) -> _Counted:
        """The scope's counts (by receipt when ``expected`` has receipts and ``scope`` is a
        run's), and the rows of its runs in the dead-letter tables its batches named."""
        try:
            client = bigquery_client(self.bigquery)
        except ConfigurationError as exc:
            raise ReconciliationFailedError(f"BigQuery is not configured: {exc}") from None
        try:
            counter = TableCounter(client, self.timeout_s)
            counter.check_scope(scope, counter.columns(scope.table))
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
            dead_lettered = _DeadLettered(found, wanted, warnings)
            return _Counted(counts, dead_lettered, receipts, counter.queries)
        finally:
            client.close()


def _scope(kind: Literal["run", "table"], run_id: str | None, expected: _Expected) -> Scope:
    """What to count: a stamped run's own rows by batch, a table's by run, else all."""
    if not TABLE_ID_RE.match(expected.table):  # nothing else may go between backticks
        raise ReconciliationFailedError(
            f"table id {expected.table!r} cannot be checked: it is not project.dataset.table"
        )
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


def _expected_of_run(session: Session, run: Run, table: str, *, several: bool) -> _Expected:
    batches = list(
        session.exec(
            select(Batch)
            .where(Batch.run_id == run.run_id, Batch.table_id == table)
            .order_by(col(Batch.id))  # in the order they were first heard of
        )
    )
    committed = [b for b in batches if _is_committed(b)]
    stamped_flags = {b.stamped for b in batches}
    stamped = True in stamped_flags
    # Each table has the key its writes named; the run's own is its latest write's.
    keys = [b.key_column for b in batches if b.key_column]
    key = keys[-1] if keys else (run.key_column if table == run.table_id else None)
    warnings: list[str] = []
    if run.status != "succeeded":
        warnings.append(NOT_FINISHED.format(status=run.status))
    elif (  # the job reports one count for all its tables
        not several and run.rows_reported is not None and run.rows_reported != run.rows_committed
    ):
        warnings.append(NOT_HEARD.format(reported=run.rows_reported, committed=run.rows_committed))
    if not stamped:
        warnings.append(NOT_STAMPED)
    elif len(stamped_flags) > 1:
        warnings.append(PARTLY_STAMPED)
    if key is None:
        warnings.append(NO_KEY)
    for mode, warning in UNCOMMITTED_VISIBLE.items():
        stuck = [b for b in batches if b.mode == mode and not _is_committed(b)]
        if stuck:
            warnings.append(warning.format(count=len(stuck)))
    per_batch: dict[Any, int] = {}
    for batch in committed:  # writes of one micro-batch to one table share its stamp
        per_batch[batch.batch_id] = per_batch.get(batch.batch_id, 0) + _batch_rows(batch)
    receipts, untallied = None, None
    if stamped and key is not None and committed and len(stamped_flags) == 1:
        receipts = _receipts(committed)
        if receipts is None:
            tallied = sum(1 for b in committed if b.key_buckets is not None)
            untallied = NO_TALLY.format(missing=len(committed) - tallied, total=len(committed))
    expected = _Expected(
        table=table,
        rows=sum(_batch_rows(b) for b in committed),
        per_group=per_batch if stamped else {},
        stamped=stamped,
        key=key,
        warnings=warnings,
        receipts=receipts,
        untallied=untallied,
    )
    _expect_dead_letters(session, expected, committed)
    return expected


def _receipts(committed: list[Batch]) -> dict[Any, Receipt] | None:
    """Each batch id's receipt, merged over its writes; None unless every committed batch
    reported a key checksum and tally (a batch without one is checked by counts)."""
    reports: dict[Any, list[tuple[int, int, list[Any]]]] = {}
    for batch in committed:
        if batch.key_checksum is None or batch.key_buckets is None:
            return None
        buckets = [(b, rows, checksum, key_sum) for b, rows, checksum, key_sum in batch.key_buckets]
        reports.setdefault(batch.batch_id, []).append(
            (_batch_rows(batch), batch.key_checksum, buckets)
        )
    return {batch_id: Receipt.of(found) for batch_id, found in reports.items()}


def _expected_of_table(session: Session, table: str, key: str | None) -> _Expected:
    runs = list(
        session.exec(select(Run).where(Run.table_id == table).order_by(col(Run.started_at)))
    )
    if not runs:
        raise NotFoundError(f"no run has written to table {table!r}")
    batches = list(session.exec(select(Batch).where(Batch.table_id == table)))
    committed = [b for b in batches if _is_committed(b)]
    stamped_runs = {b.run_id for b in batches if b.stamped}
    per_run: dict[Any, int] = {}
    for batch in committed:
        group = batch.run_id if batch.run_id in stamped_runs else None
        per_run[group] = per_run.get(group, 0) + _batch_rows(batch)
    key = key or next((r.key_column for r in reversed(runs) if r.key_column), None)
    warnings = [OTHER_WRITERS]
    if key is None:
        warnings.append(NO_KEY)
    expected = _Expected(
        table=table,
        rows=sum(_batch_rows(b) for b in committed),
        per_group=per_run if stamped_runs else {},
        stamped=bool(stamped_runs),
        key=key,
        warnings=warnings,
    )
    _expect_dead_letters(session, expected, sorted(committed, key=lambda b: b.id or 0))
    return expected


def _expect_dead_letters(session: Session, expected: _Expected, committed: list[Batch]) -> None:
    """Fill in what ``committed`` (the scope's committed batches, oldest first) set aside:
    the rows, and for each dead-letter table they named the rows their runs set aside
    there from every table (the dead-letter table says which run, not which table)."""
    expected.rows_set_aside = sum(b.dead_lettered_rows for b in committed)
    named = list(dict.fromkeys(b.dead_letter_table for b in committed if b.dead_letter_table))
    if not named:
        return
    runs = sorted({b.run_id for b in committed if b.dead_letter_table})
    everywhere = session.exec(
        select(Batch).where(
            col(Batch.run_id).in_(runs),
            Batch.state == "committed",
            col(Batch.dead_letter_table).in_(named),
        )
    )
    here = dict.fromkeys(named, 0)
    for batch in committed:
        if batch.dead_letter_table:
            here[batch.dead_letter_table] += batch.dead_lettered_rows
    everywhere_rows = dict.fromkeys(named, 0)
    others: dict[str, set[str]] = {table: set() for table in named}
    for batch in everywhere:
        assert batch.dead_letter_table is not None
        everywhere_rows[batch.dead_letter_table] += batch.dead_lettered_rows
        if batch.table_id != expected.table and batch.dead_lettered_rows:
            others[batch.dead_letter_table].add(batch.table_id)
    expected.dead_letters = here
    expected.dead_letters_everywhere = everywhere_rows
    expected.dead_letter_sharers = {t: sorted(tables) for t, tables in others.items() if tables}
    expected.dead_letter_runs = runs
    if len(named) > 1:
        expected.warnings.append(SEVERAL_DEAD_LETTER_TABLES.format(tables=", ".join(named)))


def _compare(
    record: Reconciliation,
    expected: _Expected,
    counts: Counts,
    kind: Literal["run", "table"],
    dead_lettered: _DeadLettered | None = None,
) -> None:
    """Fill ``record`` with the counts and the verdict; ``dead_lettered``: the runs' rows
    found in the dead-letter tables (None: the batches named none)."""
    if dead_lettered is not None:
        record.rows_in_dead_letter_table = dead_lettered.found
        record.warnings = [*record.warnings, *dead_lettered.warnings]
    record.actual_rows = counts.rows
    record.distinct_keys = counts.distinct_keys
    record.rows_without_key = counts.rows_without_key
    record.duplicate_key_count = counts.duplicate_keys
    record.duplicate_rows = counts.duplicate_rows
    group_field = "batch_id" if kind == "run" else "run_id"
    record.duplicate_keys = [
        {"key": s.key, "count": s.count, group_field: s.group} for s in counts.samples
    ]
    present = counts.distinct_keys if counts.distinct_keys is not None else counts.rows
    record.missing_rows = max(expected.rows - present, 0)
    if counts.distinct_keys is None:
        record.extra_rows = max(counts.rows - expected.rows, 0)
    else:
        record.extra_rows = counts.duplicate_rows + max(counts.distinct_keys - expected.rows, 0)
    groups = _compare_groups(expected, counts, group_field) if expected.stamped else []
    if kind == "run":
        record.batches = groups
    else:
        record.runs = groups
    agrees = (
        counts.rows == expected.rows
        and counts.duplicate_keys == 0
        and (counts.distinct_keys is None or counts.distinct_keys == expected.rows)
        and not counts.rows_without_key
        and all(g["status"] == "ok" for g in groups)
        and (dead_lettered is None or dead_lettered.found == dead_lettered.expected)
    )
    record.status = "ok" if agrees else "mismatch"


def _compare_receipts(record: Reconciliation, check: ReceiptCheck) -> None:
    """Add to ``record``'s batches what their receipts found; a batch whose checksum or
    keys differ is a mismatch even where its counts agree."""
    batches = []
    for counted in record.batches:
        row = dict(counted)
        findings = check.batches.get(row["batch_id"])
        if findings is not None:
            row |= findings.public()
            if findings.differs:
                row["status"] = "mismatch"
        batches.append(row)
    record.batches = batches
    if any(row["status"] != "ok" for row in batches):
        record.status = "mismatch"
    if not check.listed_all:
        record.warnings = [*record.warnings, RECEIPTS_CUT.format(limit=LISTED_KEYS)]


def _compare_groups(expected: _Expected, counts: Counts, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for group in sorted(
        set(expected.per_group) | set(counts.groups), key=lambda g: (g is not None, str(g))
    ):
        want = expected.per_group.get(group, 0)
        got = counts.groups.get(group)
        actual = got.rows if got else 0
        distinct = got.distinct_keys if got else (0 if counts.distinct_keys is not None else None)
        duplicate_keys = got.duplicate_keys if got else 0
        ok = actual == want and duplicate_keys == 0 and (distinct is None or distinct == want)
        rows.append(
            {
                name: group,
                "status": "ok" if ok else "mismatch",
                "expected_rows": want,
                "actual_rows": actual,
                "distinct_keys": distinct,
                "duplicate_keys": duplicate_keys,
                "duplicate_rows": got.duplicate_rows if got else 0,
            }
        )
    return rows


def public(record: Reconciliation) -> ReconciliationPublic:
    assert record.id is not None  # stored
    fields = record.model_dump()
    fields["table"] = fields.pop("table_id")
    fields["key"] = fields.pop("key_column")
    fields["mismatched_batches"] = [b["batch_id"] for b in record.batches if b["status"] != "ok"]
    return ReconciliationPublic.model_validate(fields)


def list_reconciliations(
    session: Session,
    *,
    run_id: str | None = None,
    table: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> ReconciliationsPublic:
    """Newest first: a run's checks, or a table's whole-table checks."""
    query = select(Reconciliation)
    if run_id is not None:
        if session.get(Run, run_id) is None:
            raise NotFoundError(f"no run {run_id!r}")
        query = query.where(Reconciliation.run_id == run_id)
    if table is not None:
        query = query.where(Reconciliation.table_id == table, Reconciliation.scope == "table")
    records, count = page(
        session,
        query,
        [col(Reconciliation.checked_at).desc(), col(Reconciliation.id).desc()],
        limit=limit,
        offset=offset,
    )
    return ReconciliationsPublic(data=[public(r) for r in records], count=count)


"""Who the audit log names for the check that follows a run's success."""


def summary(result: ReconciliationPublic) -> str:
    """One line for the audit log and the logs: the verdict and its numbers."""
    if result.status == "error":
        return f"reconciliation error, {result.error}"
    parts = [f"expected {result.expected_rows:,} rows", f"found {result.actual_rows:,}"]
    if result.distinct_keys is not None:
        parts.append(f"{result.distinct_keys:,} distinct keys")
    if result.duplicate_key_count:
        parts.append(f"{result.duplicate_key_count:,} keys duplicated")
    if result.missing_rows:
        parts.append(f"{result.missing_rows:,} missing")
    if result.mismatched_batches:
        parts.append(f"batches differing: {result.mismatched_batches}")
    if result.rows_set_aside or result.dead_letter_table:
        parts.append(f"{result.rows_set_aside or 0:,} set aside")
    if result.rows_in_dead_letter_table is not None:
        parts.append(f"{result.rows_in_dead_letter_table:,} in the dead-letter table")
    return f"reconciliation {result.status}, " + ", ".join(parts)


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

    def __init__(self, reconciler: Reconciler, workers: int, queue: int) -> None:
        self.reconciler = reconciler
        self.workers = workers
        self.queue = queue
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: dict[Future[None], tuple[str, str]] = {}  # -> (run id, request id)

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
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.pop(future, None)

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
