"""The control-plane bench's events: runs as real jobs send them, made in bounded memory.

About 2,000 events a run (``run_started``, four micro-batches of four pending streams,
each ``stream_created``, ~120 appends acknowledged, some ``append_already_exists``, a
few ``append_error`` UNAVAILABLE, ``stream_finalized``, then ``batch_intent`` and
``batch_committed``; heartbeats every 30 s; ``run_finished``, or ``run_failed`` for one
run in 25), each run ~16 minutes long, one starting every 30 s over the hours before
now, across eight tables, built with the shared schema (:mod:`onceover.events`).

A :class:`Workload` of N events is the runs in order, the last one cut at N. The oldest
``fill_events`` are stored in-process (:meth:`Workload.fill_batches` makes them again,
run by run, so 10,000,000 need no more memory than one batch); the newest are encoded
as ``POST /api/events`` bodies, one run at a time to each client. Where the line falls
is found by counting each run's events first: a run's random draws are its own
(seeded by its number), so counting it without making its events costs little.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from onceover_jobs.outbox import CONTROL_PLANE, serialise

from onceover import events as ev

PROJECT = "bench-project"
TABLES = tuple(f"{PROJECT}.sales.orders_{n}" for n in range(8))
BATCHES = 4
STREAMS = 4
APPENDS = 120
APPEND_EVERY_S = 2.0
HEARTBEAT_EVERY_S = 30.0
RUN_EVERY_S = 30.0
"""Seconds between two runs' starts, unless the bench is told otherwise: about
5,800,000 events a day, so a day holds every size up to that."""
ROWS_PER_APPEND = 5_000
BYTES_PER_ROW = 120
ALREADY_EXISTS_SHARE = 0.03
UNAVAILABLE_SHARE = 0.005
FAIL_EVERY = 25  # run i with i % FAIL_EVERY == FAIL_AT fails in its third batch
FAIL_AT = 7
BATCH_S = APPENDS * APPEND_EVERY_S + 10  # seconds of one micro-batch
RUN_S = 5 + BATCHES * BATCH_S  # seconds from a run's start to its end
TYPICAL_BATCH = 1
"""The batch of the typical run whose receipts the reads ask for."""


class _Run:
    """The events of one run (one attempt) as its job would send them; with ``count``,
    only how many (the same random draws, no event made)."""

    def __init__(self, index: int, start: datetime, *, count: bool = False) -> None:
        self.index = index
        self.start = start
        self.run_id = run_id(index)
        self.table = TABLES[index % len(TABLES)]
        self.query_id = f"q-{index:06d}"
        self.attempt = "a1"
        self.rng = random.Random(index)  # noqa: S311 - reproducible noise, not crypto
        self.fails = index % FAIL_EVERY == FAIL_AT
        self.counting = count
        self.events: list[ev.Event] = []
        self.counted = 0

    def add(self, kind: type[ev.Event], name: str, seconds: float, *facts: object,
            **fields: Any) -> None:  # fmt: skip
        """One event of ``kind``; ``name`` and ``facts`` make its id."""
        if self.counting:
            self.counted += 1
            return
        self.events.append(kind(
            id=ev.event_id(self.run_id, name, *facts),
            time=self.start + timedelta(seconds=seconds),
            run_id=self.run_id,
            table=self.table,
            job=f"orders_{self.index % len(TABLES)}",
            **fields,
        ))  # fmt: skip

    def stream(self, batch: int, partition: int, begin: float, appends: int) -> int:
        """One executor's stream: created, appended to, finalized unless cut short;
        returns the rows appended."""
        name = f"{self.run_id}/b{batch}/p{partition}"
        fields: dict[str, Any] = {
            "mode": "pending", "query_id": self.query_id, "batch_id": batch,
            "partition": partition, "attempt": 0, "stream": name, "stream_type": "PENDING",
        }  # fmt: skip
        self.add(ev.StreamCreated, "created", begin + partition * 0.1, name, **fields)
        offset = 0
        t = begin
        for number in range(appends):
            t = begin + 1 + number * APPEND_EVERY_S + partition * 0.1
            if self.rng.random() < UNAVAILABLE_SHARE:
                self.add(ev.AppendError, "error", t, name, offset, "UNAVAILABLE",
                         code="UNAVAILABLE", offset=offset, rows=ROWS_PER_APPEND, retrying=True,
                         message="the service is currently unavailable", **fields)  # fmt: skip
                t += 0.5
            latency = round(self.rng.uniform(20, 150), 1)
            self.add(ev.AppendAcknowledged, "acked", t, name, offset, offset=offset,
                     rows=ROWS_PER_APPEND, bytes=ROWS_PER_APPEND * BYTES_PER_ROW,
                     latency_ms=latency, **fields)  # fmt: skip
            if self.rng.random() < ALREADY_EXISTS_SHARE:  # a retry after a lost acknowledgement
                self.add(ev.AppendAlreadyExists, "exists", t + 0.3, name, offset,
                         offset=offset, rows=ROWS_PER_APPEND, **fields)  # fmt: skip
            offset += ROWS_PER_APPEND
        if appends < APPENDS:  # the task dies: its job fails
            if partition == 0:
                self.add(ev.AppendError, "error", t + 1, name, offset, "INTERNAL",
                         code="INTERNAL", offset=offset, rows=ROWS_PER_APPEND, retrying=False,
                         message="internal error", **fields)  # fmt: skip
            return offset
        self.add(ev.StreamFinalized, "final", begin + BATCH_S - 8, name, row_count=offset,
                 **fields)  # fmt: skip
        return offset

    def batch(self, batch: int, end: float, streams: list[ev.StreamRows]) -> None:
        rows = sum(s.rows for s in streams)
        fields: dict[str, Any] = {"mode": "pending", "query_id": self.query_id, "batch_id": batch}
        self.add(ev.BatchIntent, "intent", end - 5, batch, streams=streams, expected_rows=rows,
                 **fields)  # fmt: skip
        duration = round(self.rng.uniform(200, 2000), 1)
        self.add(ev.BatchCommitted, "committed", end - 3, batch, streams=streams, rows=rows,
                 duration_ms=duration, **fields)  # fmt: skip

    def build(self) -> list[ev.Event]:
        """The run's events by time: started, four batches (or a failure), heartbeats, end."""
        attempt = self.attempt
        spec = ev.JobSpec(
            module="onceover_jobs.load_files", args=["--table", self.table], checkpoint="/c"
        )
        self.add(ev.RunStarted, "started", 0, attempt, attempt_id=attempt, mode="pending",
                 spec=spec, query_id=self.query_id)  # fmt: skip
        commits: list[tuple[float, int]] = []  # (when, rows) of each committed batch
        end = 0.0
        for batch in range(BATCHES):
            begin = 5 + batch * BATCH_S
            failing = self.fails and batch == 2
            appends = APPENDS // 2 if failing else APPENDS
            streams = []
            for partition in range(STREAMS):
                rows = self.stream(batch, partition, begin, appends)
                streams.append(ev.StreamRows(
                    stream=f"{self.run_id}/b{batch}/p{partition}", rows=rows,
                    bytes=rows * BYTES_PER_ROW, partition=partition, attempt=0,
                ))  # fmt: skip
            if failing:
                end = begin + appends * APPEND_EVERY_S + 5
                break
            end = begin + BATCH_S
            self.batch(batch, end, streams)
            commits.append((end - 3, sum(s.rows for s in streams)))
        beat = 1
        while beat * HEARTBEAT_EVERY_S < end:
            t = beat * HEARTBEAT_EVERY_S
            done = [rows for when, rows in commits if when <= t]
            self.add(ev.RunHeartbeat, "beat", t, attempt, beat, attempt_id=attempt,
                     rows_committed=sum(done), batches_committed=len(done))  # fmt: skip
            beat += 1
        total = sum(rows for _, rows in commits)
        if self.fails:
            error = "Job aborted: append failed with INTERNAL on stream p0 of batch 2"
            self.add(ev.RunFailed, "failed", end, attempt, attempt_id=attempt,
                     rows_committed=total, error=error)  # fmt: skip
        else:
            self.add(ev.RunFinished, "finished", end, attempt, attempt_id=attempt,
                     rows_committed=total, batches_committed=len(commits))  # fmt: skip
        return sorted(self.events, key=lambda e: e.time)


