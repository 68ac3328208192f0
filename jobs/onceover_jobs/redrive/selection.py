"""Which set-aside rows a re-drive sends: read from the dead-letter table, kept apart from
those an earlier re-drive took, recorded in the ledger before a row is sent.

A set-aside row is named by where it was written (run, query, batch, write, table,
partition, offset): the dead-letter table holds each once, since its streams are committed
with their batch, exactly once. A re-drive of run ``R`` takes the rows of ``R`` and of
``R``'s re-drives (``R:redrive-<n>``: rows BigQuery refused again) that no committed
re-drive took. Each re-drive is a ledger record, ``redrives/<R>/<n>.json``, created
exclusively (two re-drives of one run at once: one of them is refused) and holding the
names of its rows; it is committed when each of its writes is (the sink's own ledger
records, under the re-drive's run id).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from onceover.ledger_files import read_payload, safe_name
from onceover.ledger_store import LedgerStore, join
from onceover.redrives import redrive_run_id
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.identity import write_id_name
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_exclusively

FOLDER = "redrives"
WRITE_ID = "redrive"
"""Every re-drive write's ``write_id``: one write per table under the re-drive's run id."""
MAX_REDRIVES = 10_000


@dataclass(frozen=True)
class SetAsideRow:
    """One row of the dead-letter table."""

    run_id: str
    query_id: str | None
    batch_id: int | None
    write: str | None
    table: str
    partition: int
    offset: int
    key: str | None
    column: str | None
    reason: str
    row: str

    @property
    def name(self) -> str:
        """Where the row was written: unique in the dead-letter table."""
        return "|".join(
            str(part) for part in (self.run_id, self.query_id, self.batch_id, self.write,
                                   self.table, self.partition, self.offset)
        )  # fmt: skip

    @classmethod
    def of(cls, found: Any) -> SetAsideRow:
        return cls(
            run_id=found["run_id"], query_id=found["query_id"],
            batch_id=None if found["batch_id"] is None else int(found["batch_id"]),
            write=found["write"], table=found["table"], partition=int(found["partition"]),
            offset=int(found["offset"]), key=found["key"], column=found["column"],
            reason=found["reason"], row=found["row"],
        )  # fmt: skip


@dataclass(frozen=True)
class Redrive:
    """One re-drive of a run: its number, its run id and the rows it takes."""

    of_run: str
    number: int
    rows: tuple[str, ...]
    """The names (:attr:`SetAsideRow.name`) of the rows it sends."""
    tables: tuple[str, ...]
    created_at: str
    dead_letter: str | None = None
    """The dead-letter table its rows were read from (None: recorded before it was kept)."""

    @property
    def run_id(self) -> str:
        return redrive_run_id(self.of_run, self.number)


class Redrives:
    """The re-drives of one run, in the ledger."""

    def __init__(self, store: LedgerStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.directory = join(FOLDER, safe_name(run_id))

    def all(self) -> list[Redrive]:
        found: list[Redrive] = []
        for number in range(1, MAX_REDRIVES + 1):
            payload = read_payload(self.store, self._key(number))
            if payload is None:
                return found
            found.append(self._of(payload, number))
        raise LedgerError(f"{self.store.where(self.directory)}: more than {MAX_REDRIVES} re-drives")

    def committed(self, redrive: Redrive) -> bool:
        """Whether every write of ``redrive`` is committed (the sink's ledger records)."""
        for table in redrive.tables:
            record = Ledger(self.store, redrive.run_id, table, write_id_name(WRITE_ID)).batch(None)
            if record is None or not record.committed:
                return False
        return True

    def taken(self, redrives: Iterable[Redrive]) -> set[str]:
        """The rows the committed ones of ``redrives`` took."""
        return {name for r in redrives if self.committed(r) for name in r.rows}

    def record(self, number: int, rows: Sequence[SetAsideRow], dead_letter: str) -> Redrive:
        """Re-drive ``number`` of ``rows`` (read from ``dead_letter``), recorded before any
        of them is sent."""
        redrive = Redrive(
            of_run=self.run_id,
            number=number,
            rows=tuple(sorted(r.name for r in rows)),
            tables=tuple(sorted({r.table for r in rows})),
            created_at=datetime.now(UTC).isoformat(),
            dead_letter=dead_letter,
        )
        payload = {
            "of_run": redrive.of_run, "rows": list(redrive.rows), "tables": list(redrive.tables),
            "created_at": redrive.created_at, "dead_letter": dead_letter,
        }  # fmt: skip
        if not write_exclusively(self.store, self._key(number), payload):
            raise LedgerError(
                f"{self.store.where(self._key(number))}: another re-drive of run {self.run_id} "
                "started at the same moment; let it finish, then re-drive again"
            )
        return redrive

    def _key(self, number: int) -> str:
        return join(self.directory, f"{number}.json")

    def _of(self, payload: dict[str, Any], number: int) -> Redrive:
        try:
            return Redrive(
                of_run=str(payload["of_run"]), number=number,
                rows=tuple(str(n) for n in payload["rows"]),
                tables=tuple(str(t) for t in payload["tables"]),
                created_at=str(payload["created_at"]),
                dead_letter=None if (table := payload.get("dead_letter")) is None else str(table),
            )  # fmt: skip
        except (KeyError, TypeError) as exc:
            where = self.store.where(self._key(number))
            raise LedgerError(f"re-drive record {where} is unreadable: {exc}") from exc


def describe(rows: Sequence[SetAsideRow]) -> str:
    """The rows' reasons, most common first: what a re-drive is about to send."""
    reasons: dict[str, int] = {}
    for row in rows:
        reasons[row.reason] = reasons.get(row.reason, 0) + 1
    top = sorted(reasons.items(), key=lambda item: -item[1])[:3]
    return "; ".join(f"{n} rows: {json.dumps(reason)}" for reason, n in top)
