"""From events to state: how each event moves a run, its attempts, batches and streams.

Events arrive late, twice, and out of order (executors and the driver emit on their
own threads, emitters spool and retry). So every update here is order-independent:

* states only move up a rank (a late ``stream_created`` never undoes ``committed``);
* times keep the earliest start and the latest end, whatever came first;
* counters add up events, and each event is applied once (new ids only);
* a run's status is its latest attempt's status, recomputed after every batch, so an
  old attempt's late ``run_failed`` cannot fail a run a newer attempt finished.

Everything happens in the ingest transaction (:mod:`onceover_backend.services.ingest.transaction`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import bindparam, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from onceover import events as ev
from onceover_backend.services.ingest import stream_rows
from onceover_backend.services.ingest.commit_hours import CommitHours
from onceover_backend.services.ingest.stream_rows import StreamRow
from onceover_backend.services.launch import specs
from onceover_backend.tables import Attempt, Batch, HourRollup, Run, WriteRollup

BATCH_RANK = {"intent": 0, "aborted": 1, "skipped_duplicate": 2, "committed": 3}
STREAM_RANK = {"created": 0, "appending": 1, "finalized": 2, "orphaned": 3, "committed": 4}
TERMINAL_ATTEMPT = frozenset({"succeeded", "failed", "refused"})
"""``refused``: a second driver turned away while another ran the run (it wrote nothing)."""
STREAM_TYPE_OF_MODE: dict[ev.Mode, ev.StreamType] = {
    "pending": "PENDING",
    "buffered": "BUFFERED",
    "committed": "COMMITTED",
    "default": "DEFAULT",
}
"""The type of a stream first heard of in a ``batch_committed`` (its executor's events
late or lost): the one its mode writes on (onceover/events.py)."""


def _later(current: datetime | None, new: datetime) -> datetime:
    return new if current is None or new > current else current


def _earlier(current: datetime | None, new: datetime) -> datetime:
    return new if current is None or new < current else current


def is_complete(run: Run) -> bool:
    """The run succeeded and every row its job reports committed has been heard of.

    Run events come from the job and batch events from the sink, in different processes
    with emitters of their own, so a spooled ``batch_committed`` can arrive after
    ``run_finished``; a check made before it would report rows missing that are not.
    """
    return run.status == "succeeded" and (
        run.rows_reported is None or run.rows_committed >= run.rows_reported
    )


def _batch_key(batch_id: int | None, write: str | None) -> str:
    """One row per write: a foreachBatch call (or a batch run) may write one table more
    than once, and each write commits (or not) on its own."""
    batch = "-" if batch_id is None else str(batch_id)
    return batch if write is None else f"{batch}/{write}"


@dataclass
class _Rollup:
    requests: int = 0
    rows: int = 0
    bytes: int = 0


@dataclass
class _Span:
    """The first and last time of one row's events in this batch."""

    first: datetime
    last: datetime

    def note(self, time: datetime) -> None:
        if time < self.first:
            self.first = time
        elif time > self.last:
            self.last = time


@dataclass
class _RunTally(_Span):
    """The times of one run's events in this batch, in plain Python; written to its row
    once, in :meth:`Projector.finish`. Setting an attribute of a SQLModel row goes through
    SQLAlchemy's instrumentation and then pydantic's ``__setattr__`` (several µs); done per
    event, that was over half of ingest (docs/profiling.md)."""

    run: Run
    has_job: bool = False
    """The run's job is known: a later event's ``job`` has nothing to add."""

    def write(self) -> bool:
        """Write the times; whether an event came after the last one heard before."""
        run = self.run
        heard_later = run.last_event_at is not None and self.last > run.last_event_at
        if run.last_event_at is None or heard_later:
            run.last_event_at = self.last
        run.started_at = min(run.started_at, self.first)
        return heard_later