def run_id(index: int) -> str:
    return f"bench-{index:06d}"


def run_events(index: int, start: datetime) -> list[ev.Event]:
    """The events of run ``index``, started at ``start``, by time."""
    return _Run(index, start).build()


def run_size(index: int) -> int:
    """How many events run ``index`` has (its start does not change it)."""
    run = _Run(index, datetime(2026, 1, 1, tzinfo=UTC), count=True)
    run.build()
    return run.counted


def encode(events: list[ev.Event]) -> bytes:
    """The body the sink's emitter posts for ``events``: compact JSON, as it sends it."""
    return CONTROL_PLANE.body([serialise(event) for event in events])


@dataclass
class Workload:
    """``events`` events in ``runs`` runs: the oldest ``fill_events`` made again by
    :meth:`fill_batches`, the newest as ``clients[c]``, the bodies client ``c`` posts
    (``(events, body)``), dealt out one run at a time."""

    events: int
    runs: int
    fill_events: int
    first_start: datetime
    run_every_s: float = RUN_EVERY_S
    clients: list[list[tuple[int, bytes]]] = field(default_factory=list)
    typical_run: str = ""
    first: datetime | None = None
    last: datetime | None = None

    @property
    def http_events(self) -> int:
        return self.events - self.fill_events

    def start_of(self, index: int) -> datetime:
        return self.first_start + timedelta(seconds=index * self.run_every_s)

    def fill_batches(self, batch: int) -> Iterator[list[ev.Event]]:
        """The oldest ``fill_events`` events, run by run, ``batch`` at a time (the last
        batch may be short); made anew at each call, never all held at once."""
        pending: list[ev.Event] = []
        left = self.fill_events
        index = 0
        while left > 0:
            events = run_events(index, self.start_of(index))[:left]
            left -= len(events)
            pending.extend(events)
            while len(pending) >= batch:
                yield pending[:batch]
                del pending[:batch]
            index += 1
        if pending:
            yield pending


