"""Group commit: batches given while a transaction runs are stored in the next one,
together, each with its own result, and each still all or none on its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from onceover_backend.models import IngestResultPublic
from onceover_backend.services.ingest.group_commit import GroupCommit
from onceover_backend.services.ingest.transaction import EventBatch, Ingested
from onceover_backend.tables import AuditLog, Event, Run
from sqlalchemy import Engine, event, func
from sqlmodel import Session, select

from onceover import events as ev
from tests.backend import factory as f
from tests.helpers.waiting import wait_until


def _audit(note: str) -> Callable[[IngestResultPublic], AuditLog]:
    def row(result: IngestResultPublic) -> AuditLog:
        return AuditLog(
            actor="ingest", action="ingestEvents", method="POST", path="/api/events",
            request_id=note, status_code=200,
            outcome=f"{note}: stored {result.stored} of {result.received}",
        )  # fmt: skip

    return row


def _refused(_result: IngestResultPublic) -> AuditLog:
    raise ValueError("this batch's audit row cannot be made")


class _Scenario:
    """One batch holds the only transaction (its audit row is made inside it) until
    ``queued`` batches wait for the next; those are given from threads of their own."""

    def __init__(self, engine: Engine, queued: list[EventBatch], *, max_events: int = 5000) -> None:
        self.group_commit = GroupCommit(engine, max_events=max_events)
        self.holding = threading.Event()
        self.commits = 0
        self.results: dict[int, Ingested | BaseException] = {}
        self._queued = queued
        event.listen(engine, "commit", self._counted)

    def _counted(self, _connection: Any) -> None:
        self.commits += 1

    def _hold(self, result: IngestResultPublic) -> AuditLog:
        self.holding.set()
        wait_until(
            "the other batches waiting for the next transaction",
            lambda: self.group_commit.waiting() == len(self._queued) or None,
            timeout_s=20,
        )
        return _audit("first")(result)

    def _give(self, number: int, batch: EventBatch) -> None:
        try:
            self.results[number] = self.group_commit.ingest(batch)
        except BaseException as exc:
            self.results[number] = exc

    def run(self, first: list[ev.Event]) -> None:
        holder = threading.Thread(
            target=self._give, args=(0, EventBatch(first, audit_row=self._hold))
        )
        holder.start()
        wait_until("the first batch in its transaction", lambda: self.holding.is_set() or None, 20)
        threads = [
            threading.Thread(target=self._give, args=(number, batch))
            for number, batch in enumerate(self._queued, start=1)
        ]
        for thread in threads:
            thread.start()
        for thread in [holder, *threads]:
            thread.join(60)
        assert len(self.results) == len(self._queued) + 1, self.results


def _count(engine: Engine, table: type[Any]) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(table)).one())


def test_batches_given_meanwhile_share_one_transaction_each_with_its_own_result(
    engine: Engine,
) -> None:
    r2 = f.full_run("r2")
    scenario = _Scenario(
        engine,
        [
            EventBatch(r2[:6], audit_row=_audit("r2 begun")),
            # Three events the batch before holds too: stored once, by the first.
            EventBatch(r2[3:], audit_row=_audit("r2 ended")),
            EventBatch(f.full_run("r3"), audit_row=_audit("r3")),
        ],
    )
    scenario.run(f.full_run("r1"))

    results = scenario.results
    assert all(isinstance(result, Ingested) for result in results.values()), results
    assert scenario.commits == 2, "the three batches waiting were stored in one transaction"
    outcome = {n: (r.result.stored, r.result.duplicates, r.result.run_ids, r.succeeded)
               for n, r in results.items() if isinstance(r, Ingested)}  # fmt: skip
    assert outcome == {
        0: (11, 0, ["r1"], ["r1"]),
        1: (6, 0, ["r2"], []),
        2: (5, 3, ["r2"], ["r2"]),  # r2 completes here: reconciled once, by this batch
        3: (11, 0, ["r3"], ["r3"]),
    }
    assert _count(engine, Event) == 33
    with Session(engine) as session:
        runs = session.exec(select(Run.run_id, Run.status).order_by(Run.run_id)).all()
        audits = sorted(session.exec(select(AuditLog.outcome)).all())
    assert [tuple(run) for run in runs] == [(r, "succeeded") for r in ("r1", "r2", "r3")]
    assert audits == [
        "first: stored 11 of 11",
        "r2 begun: stored 6 of 6",
        "r2 ended: stored 5 of 8",
        "r3: stored 11 of 11",
    ]


@pytest.mark.parametrize("bad", [1, 2])
def test_a_batch_that_fails_in_a_group_fails_alone(engine: Engine, bad: int) -> None:
    batches = [EventBatch(f.full_run(f"r{n}"), audit_row=_audit(f"r{n}")) for n in (1, 2)]
    batches.insert(bad - 1, EventBatch(f.full_run("bad"), audit_row=_refused))
    scenario = _Scenario(engine, batches)
    scenario.run(f.full_run("r0"))

    failure = scenario.results.pop(bad)
    assert isinstance(failure, ValueError), failure
    assert "audit row cannot be made" in str(failure)
    assert all(isinstance(result, Ingested) for result in scenario.results.values())
    with Session(engine) as session:
        stored_runs = sorted(session.exec(select(Event.run_id).distinct()).all())
    assert stored_runs == ["r0", "r1", "r2"], "the failed batch stored nothing, the rest all"
    assert _count(engine, Event) == 33


def test_a_group_holds_at_most_max_events_and_a_batch_larger_goes_alone(
    engine: Engine,
) -> None:
    batches = [EventBatch(f.full_run(f"r{n}")) for n in (1, 2, 3)]  # 11 events each
    scenario = _Scenario(engine, batches, max_events=25)
    scenario.run(f.full_run("r0"))
    assert all(isinstance(result, Ingested) for result in scenario.results.values())
    assert scenario.commits == 3, "r0; r1 and r2 (22 events); r3"
    assert _count(engine, Event) == 44

    alone = GroupCommit(engine, max_events=5).ingest(EventBatch(f.full_run("big")))
    assert alone.result.stored == 11
    with pytest.raises(ValueError, match="max_events must be at least 1, not 0"):
        GroupCommit(engine, max_events=0)