@dataclass
class _StreamTally(_Span):
    """What one stream's append outcomes add up to in this batch (counters, the highest
    offset, first and last times); written to its row once, like :class:`_RunTally`."""

    stream: StreamRow
    run: _RunTally
    appending: bool = False
    """The stream's state is at least ``appending``: append outcomes take the fast path."""
    appends: int = 0
    rows: int = 0
    bytes: int = 0
    already_exists: int = 0
    out_of_range: int = 0
    errors: int = 0
    next_offset: int | None = None
    _minute: datetime | None = None
    _minute_end: datetime | None = None

    def minute_of(self, time: datetime) -> datetime:
        """The minute ``time`` falls in; a stream's appends come seconds apart, so the
        last one's minute is kept (``replace`` costs more than two comparisons)."""
        if self._minute is None or not self._minute <= time < self._minute_end:  # type: ignore[operator]
            self._minute = _minute(time)
            self._minute_end = self._minute + timedelta(minutes=1)
        return self._minute

    def reach(self, offset: int) -> None:
        self.next_offset = offset if self.next_offset is None else max(self.next_offset, offset)

    def write(self) -> None:
        stream = self.stream
        stream.created_at = min(stream.created_at, self.first)
        stream.updated_at = max(stream.updated_at, self.last)
        for name in ("appends", "rows", "bytes", "already_exists", "out_of_range", "errors"):
            if added := getattr(self, name):
                setattr(stream, name, getattr(stream, name) + added)
        if self.next_offset is not None:
            reached = max(stream.next_offset or 0, self.next_offset)
            if reached != stream.next_offset:
                stream.next_offset = reached


REJECTIONS_KEPT = 20
"""Rows a run's page shows of those BigQuery refused: the newest, each row once."""


def _rejections(event: ev.RowsRejected) -> list[dict[str, Any]]:
    """The samples of a ``rows_rejected`` event as a run keeps them (JSON)."""
    where = {
        "time": event.time.astimezone(UTC).isoformat(), "table": event.table,
        "query_id": event.query_id, "batch_id": event.batch_id, "write": event.write,
        "partition": event.partition, "attempt": event.attempt, "stream": event.stream,
        "dead_letter_table": event.dead_letter_table,
    }  # fmt: skip
    return [{**where, **sample.model_dump(mode="json")} for sample in event.samples]


def _rejection_key(sample: dict[str, Any]) -> tuple[Any, ...]:
    """One row of a write: a retried task names the same rows again."""
    return tuple(
        sample.get(name)
        for name in ("table", "query_id", "batch_id", "write", "partition", "offset", "column")
    )