def build_workload(
    total: int,
    http_events: int,
    clients: int,
    batch: int,
    *,
    run_every_s: float = RUN_EVERY_S,
    on_run: Callable[[int], None] | None = None,
) -> Workload:
    """Runs of ~2,000 events until ``total`` (the last run cut short: still running),
    one starting every ``run_every_s`` seconds, the newest ``http_events`` encoded,
    ``batch`` events a POST. ``on_run(index)`` is called for each run counted (progress)."""
    sizes = [run_size(n) for n in range(FAIL_EVERY)]
    runs = math.ceil(total / (sum(sizes) / len(sizes)))  # about; counting makes it exact
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    # The last run ends about ten minutes ago; the first starts hours earlier.
    first_start = now - timedelta(seconds=(runs - 1) * run_every_s + RUN_S + 600)
    fill_events = total - http_events
    work = Workload(events=total, runs=0, fill_events=fill_events, first_start=first_start,
                    run_every_s=run_every_s)  # fmt: skip
    work.clients = [[] for _ in range(clients)]
    # Mid-aged and whole (not the last run, cut short), succeeded: what the reads ask about.
    typical = max(0, min(runs // 2, runs - 2))
    typical += 1 if typical % FAIL_EVERY == FAIL_AT else 0
    unsent: list[list[ev.Event]] = [[] for _ in range(clients)]
    produced = 0
    http_runs = 0
    index = 0
    while produced < total:
        size = min(run_size(index), total - produced)
        if index == typical or not work.typical_run:
            work.typical_run = run_id(index)
        to_fill = max(0, min(size, fill_events - produced))
        if to_fill < size:  # some or all of it is posted
            events = run_events(index, work.start_of(index))[:size]
            client = http_runs % clients
            http_runs += 1
            unsent[client].extend(events[to_fill:])
            while len(unsent[client]) >= batch:
                work.clients[client].append((batch, encode(unsent[client][:batch])))
                del unsent[client][:batch]
            work.last = max(work.last or events[-1].time, events[-1].time)
        produced += size
        if on_run is not None:
            on_run(index)
        index += 1
    work.runs = index
    work.first = work.start_of(0)
    if work.last is None:  # all filled: the last run's end, as its events say
        work.last = run_events(index - 1, work.start_of(index - 1))[:size][-1].time
    for client, rest in enumerate(unsent):
        if rest:
            work.clients[client].append((len(rest), encode(rest)))
    return work
