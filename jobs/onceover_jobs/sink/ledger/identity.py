"""Which write a task belongs to: the key every ledger record is filed under.

A ledger record must name one write and only one, or a replay is written twice and a
second write is skipped as if it were a replay. The three ways to write differ:

==================================  ==============================================
how the user writes                 identity
==================================  ==============================================
``writeStream.format("onceover")``  (query id, batch id, table)
``foreachBatch`` calling            (query id, batch id, table, the write's ordinal
``df.write.format("onceover")``     among the call's writes to that table, or
                                    ``write_id``)
``df.write.format("onceover")``     (``run_id``, table, the write's ordinal among
                                    the driver's writes to that table under that
                                    run id, or ``write_id``)
==================================  ==============================================

A foreachBatch call is found in the task's local properties: Spark sets the query id
and the micro-batch id on the thread that runs the function, and every job that
thread starts carries them to its tasks (the driver-side planning of a Python data
source sees none of this, so the tasks work it out).

The ordinal counts writes to one table within one *call*: one foreachBatch call (the
session's job tag and the micro-batch's root SQL execution), or one driver session
for a plain batch write. A restarted query or a re-run driver is a new call, so its
k-th write to a table is the k-th write of the run it replays. Writes are counted
in :class:`OrdinalRegistry`, in the ledger: a write that failed before it was
committed hands its ordinal to the next write of the same call to that table (a
retried ``save()``), so a failed attempt never shifts the writes after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from onceover.ledger_store import LedgerStore, join
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.writes import Sync, write_exclusively, write_replacing

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

Kind = Literal["streaming", "foreachBatch", "batch"]

MAX_WRITES_PER_CALL = 10_000
"""A bound on the registry's scan; a call writing one table more often is refused."""
MAX_RACES = 100
"""Tries to register a write while others register theirs at the same moment."""

_SESSION_TAG = re.compile(r"^spark-session-[0-9a-f-]+$")


@dataclass(frozen=True)
class SparkCall:
    """What Spark's local properties say about the job a task belongs to."""

    query_id: str | None = None
    """``sql.streaming.queryId``: set inside a streaming query (and its foreachBatch)."""
    batch_id: int | None = None
    """``streaming.sql.batchId``: the micro-batch."""
    session: str | None = None
    """The session's job tag (``spark-session-<uuid>``): new for every driver session."""
    root_execution: str | None = None
    """``spark.sql.execution.root.id``: in foreachBatch, the micro-batch's own execution."""
    execution: str | None = None
    """``spark.sql.execution.id``: this write."""

    @classmethod
    def from_properties(cls, get: Callable[[str], str | None]) -> SparkCall:
        batch = get("streaming.sql.batchId")
        tags = (get("spark.job.tags") or "").split(",")
        return cls(
            query_id=get("sql.streaming.queryId"),
            batch_id=int(batch) if batch is not None else None,
            session=next((t for t in tags if _SESSION_TAG.match(t)), None),
            root_execution=get("spark.sql.execution.root.id"),
            execution=get("spark.sql.execution.id"),
        )

    @property
    def in_foreach_batch(self) -> bool:
        return self.query_id is not None and self.batch_id is not None

    def marker(self) -> str | None:
        """What tells this call from a replay of it: None when Spark did not say."""
        if self.session is None:
            return None
        if self.in_foreach_batch:
            return f"{self.session}-root-{self.root_execution}"
        return self.session