def merge_rejections(kept: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest :data:`REJECTIONS_KEPT` of ``kept`` and ``new``, newest first, each row
    once (its latest report)."""
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for sample in sorted([*kept, *new], key=lambda s: s["time"], reverse=True):
        newest.setdefault(_rejection_key(sample), sample)
    return list(newest.values())[:REJECTIONS_KEPT]


RollupKey = tuple[str, datetime, str, str, str]  # run, minute, table, stream type, code


def _minute(time: datetime) -> datetime:
    return time.replace(second=0, microsecond=0)


def _count(rollups: dict[RollupKey, _Rollup], key: RollupKey, rows: int, size: int) -> None:
    """One append request, in its rollup."""
    rollup = rollups.get(key)
    if rollup is None:
        rollup = rollups[key] = _Rollup()
    rollup.requests += 1
    rollup.rows += rows
    rollup.bytes += size


def _rollup_key(event: ev.StreamEvent, minute: datetime, code: str) -> RollupKey:
    return (event.run_id, minute, event.table, event.stream_type, code)


def _count_append(
    tally: _StreamTally,
    event: ev.AppendAcknowledged | ev.AppendAlreadyExists,
    time: datetime,
    rollups: dict[RollupKey, _Rollup],
) -> None:
    rows = event.rows
    minute = tally.minute_of(time)
    if type(event) is ev.AppendAcknowledged:
        tally.appends += 1
        tally.rows += rows
        tally.bytes += event.bytes
        if event.offset is not None:
            tally.reach(event.offset + rows)
        _count(rollups, _rollup_key(event, minute, "OK"), rows, event.bytes)
    else:
        tally.already_exists += 1
        tally.reach(event.offset + rows)  # type: ignore[operator]  # never None here
        _count(rollups, _rollup_key(event, minute, "ALREADY_EXISTS"), rows, event.bytes)


def in_utc(time: datetime) -> datetime:
    """``time`` with the standard library's UTC as its zone. pydantic gives each parsed
    time a zone object of its own, and comparing or hashing two such times calls both
    zones' ``utcoffset``: sorting a batch by time took 7 µs an event, 0.3 µs in UTC
    (docs/profiling.md)."""
    return time.astimezone(UTC)


# Statements built once: building one costs about as much as running it (SQLAlchemy
# constructs, then looks up its compiled form by a key made from the whole statement).
_LOCK_RUNS = (
    select(Run)
    .where(col(Run.run_id).in_(bindparam("run_ids", expanding=True)))
    .order_by(col(Run.run_id))
    .with_for_update()
)
_COMMITTED = col(Batch.state) == "committed"
_TOTALS = select(
    func.count().filter(_COMMITTED),
    func.coalesce(func.sum(Batch.rows).filter(_COMMITTED), 0),
    func.coalesce(func.sum(Batch.dead_lettered_rows).filter(_COMMITTED), 0),
    func.coalesce(
        func.sum(func.coalesce(Batch.rows, Batch.expected_rows)).filter(
            col(Batch.state).in_(["intent", "committed"])
        ),
        0,
    ),
).where(col(Batch.run_id) == bindparam("run_id"))


@dataclass
class Projector:
    """Applies new events to the state tables of one session; ``finish()`` once at the end."""

    session: Session
    received_at: datetime
    runs: dict[str, Run] = field(default_factory=dict)
    _attempts: dict[tuple[str, str], Attempt] = field(default_factory=dict)
    _batches: dict[tuple[str, str, str, str], Batch] = field(default_factory=dict)
    _streams: dict[tuple[str, str], StreamRow] = field(default_factory=dict)
    _not_stored: set[tuple[str, str]] = field(default_factory=set)
    _run_tallies: dict[str, _RunTally] = field(default_factory=dict)
    _stream_tallies: dict[tuple[str, str], _StreamTally] = field(default_factory=dict)
    _rollups: dict[RollupKey, _Rollup] = field(default_factory=dict)
    _commit_hours: CommitHours = field(default_factory=CommitHours)
    _heard_later: set[str] = field(default_factory=set)
    # What moved in this batch, per run (see _recompute).
    _new: set[str] = field(default_factory=set)
    _attempts_moved: set[str] = field(default_factory=set)
    _batched: set[str] = field(default_factory=set)
    _reported: dict[str, int] = field(default_factory=dict)
    _next_number: dict[str, int] = field(default_factory=dict)
    _complete_before: dict[str, bool] = field(default_factory=dict)
    _rejected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _rejected_requests: dict[str, int] = field(default_factory=dict)
    succeeded: set[str] = field(default_factory=set)
    """Runs these events made complete (reconciled automatically once stored)."""

    def lock_runs(self, run_ids: Iterable[str]) -> None:
        """Load (and on PostgreSQL lock, in a fixed order) the runs this batch touches:
        concurrent ingests of one run then apply one after the other."""
        ordered = sorted(set(run_ids))
        if not ordered:
            return
        for run in self.session.exec(_LOCK_RUNS, params={"run_ids": ordered}):
            self.runs[run.run_id] = run
            self._complete_before[run.run_id] = is_complete(run)

    def load_streams(self, events: Iterable[ev.Event]) -> None:
        """Load every stored stream these events name, one query per run: a query per
        stream was 9% of ingest on PostgreSQL (a round trip each)."""
        names: dict[str, set[str]] = {}
        for event in events:
            if isinstance(event, ev.StreamEvent):
                names.setdefault(event.run_id, set()).add(event.stream)
            elif isinstance(event, ev.BatchCommitted):
                names.setdefault(event.run_id, set()).update(
                    s.stream for s in (*event.streams, *event.dead_letter_streams)
                )
            elif isinstance(event, ev.BatchSkippedDuplicate):
                names.setdefault(event.run_id, set()).update(event.orphaned_streams)
        for run_id, wanted in names.items():
            for stream in stream_rows.load(self.session, run_id, wanted):
                self._streams[(run_id, stream.name)] = stream
            self._not_stored.update(
                (run_id, name) for name in wanted if (run_id, name) not in self._streams
            )

    def apply(self, events: Sequence[ev.Event], times: Sequence[datetime] | None = None) -> None:
        """Apply ``events`` (new ones only: each is counted), in the order they happened;
        ``times`` are their times in UTC (:func:`in_utc`) if the caller has them."""
        if times is None:
            times = [in_utc(event.time) for event in events]
        rollups = self._rollups
        # Everything this session added is in the caches above, so lookups need not
        # flush pending changes first (a flush per new stream was 9-14% of ingest).
        with self.session.no_autoflush:
            for index in sorted(range(len(events)), key=times.__getitem__):
                event = events[index]
                time = times[index]
                if isinstance(event, ev.AppendAcknowledged | ev.AppendAlreadyExists):
                    tally = self._stream_tallies.get((event.run_id, event.stream))
                    if (
                        tally is not None
                        and tally.appending
                        and (event.job is None or tally.run.has_job)
                    ):
                        # Nine events in ten: an append's answer on a stream this batch
                        # already found appending. Times, counters and its rollup, nothing
                        # to decide, no SQLModel row touched (see _RunTally).
                        tally.note(time)
                        tally.run.note(time)
                        _count_append(tally, event, time, rollups)
                        continue
                self._apply(event, time)

    def _apply(self, event: ev.Event, time: datetime) -> None:
        """``time``: the event's, in UTC (:func:`in_utc`)."""
        run = self._run(event, time)
        run_tally = self._run_tallies.get(run.run_id)
        if run_tally is None:
            run_tally = self._run_tallies[run.run_id] = _RunTally(time, time, run)
        else:
            run_tally.note(time)
        run_tally.has_job = run.job is not None
        if isinstance(event, ev.RunEvent):
            self._apply_run_event(run, event, time)
            return
        # Only assigned when they change: see _RunTally.
        if run.mode is None:
            run.mode = event.mode
        if isinstance(event, ev.BatchEvent):
            self._batched.add(run.run_id)
            if event.key and event.key != run.key_column:
                run.key_column = event.key
            self._apply_batch_event(event, time)
        else:
            self._apply_stream_event(event, time)
        # Only these carry one (a missing attribute of a pydantic model is slow to ask for).
        if isinstance(event, ev.BatchIntent | ev.BatchCommitted | ev.RowsRejected):
            dead_letter_table = event.dead_letter_table
            if dead_letter_table is not None and dead_letter_table != run.dead_letter_table:
                run.dead_letter_table = dead_letter_table

    def finish(self) -> None:
        """Write the tallies, recompute each touched run from its attempts and batches,
        add up the rollups."""
        for run_tally in self._run_tallies.values():
            if run_tally.write():
                self._heard_later.add(run_tally.run.run_id)  # a stalled run is alive after all
        for run_id, requests in self._rejected_requests.items():
            run = self.runs[run_id]
            run.rejected_requests += requests
            if samples := self._rejected.get(run_id):
                run.rejections = merge_rejections(run.rejections or [], samples)
        self._count_retry_codes()
        # Two flushes here, each run updated once in each (a query while the events
        # were applied may have flushed a run's start before): this one (new runs,
        # attempts and batches, what the events added up), which the streams' rows (a
        # run's) and the recomputing's queries (attempts, batches) need stored; and the
        # last (what the recomputing decided). A query flushes whatever is pending: the
        # runs' counts were updated three or four times a transaction when the streams
        # were written and the runs recomputed between flushes (docs/profiling.md).
        self.session.flush()
        for stream_tally in self._stream_tallies.values():
            stream_tally.write()
        stream_rows.write(self.session, self._streams.values())
        with self.session.no_autoflush:
            for run in self.runs.values():
                self._recompute(run)
                run.updated_at = self.received_at
                if is_complete(run) and not self._complete_before.get(run.run_id, False):
                    self.succeeded.add(run.run_id)
        self._upsert_rollups()
        self._commit_hours.write(self.session.connection(), self._batches)
        self.session.flush()

    def _recompute(self, run: Run) -> None:
        """Recompute what the run's attempts and batches decide, where they may have
        moved: its status from its attempts when one started, ended or appeared (or a
        stalled run was heard from again), its totals from its batches when one moved.
        A heartbeat only raises the rows reported; stream events move neither. (Three
        queries a run per batch were a fifth of ingest, docs/profiling.md.) A run locked
        but sent nothing (a launch that ended, :mod:`onceover_backend.services.resume.resumer`)
        or first stored now is recomputed whole."""
        run_id = run.run_id
        whole = run_id not in self._run_tallies or run_id in self._new
        if (
            whole
            or run_id in self._attempts_moved
            or (run_id in self._heard_later and run.status == "stalled")
        ):
            self._recompute_status(run)
        elif (reported := self._reported.get(run_id)) is not None and (
            run.rows_reported is None or reported > run.rows_reported
        ):
            # Each attempt's count only rises, so the run's (their maximum) does too.
            run.rows_reported = reported
        if whole or run_id in self._batched:
            self._recompute_totals(run)

    # -- runs and attempts ----------------------------------------------------------

    def _run(self, event: ev.Event, time: datetime) -> Run:
        run = self.runs.get(event.run_id)
        if run is None:
            run = Run(
                run_id=event.run_id,
                job=event.job,
                table_id=event.table,
                status="running",
                started_at=time,
                rejections=[],  # not left to default factories: see _batch
                updated_at=self.received_at,
            )
            self.session.add(run)
            # Inserted now: without relationships the flush would not know that
            # attempts, batches and streams (foreign keys to it) must come after.
            self.session.flush()
            self.runs[event.run_id] = run
            self._new.add(event.run_id)
        if run.job is None and event.job is not None:
            run.job = event.job
        return run

    def _attempt(self, event: ev.RunEvent, time: datetime) -> Attempt:
        key = (event.run_id, event.attempt_id)
        attempt = self._attempts.get(key)
        if attempt is None:
            attempt = self.session.exec(
                select(Attempt).where(
                    Attempt.run_id == event.run_id, Attempt.attempt_id == event.attempt_id
                )
            ).first()
        if attempt is None:
            # Known before its run_started arrives: provisionally started at this event.
            attempt = Attempt(
                run_id=event.run_id,
                attempt_id=event.attempt_id,
                number=self._number(event.run_id),
                status="running",
                started_at=time,
                last_event_at=time,
            )
            self.session.add(attempt)
            self._attempts_moved.add(event.run_id)  # it may be the latest
        self._attempts[key] = attempt
        return attempt

    def _number(self, run_id: str) -> int:
        """The next attempt number of a run (its row is locked, so numbers never clash)."""
        if run_id not in self._next_number:
            highest = self.session.exec(
                select(func.max(Attempt.number)).where(Attempt.run_id == run_id)
            ).one()
            self._next_number[run_id] = int(highest or 0) + 1
        number = self._next_number[run_id]
        self._next_number[run_id] = number + 1
        return number

    def _apply_run_event(self, run: Run, event: ev.RunEvent, time: datetime) -> None:
        attempt = self._attempt(event, time)
        attempt.last_event_at = _later(attempt.last_event_at, time)
        if attempt.status == "resuming":  # a launched attempt's job has started reporting
            attempt.status = "running"
            self._attempts_moved.add(run.run_id)
        if not isinstance(event, ev.RunHeartbeat):
            self._attempts_moved.add(run.run_id)
        if isinstance(event, ev.RunStarted):
            attempt.started = True
            attempt.started_at = time
            if event.spec is not None:
                attempt.spec = event.spec.model_dump(mode="json")
                specs.pin(run, attempt.spec, attempt.attempt_id, self.received_at)
            run.mode = event.mode
        elif isinstance(event, ev.RunHeartbeat):
            attempt.last_heartbeat_at = _later(attempt.last_heartbeat_at, time)
            run.last_heartbeat_at = _later(run.last_heartbeat_at, time)
            attempt.rows_reported = max(attempt.rows_reported or 0, event.rows_committed)
            self._reported[run.run_id] = max(
                self._reported.get(run.run_id, 0), attempt.rows_reported
            )
        else:
            ended = "succeeded" if isinstance(event, ev.RunFinished) else "failed"
            if isinstance(event, ev.RunFailed) and event.refused:
                ended = "refused"
            # Of two endings for one attempt (never expected), the later one stands.
            if attempt.status not in TERMINAL_ATTEMPT or (
                attempt.finished_at is None or time >= attempt.finished_at
            ):
                attempt.status = ended
                attempt.finished_at = time
                attempt.error = event.error if isinstance(event, ev.RunFailed) else None
            if event.rows_committed is not None:
                attempt.rows_reported = max(attempt.rows_reported or 0, event.rows_committed)

    def _recompute_status(self, run: Run) -> None:
        attempts = list(self.session.exec(select(Attempt).where(Attempt.run_id == run.run_id)))
        if attempts:
            # A driver refused because another still ran the run says nothing about the
            # run: the one that holds it decides, unless no other attempt is known.
            deciding = [a for a in attempts if a.status != "refused"] or attempts
            latest = max(deciding, key=lambda a: (a.started_at, a.attempt_id))
            if latest.status == "stalled" and run.run_id in self._heard_later:
                latest.status = "running"
            run.current_attempt_id = latest.attempt_id
            run.status = "failed" if latest.status == "refused" else latest.status
            run.finished_at = latest.finished_at if latest.status in TERMINAL_ATTEMPT else None
            run.error = latest.error
            reported = [a.rows_reported for a in attempts if a.rows_reported is not None]
            run.rows_reported = max(reported) if reported else None

    def _recompute_totals(self, run: Run) -> None:
        totals = self.session.exec(_TOTALS, params={"run_id": run.run_id}).one()
        run.batches_committed, run.rows_committed = int(totals[0]), int(totals[1] or 0)
        # Like rows_committed: each batch once, from its first commit, however often it
        # was committed again, replayed or found committed (resolved).
        run.rows_dead_lettered = int(totals[2] or 0)
        run.rows_expected = int(totals[3] or 0)

    # -- batches --------------------------------------------------------------------

    def _batch(self, event: ev.BatchEvent) -> Batch:
        key = (event.run_id, event.table, event.query_id, _batch_key(event.batch_id, event.write))
        batch = self._batches.get(key)
        if batch is None:
            batch = self.session.exec(
                select(Batch).where(
                    Batch.run_id == key[0],
                    Batch.table_id == key[1],
                    Batch.query_id == key[2],
                    Batch.batch_key == key[3],
                )
            ).first()
        if batch is None:
            batch = Batch(
                run_id=event.run_id,
                table_id=event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                batch_key=key[3],
                write=event.write,
                mode=event.mode,
                state="intent",
                # Given, not left to their default_factory: pydantic inspects a factory's
                # signature at every call, 1 ms a Batch (docs/profiling.md).
                streams=[],
                dead_letter_streams=[],
            )
            self.session.add(batch)
        self._commit_hours.note(key, batch)
        self._batches[key] = batch
        return batch

    def _apply_batch_event(self, event: ev.BatchEvent, time: datetime) -> None:
        batch = self._batch(event)
        batch.stamped = batch.stamped or event.stamped
        if event.key and batch.key_column != event.key:
            batch.key_column = event.key
        if isinstance(event, ev.BatchIntent):
            if batch.intent_at is None or time >= batch.intent_at:
                batch.expected_rows = event.expected_rows
                if batch.state != "committed":
                    batch.streams = [s.model_dump(mode="json") for s in event.streams]
                    self._set_aside(batch, event)
            batch.intent_at = _earlier(batch.intent_at, time)
            state = "intent"
        elif isinstance(event, ev.BatchCommitted):
            self._apply_commit(batch, event, time)
            state = "committed"
        elif isinstance(event, ev.BatchSkippedDuplicate):
            batch.replays += 1
            batch.rows_rewritten += event.rows
            batch.skipped_at = _later(batch.skipped_at, time)
            for name in event.orphaned_streams:
                stream = self._streams.get((event.run_id, name)) or self._load_stream(
                    event.run_id, name
                )
                if stream is not None:
                    self._raise_stream(stream, "orphaned")
            state = "skipped_duplicate"
        else:
            batch.aborted_at = _later(batch.aborted_at, time)
            batch.abort_reason = event.reason
            state = "aborted"
        if BATCH_RANK[state] > BATCH_RANK[batch.state]:
            batch.state = state

    def _apply_commit(self, batch: Batch, event: ev.BatchCommitted, time: datetime) -> None:
        first = batch.committed_at is None or time < batch.committed_at
        if first:
            batch.rows = event.rows
            batch.streams = [s.model_dump(mode="json") for s in event.streams]
            batch.commit_ms = event.duration_ms
            self._set_aside(batch, event)
        self._receipt(batch, event, first=first)
        batch.committed_at = _earlier(batch.committed_at, time)
        batch.resolved = batch.resolved or event.resolved
        for rows in event.streams:
            self._stream_of_batch(event, rows, time).state = "committed"
        if event.dead_letter_table is not None:
            for rows in event.dead_letter_streams:
                self._stream_of_batch(
                    event, rows, time, event.dead_letter_table
                ).state = "committed"

    @staticmethod
    def _receipt(batch: Batch, event: ev.BatchCommitted, *, first: bool) -> None:
        """The batch's receipt (commit time, source offsets, key checksum and tally): the first
        commit's stands, whichever report arrives first; a later report (the batch
        committed again, found committed on replay) only fills what the first left null.
        Only assigned when it changes (see _RunTally)."""
        fields: dict[str, Any] = {
            "commit_time": event.commit_time,
            "source_offsets": event.source_offsets,
            "key_checksum": event.key_checksum,
            "key_buckets": (
                None if event.key_buckets is None else [list(b) for b in event.key_buckets]
            ),
        }
        for name, value in fields.items():
            if value is None:
                continue
            current = getattr(batch, name)
            if (first or current is None) and current != value:
                setattr(batch, name, value)

    @staticmethod
    def _set_aside(batch: Batch, event: ev.BatchIntent | ev.BatchCommitted) -> None:
        """What the batch set aside in its dead-letter table, as ``event`` says; only
        assigned when it changes (see _RunTally)."""
        if batch.dead_lettered_rows != event.dead_lettered_rows:
            batch.dead_lettered_rows = event.dead_lettered_rows
        if batch.dead_letter_table != event.dead_letter_table:
            batch.dead_letter_table = event.dead_letter_table
        streams = [s.model_dump(mode="json") for s in event.dead_letter_streams]
        if batch.dead_letter_streams != streams:
            batch.dead_letter_streams = streams

    # -- streams --------------------------------------------------------------------

    def _load_stream(self, run_id: str, name: str) -> StreamRow | None:
        if (run_id, name) in self._not_stored:
            return None
        found = stream_rows.load(self.session, run_id, [name])
        if not found:
            return None
        self._streams[(run_id, name)] = found[0]
        return found[0]

    def _stream_of_batch(
        self,
        event: ev.BatchCommitted,
        rows: ev.StreamRows,
        time: datetime,
        dead_letter_table: str | None = None,
    ) -> StreamRow:
        """A stream the batch committed: one of its table's, or with ``dead_letter_table``
        one of the PENDING streams holding the rows it set aside there."""
        stream = self._streams.get((event.run_id, rows.stream)) or self._load_stream(
            event.run_id, rows.stream
        )
        if stream is None:  # its executor's events have not arrived (or never will)
            stream = StreamRow(
                run_id=event.run_id,
                name=rows.stream,
                stream_type=(
                    "PENDING" if dead_letter_table is not None else STREAM_TYPE_OF_MODE[event.mode]
                ),
                table_id=dead_letter_table or event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                write=event.write,
                partition=rows.partition or 0,
                task_attempt=rows.attempt or 0,
                state="committed",
                created_at=time,
                updated_at=time,
            )
            self._streams[(event.run_id, rows.stream)] = stream
        if stream.row_count is None:
            stream.row_count = rows.rows
        return stream

    def _stream(self, event: ev.StreamEvent, time: datetime) -> StreamRow:
        stream = self._streams.get((event.run_id, event.stream)) or self._load_stream(
            event.run_id, event.stream
        )
        if stream is None:
            stream = StreamRow(
                run_id=event.run_id,
                name=event.stream,
                stream_type=event.stream_type,
                table_id=event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                write=event.write,
                partition=event.partition,
                task_attempt=event.attempt,
                state="created",
                created_at=time,
                updated_at=time,
            )
            self._streams[(event.run_id, event.stream)] = stream
        return stream

    def _tally(self, event: ev.StreamEvent, stream: StreamRow, time: datetime) -> _StreamTally:
        key = (event.run_id, event.stream)
        tally = self._stream_tallies.get(key)
        if tally is None:
            run = self._run_tallies[event.run_id]
            tally = self._stream_tallies[key] = _StreamTally(time, time, stream, run)
        else:
            tally.note(time)
        return tally

    @staticmethod
    def _raise_stream(stream: StreamRow, state: str) -> None:
        if STREAM_RANK[state] > STREAM_RANK[stream.state]:
            stream.state = state

    def _note_error(self, stream: StreamRow, time: datetime, text: str) -> None:
        if stream.last_error_at is None or time >= stream.last_error_at:
            stream.last_error = text
            stream.last_error_at = time

    def _apply_stream_event(self, event: ev.StreamEvent, time: datetime) -> None:
        stream = self._stream(event, time)
        tally = self._tally(event, stream, time)
        if isinstance(event, ev.StreamCreated):
            return
        if isinstance(event, ev.StreamFinalized):
            stream.row_count = event.row_count
            self._raise_stream(stream, "finalized")
            return
        if isinstance(event, ev.StreamOrphaned):
            self._raise_stream(stream, "orphaned")
            self._note_error(stream, time, f"orphaned: {event.reason}")
            return
        self._raise_stream(stream, "appending")
        tally.appending = True
        if isinstance(event, ev.RowsRejected):
            self._rows_rejected(stream, event, time)
            return
        if isinstance(event, ev.AppendAcknowledged | ev.AppendAlreadyExists):
            _count_append(tally, event, time, self._rollups)
        elif isinstance(event, ev.AppendOutOfRange):
            tally.out_of_range += 1
            self._note_error(
                stream,
                time,
                f"OUT_OF_RANGE at offset {event.offset}: {event.message}".rstrip(": "),
            )
            key = _rollup_key(event, _minute(time), "OUT_OF_RANGE")
            _count(self._rollups, key, event.rows, 0)
        else:
            tally.errors += 1
            where = f" at offset {event.offset}" if event.offset is not None else ""
            self._note_error(stream, time, f"{event.code}{where}: {event.message}".rstrip(": "))
            _count(self._rollups, _rollup_key(event, _minute(time), event.code), event.rows, 0)

    def _rows_rejected(self, stream: StreamRow, event: ev.RowsRejected, time: datetime) -> None:
        """BigQuery refused rows of a request. Counted per run and kept as samples, not
        in the rollups: the request is sent again without them (or the task fails, and
        its append_error is counted there)."""
        run_id = event.run_id
        self._rejected_requests[run_id] = self._rejected_requests.get(run_id, 0) + 1
        self._rejected.setdefault(run_id, []).extend(_rejections(event))
        where = (
            f"set aside in {event.dead_letter_table}"
            if event.dead_letter_table
            else "no dead-letter table: the task fails"
        )
        first = f": {event.samples[0].reason}" if event.samples else ""
        self._note_error(
            stream,
            time,
            f"{event.rows} row(s) rejected at offset {event.offset} ({where}){first}",
        )

    # -- rollups --------------------------------------------------------------------

    def _count_retry_codes(self) -> None:
        """Add this batch's ALREADY_EXISTS and OUT_OF_RANGE requests to their runs' counts."""
        for (run_id, _, _, _, code), counts in self._rollups.items():
            if code == "ALREADY_EXISTS":
                self.runs[run_id].already_exists_requests += counts.requests
            elif code == "OUT_OF_RANGE":
                self.runs[run_id].out_of_range_requests += counts.requests

    def _upsert_rollups(self) -> None:
        if not self._rollups:
            return
        rows = [
            {"run_id": run_id, "minute": minute, "table_id": table_id,
             "stream_type": stream_type, "code": code, "requests": counts.requests,
             "rows": counts.rows, "bytes": counts.bytes}
            for (run_id, minute, table_id, stream_type, code), counts in sorted(
                self._rollups.items(), key=lambda item: item[0]
            )
        ]  # fmt: skip
        hours: dict[tuple[str, datetime, str, str], int] = defaultdict(int)
        for (run_id, minute, table_id, _, code), counts in self._rollups.items():
            hours[(run_id, minute.replace(minute=0), table_id, code)] += counts.requests
        hour_rows = [
            {"run_id": run_id, "hour": hour, "table_id": table_id, "code": code,
             "requests": requests}
            for (run_id, hour, table_id, code), requests in sorted(hours.items())
        ]  # fmt: skip
        # Rows in key order (a fixed lock order on PostgreSQL), each key once, as ON
        # CONFLICT requires. One statement executed for every row: a multi-row VALUES
        # is compiled anew for each row count (5 ms a batch, docs/profiling.md). On the
        # session's connection: the ORM has nothing to add to a Core upsert, and nothing
        # to flush first (finish() has).
        connection = self.session.connection()
        dialect = connection.dialect.name
        connection.execute(_summing_upsert(dialect, WriteRollup), rows)
        connection.execute(_summing_upsert(dialect, HourRollup), hour_rows)


_SUMMED = {WriteRollup: ("requests", "rows", "bytes"), HourRollup: ("requests",)}
"""The counters of each rollup table; its other columns but the id are its key."""


@cache
def _summing_upsert(dialect: str, rollup: type[WriteRollup] | type[HourRollup]) -> Any:
    """A rollup table's upsert, adding each counter to the stored row of its key. Built
    once a dialect and table: building it (its ``excluded`` columns) and its cache key
    each batch was a fifth of a small batch's ingest (docs/profiling.md)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = rollup.__table__  # type: ignore[union-attr]
    counters = _SUMMED[rollup]
    base = insert(table)
    return base.on_conflict_do_update(
        index_elements=[c.name for c in table.columns if c.name != "id" and c.name not in counters],
        set_={name: table.c[name] + base.excluded[name] for name in counters},
    )
