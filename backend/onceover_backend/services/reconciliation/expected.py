"""What a check expects, read from what the control plane recorded before BigQuery is
asked: the committed batches' rows (per batch of a run, or per run of a table), the rows
they set aside in dead-letter tables, each batch's receipt, and what to warn of."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from onceover.modes import TRAITS, ModeTraits
from onceover_backend.errors import NotFoundError
from onceover_backend.services.reads.batch_view import overwrite_step, staging_of
from onceover_backend.services.reads.redrives import redrive_runs
from onceover_backend.services.reconciliation.change_check import Changes, changes_of
from onceover_backend.services.reconciliation.receipt_check import Receipt
from onceover_backend.tables import Batch, Run

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
SEVERAL_DEAD_LETTER_TABLES = (
    "the batches named several dead-letter tables ({tables}): rows_in_dead_letter_table "
    "counts the rows in all of them"
)
NO_TALLY = (
    "{missing} of the run's {total} committed batches carry no key tally (written by a sink "
    "before receipts had one, or with a key neither INT64 nor STRING): checked by counts, "
    "not by receipt, so duplicated keys are only sampled and missing keys not named"
)
OTHER_WRITERS = (
    "a table check counts every row of the table: rows written by anything but onceover "
    "count as extra, and rows deleted, expired or truncated since count as missing"
)
OVERWRITE_STAGED = (
    "the run's overwrite stopped with its rows staged in {staging} and no swap heard of, so "
    "{table} holds its old rows and there is nothing of the overwrite to count yet: "
    "reconcile once a resume has swapped them in"
)
OVERWRITE_UNLISTED = (
    "the run's overwrite replaced {count:,} partitions and its swap names the first "
    "{listed:,}, so the rows of the replaced scope cannot be counted from here: count "
    "{table}'s rows in the partitions its rows fall in (job {job_id}) by hand"
)
SWAP_NOT_HEARD_DONE = (
    "the overwrite's swap (job {job_id}) was asked for and not heard done: the table holds "
    "the old rows or the new, as the job ran or not (a resume asks for it again)"
)
OVERWRITTEN_AGAIN = (
    "the run overwrote the table {count} times: the scope the last one replaced is counted "
    "against the rows it staged"
)
APPENDED_BESIDE = (
    "the run also appended {count} batch(es) to the table: only the overwrite's scope is "
    "counted, against the rows it staged"
)
OVERWRITTEN_BY = (
    "run(s) {runs} overwrote the table: a table check adds up every run's committed rows, "
    "so the rows an overwrite replaced count as missing (check each run instead)"
)
VISIBLE_AT_APPEND = (
    "{count} batch(es) of {mode}-mode writes not recorded as committed: the rows "
    "they appended were visible at once, so they can be in the table all the same"
)
PUBLISHED_IN_PART = (
    "{count} batch(es) of {mode}-mode writes not recorded as committed: the driver "
    "may have flushed some of their streams before it stopped, so rows of those "
    "partitions can be in the table all the same (a replay of the batch flushes the rest)"
)


def uncommitted_visible(traits: ModeTraits) -> str | None:
    """What to say of a run's batches of this mode left uncommitted, whose rows can be in
    the table all the same: rows visible as appended, or a publish of one call per stream
    (a flush) that a crash cut short. None where they stay invisible until the commit
    (pending mode), and for the at-least-once baseline (default mode)."""
    if not (traits.exactly_once and traits.uncommitted_rows_may_show):
        return None
    return VISIBLE_AT_APPEND if traits.visible_before_commit else PUBLISHED_IN_PART


@dataclass
class Expected:
    """What the control plane recorded, read before BigQuery is asked."""

    table: str
    rows: int
    per_group: dict[Any, int]
    stamped: bool
    key: str | None
    warnings: list[str] = field(default_factory=list)
    rows_set_aside: int = 0
    """Rows the committed batches of this table set aside in a dead-letter table."""
    rows_redriven: int | None = None
    """A run's: of ``rows_set_aside``, the rows its re-drives landed in this table."""
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
    overwrite: bool = False
    """An overwrite's run: the scope it replaced holds exactly ``rows``, the rows it staged."""
    partitions: tuple[str, ...] | None = None
    """With ``overwrite``: the partitions replaced, by BigQuery's ids; None, the whole table."""
    cannot_check: str | None = None
    """Why BigQuery is not asked (nothing the check could count would mean anything)."""
    changes: Changes | None = None
    """A change data capture scope: the changes its batches sent, checked by the table's
    primary key rather than by rows (:mod:`.change_check`)."""

    @property
    def dead_letter_table(self) -> str | None:
        """The one a report names: the last the batches named."""
        return next(reversed(self.dead_letters), None)


def _is_committed(batch: Batch) -> bool:
    return batch.state == "committed"


def _batch_rows(batch: Batch) -> int:
    return int(batch.rows if batch.rows is not None else batch.expected_rows or 0)


