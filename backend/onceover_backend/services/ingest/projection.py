"""From events to state: how each event moves a run, its attempts, batches and streams.

Events arrive late, twice, and out of order (executors and the driver emit on their
own threads, emitters spool and retry). So every update here is order-independent:

* states only move up a rank (a late ``stream_created`` never undoes ``committed``);
* times keep the earliest start and the latest end, whatever came first;
* counters add up events, and each event is applied once (new ids only);
* a run's status is its latest attempt's status, recomputed after every batch, so an
  old attempt's late ``run_failed`` cannot fail a run a newer attempt finished.

:class:`Projector` applies one ingest's events: runs and attempts here, batches in
:mod:`.batches`, streams in :mod:`.streams`; what it adds up before writing each row
once is in :mod:`.tallies` and :mod:`.rollups`. Everything happens in the ingest
transaction (:mod:`.transaction`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import bindparam, func
from sqlmodel import Session, col, select

from onceover import events as ev
from onceover_backend.services.ingest import rollups
from onceover_backend.services.ingest.batches import BatchProjection
from onceover_backend.services.ingest.rejections import merge_rejections
from onceover_backend.services.ingest.rollups import Rollups
from onceover_backend.services.ingest.streams import StreamProjection, count_append
from onceover_backend.services.ingest.tallies import RunTally
from onceover_backend.services.ingest.times import in_utc, later
from onceover_backend.services.launch import specs
from onceover_backend.tables import Attempt, Batch, Run

TERMINAL_ATTEMPT = frozenset({"succeeded", "failed", "refused"})
"""``refused``: a second driver turned away while another ran the run (it wrote nothing)."""


def is_complete(run: Run) -> bool:
    """The run succeeded and every row its job reports committed has been heard of.

    Run events come from the job and batch events from the sink, in different processes
    with emitters of their own, so a spooled ``batch_committed`` can arrive after
    ``run_finished``; a check made before it would report rows missing that are not.
    """
    return run.status == "succeeded" and (
        run.rows_reported is None or run.rows_committed >= run.rows_reported
    )


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
    _run_tallies: dict[str, RunTally] = field(default_factory=dict)
    _rollups: Rollups = field(default_factory=dict)
    _streams: StreamProjection = field(init=False)
    _batches: BatchProjection = field(init=False)
    _heard_later: set[str] = field(default_factory=set)
    # What moved in this batch, per run (see _recompute).
    _new: set[str] = field(default_factory=set)
    _attempts_moved: set[str] = field(default_factory=set)
    _batched: set[str] = field(default_factory=set)
    _reported: dict[str, int] = field(default_factory=dict)
    _next_number: dict[str, int] = field(default_factory=dict)
    _complete_before: dict[str, bool] = field(default_factory=dict)
    succeeded: set[str] = field(default_factory=set)
    """Runs these events made complete (reconciled automatically once stored)."""

    def __post_init__(self) -> None:
        self._streams = StreamProjection(self.session, self._rollups)
        self._batches = BatchProjection(self.session, self._streams)

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
        """Load every stored stream these events name (:meth:`StreamProjection.load`)."""
        self._streams.load(events)

    def apply(self, events: Sequence[ev.Event], times: Sequence[datetime] | None = None) -> None:
        """Apply ``events`` (new ones only: each is counted), in the order they happened;
        ``times`` are their times in UTC (:func:`in_utc`) if the caller has them."""
        if times is None:
            times = [in_utc(event.time) for event in events]
        counted = self._rollups
        tallies = self._streams.tallies
        # Everything this session added is held here (runs, attempts) or by the batch
        # and stream projections, so lookups need not flush pending changes first (each
        # would flush every new stream; docs/journal/profiling.md).
        with self.session.no_autoflush:
            for index in sorted(range(len(events)), key=times.__getitem__):
                event = events[index]
                time = times[index]
                if isinstance(event, ev.AppendAcknowledged | ev.AppendAlreadyExists):
                    tally = tallies.get((event.run_id, event.stream))
                    if (
                        tally is not None
                        and tally.appending
                        and (event.job is None or tally.run.has_job)
                    ):
                        # Nine events in ten: an append's answer on a stream this batch
                        # already found appending. Times, counters and its rollup, nothing
                        # to decide, no SQLModel row touched (see RunTally).
                        tally.note(time)
                        tally.run.note(time)
                        count_append(tally, event, time, counted)
                        continue
                self._apply(event, time)

    def _apply(self, event: ev.Event, time: datetime) -> None:
        """``time``: the event's, in UTC (:func:`in_utc`)."""
        run = self._run(event, time)
        run_tally = self._run_tallies.get(run.run_id)
        if run_tally is None:
            run_tally = self._run_tallies[run.run_id] = RunTally(time, time, run)
        else:
            run_tally.note(time)
        run_tally.has_job = run.job is not None
        if isinstance(event, ev.RunEvent):
            self._apply_run_event(run, event, time)
            return
        # Only assigned when they change: see RunTally.
        if run.mode is None:
            run.mode = event.mode
        if isinstance(event, ev.BatchEvent):
            self._batched.add(run.run_id)
            if event.key and event.key != run.key_column:
                run.key_column = event.key
            self._batches.apply(event, time)
        else:
            self._streams.apply(event, time, run_tally)
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
        for run_id, requests in self._streams.rejected_requests.items():
            run = self.runs[run_id]
            run.rejected_requests += requests
            if samples := self._streams.rejected.get(run_id):
                run.rejections = merge_rejections(run.rejections or [], samples)
        rollups.count_retry_codes(self.runs, self._rollups)
        # Two flushes here, each run updated once in each (a query while the events
        # were applied may have flushed a run's start before): this one (new runs,
        # attempts and batches, what the events added up), which the streams' rows (a
        # run's) and the recomputing's queries (attempts, batches) need stored; and the
        # last (what the recomputing decided). A query flushes whatever is pending: the
        # runs' counts were updated three or four times a transaction when the streams
        # were written and the runs recomputed between flushes (docs/journal/profiling.md).
        self.session.flush()
        self._streams.write()
        with self.session.no_autoflush:
            for run in self.runs.values():
                self._recompute(run)
                run.updated_at = self.received_at
                if is_complete(run) and not self._complete_before.get(run.run_id, False):
                    self.succeeded.add(run.run_id)
        rollups.upsert(self.session.connection(), self._rollups)
        self._batches.write(self.session.connection())
        self.session.flush()

    def _recompute(self, run: Run) -> None:
        """Recompute what the run's attempts and batches decide, where they may have
        moved: its status from its attempts when one started, ended or appeared (or a
        stalled run was heard from again), its totals from its batches when one moved.
        A heartbeat only raises the rows reported; stream events move neither. (Three
        queries a run per batch, each batch, were dear: docs/journal/profiling.md.) A run locked
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
        attempt.last_event_at = later(attempt.last_event_at, time)
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
            attempt.last_heartbeat_at = later(attempt.last_heartbeat_at, time)
            run.last_heartbeat_at = later(run.last_heartbeat_at, time)
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
