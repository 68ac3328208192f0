"""Reconciling a change data capture table: by its primary key, not by a row count.

A CDC write's rows are changes (UPSERT, DELETE), which BigQuery applies by the table's
primary key: the table ends with one row per live key, whatever number of changes were
sent, so comparing its rows with the changes' would call every CDC run a mismatch. The
check for a scope whose committed batches reported changes (``upserts`` / ``deletes``)
is instead what CDC promises and a broken replay or a plain append beside it would break:
each key held once, no row without its key. It says how many changes were sent and how
many rows and keys the table holds. Which version each key holds only the source can
tell: given its state as a BigQuery table (``against``: a snapshot, an export), the check
also compares the two key by key, on every column they share: keys missing, keys extra
(a deleted row back), keys whose row differs (an old version won).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE
from onceover_backend.errors import ReconciliationFailedError

if TYPE_CHECKING:
    from onceover_backend.services.reconciliation.bigquery_counts import TableCounter
    from onceover_backend.tables import Batch, Reconciliation

METHOD = "changes"
CHANGES_SENT = (
    "a change data capture table: {upserts:,} upserts and {deletes:,} deletes were sent, "
    "which BigQuery applies by the primary key ({key}); the check is that each key is held "
    "once, not a row count. Which version each key holds only the source can tell: give "
    "its state as a table (against=) to compare key by key"
)


@dataclass(frozen=True)
class Changes:
    """The changes a scope's committed batches sent."""

    upserts: int
    deletes: int


def changes_of(committed: Sequence[Batch]) -> Changes | None:
    """The changes of ``committed`` batches; None when none of them was a CDC write."""
    cdc = [b for b in committed if b.upserts is not None or b.deletes is not None]
    if not cdc:
        return None
    return Changes(sum(b.upserts or 0 for b in cdc), sum(b.deletes or 0 for b in cdc))


@dataclass(frozen=True)
class KeyCounts:
    """What the table holds, by its primary key."""

    key: tuple[str, ...]
    rows: int
    keys: int
    rows_without_key: int


def count_keys(counter: TableCounter, table: str) -> KeyCounts:
    """The table's rows, its distinct primary keys and the rows with a key column NULL
    (three aggregates in one query); a table without a primary key fails the check."""
    found = counter.table(table)
    constraints = found.table_constraints
    primary = constraints.primary_key if constraints is not None else None
    key = tuple(primary.columns) if primary is not None and primary.columns else ()
    if not key:
        raise ReconciliationFailedError(
            f"table {table} has no primary key, so its changes cannot be checked by key "
            "(was it dropped?)"
        )
    if not all(COLUMN_NAME_RE.match(column) for column in key):  # inside backticks below
        raise ReconciliationFailedError(f"table {table}'s primary key {key} cannot be queried")
    columns = ", ".join(f"`{c}`" for c in key)
    nulls = " OR ".join(f"`{c}` IS NULL" for c in key)
    row = counter.one(
        f"SELECT (SELECT COUNT(*) FROM `{table}`) AS total_rows, "
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM `{table}` GROUP BY {columns})) AS distinct_keys, "
        f"(SELECT COUNT(*) FROM `{table}` WHERE {nulls}) AS rows_without_key",
        [],
    )
    return KeyCounts(key, int(row["total_rows"]), int(row["distinct_keys"]),
                     int(row["rows_without_key"]))  # fmt: skip


@dataclass(frozen=True)
class SourceDiff:
    """The table against the source's state, key by key."""

    source: str
    missing: int
    """Keys of the source the table lacks (a lost upsert, a delete applied wrongly)."""
    extra: int
    """Keys the table holds that the source does not (a deleted row back)."""
    differing: int
    """Keys of both whose rows differ in a column both have (an old version won)."""


def compare_with_source(
    counter: TableCounter, table: str, source: str, key: tuple[str, ...]
) -> SourceDiff:
    """``table`` against ``source`` (the source's state as a BigQuery table: a snapshot, an
    export), on the primary key and every column the two share, in three queries, as
    Apache Beam's load test checks its table (``EXCEPT DISTINCT`` both ways)."""
    if not TABLE_ID_RE.match(source):  # nothing else may go between backticks
        raise ReconciliationFailedError(f"source table id {source!r} is not project.dataset.table")
    ours = {f.name.casefold(): f.name for f in counter.table(table).schema}
    theirs = [f.name for f in counter.table(source).schema]
    shared = [name for name in theirs if name.casefold() in ours and COLUMN_NAME_RE.match(name)]
    lacking = [c for c in key if c.casefold() not in {n.casefold() for n in shared}]
    if lacking:
        raise ReconciliationFailedError(
            f"source {source} lacks the primary key column(s) {', '.join(lacking)} of {table}"
        )
    keys = ", ".join(f"`{c}`" for c in key)
    on = " AND ".join(f"a.`{c}` = b.`{c}`" for c in key)
    first = f"b.`{key[0]}`"
    columns = ", ".join(f"`{c}`" for c in shared)

    def absent(left: str, right: str) -> int:
        row = counter.one(
            f"SELECT COUNT(*) AS n FROM (SELECT {keys} FROM `{left}` GROUP BY {keys}) a "
            f"LEFT JOIN (SELECT {keys} FROM `{right}` GROUP BY {keys}) b ON {on} "
            f"WHERE {first} IS NULL",
            [],
        )
        return int(row["n"])

    differing = counter.one(
        f"SELECT COUNT(*) AS n FROM (SELECT {keys} FROM (SELECT {columns} FROM `{source}` "
        f"EXCEPT DISTINCT SELECT {columns} FROM `{table}`) GROUP BY {keys}) a "
        f"JOIN (SELECT {keys} FROM `{table}` GROUP BY {keys}) b ON {on}",
        [],
    )
    return SourceDiff(source, absent(source, table), absent(table, source), int(differing["n"]))


def judge(
    record: Reconciliation, changes: Changes, counts: KeyCounts, diff: SourceDiff | None = None
) -> None:
    """Fill ``record``: ``ok`` when each key is held once and no row lacks its key, and
    (against a source) every key of the source is there, with its row, and no other."""
    record.method = METHOD
    record.key_column = ", ".join(counts.key)
    record.expected_rows = None  # a count of live keys is not what the changes promise
    record.actual_rows = counts.rows
    record.distinct_keys = counts.keys
    record.rows_without_key = counts.rows_without_key
    record.duplicate_rows = counts.rows - counts.keys
    record.missing_rows = None
    record.extra_rows = counts.rows - counts.keys
    record.warnings = [
        *record.warnings,
        CHANGES_SENT.format(
            upserts=changes.upserts, deletes=changes.deletes, key=record.key_column
        ),
    ]
    ok = counts.rows == counts.keys and counts.rows_without_key == 0
    if diff is not None:
        record.compared_with = diff.source
        record.missing_rows = diff.missing
        record.extra_rows = (counts.rows - counts.keys) + diff.extra
        record.keys_differing = diff.differing
        ok = ok and diff.missing == diff.extra == diff.differing == 0
    record.status = "ok" if ok else "mismatch"