def expected_of_run(session: Session, run: Run, table: str, *, several: bool) -> Expected:
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
    overwrites = [b for b in committed if overwrite_step(b) is not None]
    if overwrites:
        pass  # the scope an overwrite replaced is counted whole, its rows stamped or not
    elif not stamped:
        warnings.append(NOT_STAMPED)
    elif len(stamped_flags) > 1:
        warnings.append(PARTLY_STAMPED)
    if key is None:
        warnings.append(NO_KEY)
    if overwrites:
        expected = _overwrite_expected(overwrites, committed, table, key, warnings)
        _expect_dead_letters(session, expected, committed)
        return expected
    stuck = Counter(b.mode for b in batches if not _is_committed(b))
    for traits in TRAITS.values():
        warning = uncommitted_visible(traits)
        if warning is not None and stuck[traits.mode]:
            warnings.append(warning.format(count=stuck[traits.mode], mode=traits.mode))
    per_batch: dict[Any, int] = {}
    for batch in committed:  # writes of one micro-batch to one table share its stamp
        per_batch[batch.batch_id] = per_batch.get(batch.batch_id, 0) + _batch_rows(batch)
    receipts, untallied = None, None
    if stamped and key is not None and committed and len(stamped_flags) == 1:
        receipts = _receipts(committed)
        if receipts is None:
            tallied = sum(1 for b in committed if b.key_buckets is not None)
            untallied = NO_TALLY.format(missing=len(committed) - tallied, total=len(committed))
    expected = Expected(
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
    _expect_redriven(session, expected, run)
    return _by_key_if_changes(expected, committed)


def _expect_redriven(session: Session, expected: Expected, run: Run) -> None:
    """Of the rows ``run`` set aside, those its re-drives landed in this table so far
    (their runs' committed rows): a person sees the set-aside rows accounted for."""
    if not expected.rows_set_aside:
        return
    redrives = [r.run_id for r in redrive_runs(session, run.run_id)]
    landed = session.exec(
        select(Batch).where(col(Batch.run_id).in_(redrives), Batch.table_id == expected.table)
    )
    expected.rows_redriven = sum(_batch_rows(b) for b in landed if _is_committed(b))


def _overwrite_expected(
    overwrites: list[Batch],
    committed: list[Batch],
    table: str,
    key: str | None,
    warnings: list[str],
) -> Expected:
    """What an overwrite's run expects: exactly the rows its (last) overwrite staged in the
    scope it replaced, the whole table or the partitions its swap names."""
    last = overwrites[-1]  # in the order heard of
    if len(overwrites) > 1:
        warnings.append(OVERWRITTEN_AGAIN.format(count=len(overwrites)))
    if appended := len(committed) - len(overwrites):
        warnings.append(APPENDED_BESIDE.format(count=appended))
    partitions = None if last.swap_partitions is None else tuple(last.swap_partitions)
    expected = Expected(
        table=table,
        rows=last.swap_staged_rows if last.swap_staged_rows is not None else _batch_rows(last),
        per_group={},
        stamped=False,
        key=key,
        warnings=warnings,
        overwrite=True,
        partitions=partitions,
    )
    step = overwrite_step(last)
    if step == "staged":
        expected.cannot_check = OVERWRITE_STAGED.format(staging=staging_of(last), table=table)
    elif partitions is not None and (last.swap_partition_count or 0) > len(partitions):
        expected.cannot_check = OVERWRITE_UNLISTED.format(
            count=last.swap_partition_count, listed=len(partitions), table=table,
            job_id=last.swap_job_id,
        )  # fmt: skip
    elif step == "swap_asked":
        warnings.append(SWAP_NOT_HEARD_DONE.format(job_id=last.swap_job_id))
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


def expected_of_table(session: Session, table: str, key: str | None) -> Expected:
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
    if overwriting := sorted({b.run_id for b in committed if overwrite_step(b) is not None}):
        warnings.append(OVERWRITTEN_BY.format(runs=", ".join(overwriting)))
    if key is None:
        warnings.append(NO_KEY)
    expected = Expected(
        table=table,
        rows=sum(_batch_rows(b) for b in committed),
        per_group=per_run if stamped_runs else {},
        stamped=bool(stamped_runs),
        key=key,
        warnings=warnings,
    )
    _expect_dead_letters(session, expected, sorted(committed, key=lambda b: b.id or 0))
    return _by_key_if_changes(expected, committed)


def _by_key_if_changes(expected: Expected, committed: list[Batch]) -> Expected:
    """``expected``, checked by the primary key when its batches sent changes: then the
    warnings of a check by rows (no stamp, no key option) say nothing of it."""
    changes = changes_of(committed)
    if changes is None:
        return expected
    expected.changes = changes
    expected.receipts = None
    expected.warnings = [w for w in expected.warnings if w not in (NOT_STAMPED, NO_KEY)]
    return expected


def _expect_dead_letters(session: Session, expected: Expected, committed: list[Batch]) -> None:
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
