"""Commits by the hour: each batch counted once, in the UTC hour of its first commit.

The overview shows each table's last commit, the rows committed today and the rows set
aside over 24 hours. Summing those over the batches read every batch stored, each call,
a cost that grew with what was stored (docs/journal/profiling.md, "Commits by the hour");
``CommitHour`` keeps them per run, table and hour, in the ingest transaction
that moves a batch.

A batch's *share* is one batch, its rows and rows set aside, at its first commit's
time. Events move it: a first commit reported (the share appears), an earlier report
of it arriving after a later one (the share moves to the earlier time, maybe another
hour), what the batch set aside corrected. The projection notes each batch's share as
it was loaded (:meth:`CommitHours.note`); at the end of the transaction
:meth:`CommitHours.write` adds the difference: the old share taken out of its hour, the
new one added to its own. The latest commit only rises when added to, so an hour a
commit left has its latest recomputed from its batches (rare: a report out of order),
and is removed once it holds none.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, case, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from onceover_backend.tables import Batch, CommitHour

HourKey = tuple[str, datetime, str]
"""A ``CommitHour`` row's key: run, UTC hour, table."""


@dataclass(frozen=True)
class Share:
    """What one batch adds to the hour of its first commit."""

    key: HourKey
    rows: int
    dead_lettered_rows: int
    committed_at: datetime


def share(batch: Batch) -> Share | None:
    """The batch's share, or None while it has not committed."""
    if batch.committed_at is None:
        return None
    at = batch.committed_at.astimezone(UTC)
    hour = at.replace(minute=0, second=0, microsecond=0)
    return Share(
        (batch.run_id, hour, batch.table_id), batch.rows or 0, batch.dead_lettered_rows, at
    )


@dataclass
class _Change:
    batches: int = 0
    rows: int = 0
    dead_lettered_rows: int = 0
    last_commit_at: datetime | None = None


class CommitHours:
    """The shares of the batches one ingest transaction touches, before and after."""

    def __init__(self) -> None:
        self._before: dict[object, Share | None] = {}

    def note(self, key: object, batch: Batch) -> None:
        """Remember ``batch``'s share as loaded (or made), before any event moves it."""
        self._before.setdefault(key, share(batch))

    def write(self, connection: Connection, batches: dict[Any, Batch]) -> None:
        """Add what moved to ``CommitHour``; the batches must be flushed already (an
        hour a commit left is recomputed from them)."""
        changes: dict[HourKey, _Change] = defaultdict(_Change)
        left: set[HourKey] = set()
        for key, batch in batches.items():
            before, after = self._before.get(key), share(batch)
            if before == after:
                continue
            if before is not None:
                taken = changes[before.key]
                taken.batches -= 1
                taken.rows -= before.rows
                taken.dead_lettered_rows -= before.dead_lettered_rows
                if after is None or after.committed_at != before.committed_at:
                    left.add(before.key)
            if after is not None:
                added = changes[after.key]
                added.batches += 1
                added.rows += after.rows
                added.dead_lettered_rows += after.dead_lettered_rows
                if added.last_commit_at is None or after.committed_at > added.last_commit_at:
                    added.last_commit_at = after.committed_at
        if not changes:
            return
        # In key order: a fixed lock order on PostgreSQL, each key once (ON CONFLICT).
        connection.execute(
            _summing_upsert(connection.dialect.name),
            [
                {"run_id": run_id, "hour": hour, "table_id": table_id,
                 "batches": c.batches, "rows": c.rows,
                 "dead_lettered_rows": c.dead_lettered_rows, "last_commit_at": c.last_commit_at}
                for (run_id, hour, table_id), c in sorted(changes.items())
            ],
        )  # fmt: skip
        if left:
            keys = [
                {"r": run_id, "h": hour, "t": table_id, "next": hour + timedelta(hours=1)}
                for run_id, hour, table_id in sorted(left)
            ]
            connection.execute(_LATEST, keys)
            connection.execute(_EMPTIED, keys)


_ROW = and_(
    CommitHour.run_id == bindparam("r"),  # type: ignore[arg-type]
    CommitHour.hour == bindparam("h"),  # type: ignore[arg-type]
    CommitHour.table_id == bindparam("t"),  # type: ignore[arg-type]
)
_LATEST = (
    update(CommitHour)
    .where(_ROW)
    .values(
        last_commit_at=select(func.max(Batch.committed_at))
        .where(
            Batch.run_id == bindparam("r"),  # type: ignore[arg-type]
            Batch.table_id == bindparam("t"),  # type: ignore[arg-type]
            Batch.committed_at >= bindparam("h"),
            Batch.committed_at < bindparam("next"),
        )
        .scalar_subquery()
    )
)
"""An hour's latest commit, from its batches (the index on the batch's run finds them)."""
_EMPTIED = delete(CommitHour).where(_ROW, CommitHour.batches <= 0)  # type: ignore[arg-type]


@cache
def _summing_upsert(dialect: str) -> Any:
    """Adds each count to the stored row of its key and keeps the later latest commit.
    Built once a dialect (as the projection's rollups are)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = CommitHour.__table__  # type: ignore[attr-defined]
    base = insert(table)
    stored, sent = table.c.last_commit_at, base.excluded.last_commit_at
    return base.on_conflict_do_update(
        index_elements=["run_id", "hour", "table_id"],
        set_={
            **{name: table.c[name] + base.excluded[name]
               for name in ("batches", "rows", "dead_lettered_rows")},
            "last_commit_at": case((or_(stored.is_(None), sent > stored), sent), else_=stored),
        },
    )  # fmt: skip