@dataclass(frozen=True)
class WriteIdentity:
    kind: Kind
    scope: str
    """The streaming query id (streaming, foreachBatch) or the run id (batch)."""
    table: str
    batch_id: int | None
    """The micro-batch (streaming, foreachBatch); None for a batch write."""
    write: str = ""
    """Which of the scope's writes to ``table``: ``""`` for the streaming sink (one per
    query), the ordinal (``"0"``, ``"1"``, ...) or ``id-<write_id>`` otherwise."""

    @property
    def in_query(self) -> bool:
        """A streaming query's write: the sink's own micro-batch, or a foreachBatch call's."""
        return self.kind != "batch"

    def describe(self) -> str:
        batch = "" if self.batch_id is None else f" batch {self.batch_id}"
        write = f" write {self.write}" if self.write else ""
        what = {"streaming": "query", "foreachBatch": "query", "batch": "run"}[self.kind]
        return f"{self.kind} {what} {self.scope}{batch} into {self.table}{write}"

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "scope": self.scope,
            "table": self.table,
            "batch_id": self.batch_id,
            "write": self.write,
        }


@dataclass(frozen=True)
class UnresolvedWrite:
    """A ``df.write`` as its driver plans it, before any task ran: only the tasks can tell
    whether it runs inside foreachBatch (Spark's local properties reach the tasks, not the
    planning of a Python data source) and which of its call's writes to the table it is.
    Each task resolves it (:func:`onceover_jobs.sink.protocol.resolve.resolve_write`)
    before its first row; the driver takes the :class:`WriteIdentity` from their results."""

    table: str
    run_id: str
    """The ``run_id`` option, or one made once for this write on the driver: a batch
    write's scope, and the run its events name until a task says otherwise."""

    def describe(self) -> str:
        return f"a write of run {self.run_id} into {self.table} (not identified yet)"


def write_id_name(write_id: str) -> str:
    return f"id-{write_id}"


class OrdinalRegistry:
    """The writes of one call to one table, in order: ``<k>.json`` names the SQL
    execution that holds ordinal k. Files are created exclusively, so the tasks of one
    write racing to register agree on one ordinal. They are not fsynced
    (:mod:`onceover_jobs.sink.ledger.writes`): a call is one driver session, which a
    crash of its machine ends, and a new session counts in a registry of its own."""

    def __init__(self, store: LedgerStore, directory: str) -> None:
        self.store = store
        self.directory = directory

    def ordinal(self, execution: str, committed: Callable[[int], bool]) -> int:
        """The ordinal of ``execution``: its own if registered; else the last one if its
        write never committed (a failed write, which this one retries); else the next."""
        for _ in range(MAX_RACES):
            last = self._last_or_own(execution)
            if last is not None and last[1]:
                return last[0]  # registered already (another task of this write)
            if last is not None and not committed(last[0]):
                write_replacing(
                    self.store, self._key(last[0]), {"execution": execution}, sync=Sync.NONE
                )
                if self._owner(last[0]) == execution:
                    return last[0]
                continue  # another write took it over at the same moment
            k = 0 if last is None else last[0] + 1
            if write_exclusively(
                self.store, self._key(k), {"execution": execution}, sync=Sync.NONE
            ):
                return k
            # another task of this write (or another write) registered k first: look again
        raise LedgerError(
            f"{self.store.where(self.directory)}: writes to one table kept racing for their "
            "place; writes that run at once need a write_id each"
        )

    def _last_or_own(self, execution: str) -> tuple[int, bool] | None:
        """(k, True) where ``execution`` is registered; else (the last k, False); else None."""
        last: int | None = None
        for k in range(MAX_WRITES_PER_CALL):
            owner = self._owner(k)
            if owner is None:
                return None if last is None else (last, False)
            if owner == execution:
                return k, True
            last = k
        raise LedgerError(
            f"{self.store.where(self.directory)}: more than {MAX_WRITES_PER_CALL:,} writes to "
            "one table in one call; give each a write_id"
        )

    def _key(self, k: int) -> str:
        return join(self.directory, f"{k}.json")

    def _owner(self, k: int) -> str | None:
        found = self.store.read(self._key(k))
        if found is None:
            return None
        try:
            payload: Mapping[str, object] = json.loads(found.data)
        except ValueError as exc:
            where = self.store.where(self._key(k))
            raise LedgerError(f"ledger registry {where} is unreadable: {exc}") from exc
        return str(payload.get("execution"))
