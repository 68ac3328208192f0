"""The projection's fast paths keep its rules: whatever the order and the batches events
come in, and however often, the stored state is the same, and it adds up to the events.

The events are two of the control-plane bench's runs (services/ingest/projection.py takes
nine in ten of them on its append fast path, and skips recomputing a run that heard
only stream events): one succeeds, one fails in its third batch."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import Attempt, Batch, Event, Run, Stream, WriteRollup
from onceover_tools.bench.control_plane_workload import FAIL_AT, run_events
from sqlalchemy import Engine, delete
from sqlmodel import Session, select

from onceover import events as ev

START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
_SKIP = {"id", "updated_at"}  # row ids, and when the control plane last wrote the run


def _events() -> list[ev.Event]:
    return run_events(0, START) + run_events(FAIL_AT, START)


def _state(engine: Engine) -> dict[str, Any]:
    with Session(engine) as session:
        return {
            table.__name__: sorted(
                (
                    tuple(sorted((k, v) for k, v in row.model_dump().items() if k not in _SKIP))
                    for row in session.exec(select(table))
                ),
                key=repr,
            )
            for table in (Run, Attempt, Batch, Stream, WriteRollup)
        }


def _ingest_in_pieces(engine: Engine, events: list[ev.Event], seed: int) -> None:
    rng = random.Random(seed)
    shuffled = list(events)
    rng.shuffle(shuffled)
    shuffled += rng.sample(events, 200)  # some sent again: retries
    while shuffled:
        size = rng.randint(1, 60)
        ingest_events(engine, shuffled[:size])
        del shuffled[:size]


def test_any_order_and_batching_gives_the_same_state(engine: Engine) -> None:
    events = _events()
    ingest_events(engine, events)
    expected = _state(engine)

    for seed in (1, 2):
        with Session(engine) as session:  # start again from nothing stored
            for table in (Event, WriteRollup, Stream, Batch, Attempt, Run):
                session.execute(delete(table))
            session.commit()
        _ingest_in_pieces(engine, events, seed)
        assert _state(engine) == expected, seed


def test_the_state_adds_up_to_the_events(engine: Engine) -> None:
    events = _events()
    ingest_events(engine, events)

    with Session(engine) as session:
        streams = {s.name: s for s in session.exec(select(Stream))}
        runs = {r.run_id: r for r in session.exec(select(Run))}
        rollups = list(session.exec(select(WriteRollup)))
    acked = [e for e in events if isinstance(e, ev.AppendAcknowledged)]
    for name, stream in streams.items():
        mine = [e for e in acked if e.stream == name]
        assert (stream.appends, stream.rows) == (len(mine), sum(e.rows for e in mine)), name
        assert stream.next_offset == max(e.offset + e.rows for e in mine if e.offset is not None)
    codes: dict[str, int] = {}
    for rollup in rollups:
        codes[rollup.code] = codes.get(rollup.code, 0) + rollup.requests
    assert codes == {
        "OK": len(acked),
        "ALREADY_EXISTS": sum(isinstance(e, ev.AppendAlreadyExists) for e in events),
        **{
            code: sum(isinstance(e, ev.AppendError) and e.code == code for e in events)
            for code in ("UNAVAILABLE", "INTERNAL")
        },
    }
    succeeded, failed = runs["bench-000000"], runs[f"bench-{FAIL_AT:06d}"]
    assert (succeeded.status, failed.status) == ("succeeded", "failed")
    committed = [e for e in events if isinstance(e, ev.BatchCommitted)]
    for run in (succeeded, failed):
        batches = [e for e in committed if e.run_id == run.run_id]
        assert (run.batches_committed, run.rows_committed) == (
            len(batches), sum(e.rows for e in batches),
        )  # fmt: skip
        reported = [e.rows_committed for e in events
                    if isinstance(e, ev.RunHeartbeat | ev.RunFinished | ev.RunFailed)
                    and e.run_id == run.run_id and e.rows_committed is not None]  # fmt: skip
        assert run.rows_reported == max(reported)
