"""The commits by the hour (services/ingest/commit_hours.py) say what the batches say: each
batch once, in the UTC hour of its first commit, with its rows and rows set aside and
the latest commit of the hour, whatever order and however often its commits are
reported (the migration that counts the batches stored before it:
test_migrations.py)."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import Batch, CommitHour, Event
from onceover_tools.bench.control_plane_workload import FAIL_AT, run_events
from sqlalchemy import Engine, delete
from sqlmodel import Session, col, select

from onceover import events as ev
from tests.backend import factory as f

Hours = dict[tuple[str, datetime, str], tuple[int, int, int, datetime | None]]
HOUR = timedelta(hours=1)


def _from_batches(engine: Engine) -> Hours:
    """What the batches say, summed here from every committed one."""
    summed: dict[tuple[str, datetime, str], list[Any]] = defaultdict(lambda: [0, 0, 0, None])
    with Session(engine) as session:
        batches = session.exec(select(Batch).where(col(Batch.committed_at).is_not(None))).all()
    for batch in batches:
        assert batch.committed_at is not None
        at = batch.committed_at.astimezone(UTC)
        kept = summed[(batch.run_id, at.replace(minute=0, second=0, microsecond=0), batch.table_id)]
        kept[0] += 1
        kept[1] += batch.rows or 0
        kept[2] += batch.dead_lettered_rows
        kept[3] = at if kept[3] is None else max(kept[3], at)
    return {key: (n, rows, dead, last) for key, (n, rows, dead, last) in summed.items()}


def _stored(engine: Engine) -> Hours:
    with Session(engine) as session:
        return {
            (h.run_id, h.hour.astimezone(UTC), h.table_id): (
                h.batches, h.rows, h.dead_lettered_rows,
                h.last_commit_at and h.last_commit_at.astimezone(UTC),
            )
            for h in session.exec(select(CommitHour))
        }  # fmt: skip


def _again(event: ev.BatchCommitted, *, minutes: float, rows: int, tag: str) -> ev.BatchCommitted:
    """The batch's commit reported once more (a replay finding it committed, a retry),
    ``minutes`` from the first report, saying ``rows``."""
    return event.model_copy(
        update={
            "id": ev.event_id(event.run_id, "committed-again", event.batch_id, tag),
            "time": event.time + timedelta(minutes=minutes),
            "rows": rows,
        }
    )


def test_a_commit_reported_earlier_moves_the_batch_to_its_hour(engine: Engine) -> None:
    first = f.committed("r", 0, 65 * 60, ["r/s0"], 10, dead_lettered=2,
                        dead_letter_table="p.ds.dlq", dead_letter_streams=["r/d0"])  # fmt: skip
    second = f.committed("r", 1, 70 * 60, ["r/s1"], 20)
    ingest_events(engine, [f.started("r", "a1", 0), first, second])
    assert (
        _stored(engine)
        == {
            ("r", f.T0 + HOUR, f.TABLE): (2, 30, 2, f.at(70 * 60)),
        }
        == _from_batches(engine)
    )

    # The second batch's first commit was at 12:55 (its report came last), of 25 rows.
    ingest_events(engine, [_again(second, minutes=-15, rows=25, tag="early")])
    assert (
        _stored(engine)
        == {
            ("r", f.T0, f.TABLE): (1, 25, 0, f.at(55 * 60)),
            ("r", f.T0 + HOUR, f.TABLE): (1, 10, 2, f.at(65 * 60)),  # its latest recomputed
        }
        == _from_batches(engine)
    )

    # A later report changes nothing; an earlier one for the first empties 13:00.
    ingest_events(engine, [_again(first, minutes=30, rows=99, tag="late"),
                           _again(first, minutes=-20, rows=10, tag="early")])  # fmt: skip
    assert (
        _stored(engine)
        == {
            ("r", f.T0, f.TABLE): (2, 35, 2, f.at(55 * 60)),
        }
        == _from_batches(engine)
    )


def test_any_order_of_reports_gives_what_the_batches_say(engine: Engine) -> None:
    rng = random.Random(30)
    start = datetime(2026, 11, 1, 12, 40, tzinfo=UTC)  # the runs' commits span two hours
    events: list[ev.Event] = run_events(0, start) + run_events(FAIL_AT, start)
    commits = [e for e in events if isinstance(e, ev.BatchCommitted)]
    for n, commit in enumerate(commits):  # each commit reported again, some earlier
        events.append(_again(commit, minutes=rng.uniform(-90, 90), rows=commit.rows + n, tag="x"))
    for seed in (1, 2):
        with Session(engine) as session:  # start again from nothing stored
            for table in (Event, CommitHour, Batch):
                session.execute(delete(table))
            session.commit()
        shuffled = random.Random(seed).sample(events, len(events))
        while shuffled:
            size = rng.randint(1, 80)
            ingest_events(engine, shuffled[:size])
            del shuffled[:size]
        stored = _stored(engine)
        assert len({hour for _, hour, _ in stored}) >= 2, "the test should cross an hour"
        assert stored == _from_batches(engine), seed
