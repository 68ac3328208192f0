"""Fault schedules: what one chaos run arms, drawn from a seed and replayable from JSON.

A schedule is everything that decides a run: the workload (what job runs), the data
(rows, files, batches, request size), the sink's mode, and the faults with the exact
hit, call or moment each one is armed for.

Workloads:

==================  ===============================================================
``load_files``      ``python -m onceover_jobs.load_files``: the streaming load Onceover ships
``foreach_batch``   ``onceover_jobs.examples.foreach_batch``: a user's foreachBatch, three
                    writes per micro-batch (two into the orders table, a summary row
                    into another) with no option but the table
``two_tables``      ``onceover_jobs.examples.daily_tables``: a user's batch job, one run id,
                    the orders in two writes after a ``repartition()``, a summary
                    into a second table
``racing_drivers``  ``onceover_jobs.load_files``, and a second driver on the same checkpoint
                    started ``racer_at_s`` seconds into each run (an orchestrator's
                    retry while the first still runs): refused while the first is
                    alive, or it takes over from one a fault killed
``cluster``         ``onceover_jobs.load_files`` submitted (``spark-submit``, client mode)
                    to a local standalone cluster of two workers, each in its own
                    working directory: a failed task is retried there, maybe on
                    the other worker (:mod:`onceover_tools.chaos.on_cluster`)
``bad_rows``        ``onceover_jobs.load_files --dead-letter T``: about 0.5 % of the rows
                    (:data:`BAD_FRACTION`, which ones drawn from the schedule:
                    :meth:`Schedule.bad_keys`) carry a currency too long for the
                    table's ``STRING(3)``; BigQuery refuses them, the sink sets
                    them aside in a dead-letter table and loads the rest
``overwrite``       ``onceover_jobs.examples.nightly_overwrite``: a user's nightly
                    ``mode("overwrite")`` of a table seeded with old rows, every one
                    of which must go; staged in pending mode, then swapped in by one
                    transaction, crashes drawn at each step (``overwrite.*``)
``overwrite_dynamic``  the same into a table partitioned by day, with
                    ``partitionOverwriteMode=dynamic``: the old rows of the day the
                    new ones fall in must go, those of another day must stay
``cdc``             ``onceover_jobs.examples.cdc_mirror``: a user's streaming change
                    data capture (``writeAtLeastOnce``, ``default`` mode only) of
                    ``rows`` inserts, updates and deletes of a key set into a keyed
                    table, which must end as the source's final state, key by key
                    (:mod:`onceover_tools.chaos.cdc`)
==================  ===============================================================

Each runs in a sink mode its job takes (:data:`WORKLOAD_MODES`): ``pending``,
``buffered`` (writeStream's default: a stream per partition kept from batch to batch,
flushed at each commit) and ``committed`` for every workload; ``default`` (the
at-least-once baseline) for ``load_files``, and for ``cdc`` alone (BigQuery applies
changes only on the ``_default`` stream: at least once on the wire, exactly once in
effect). A mode is armed only with the faults
its streams pass (:func:`kinds_for`): finalize and batch-commit points in pending
mode, flush points in buffered mode. ``bad_rows`` commits PENDING streams on its
dead-letter table in every mode, so it meets ``commit.after``, ``wire/uncommitted`` and
wire faults on FinalizeWriteStream and BatchCommitWriteStreams in buffered and
committed mode too, and ``finalize.after`` (a dead-letter stream is finalized).

Each keeps its ledger on a store (:data:`STORES`): ``posix``, this disk, where each
job keeps it by default (the load job in its checkpoint, the users' jobs in a
directory named by ``ledger`` or ``$ONCEOVER_LEDGER``); ``s3`` or ``gcs``, a bucket of
its own on the session's local S3 or Cloud Storage
(:mod:`onceover_tools.chaos.stores`), the checkpoint staying on this disk.

The same seed draws the same schedules; a schedule's JSON re-runs it
(``onceover chaos --replay FILE``). The store is drawn from a random stream of its
own (:func:`draw_stores`), so a seed arms the same faults, in the same workloads and
modes, as it did before schedules had a store.

Fault kinds, each a string in reports:

==============================  ======================================================
``failpoint/<point>/<action>``  a sink failpoint (``onceover_jobs.sink.failpoints``) armed for
                                its n-th hit, counted across every process and
                                restart of the run: ``crash``, ``error`` or ``drop``
``wire/<action>``               the fault proxy in front of the Storage Write API
                                (:mod:`onceover_tools.chaos.proxy`): ``unavailable``,
                                ``drop_response``, ``delay``, ``cut``, ``uncommitted``
                                (a commit answered with no commit time: not done),
                                ``late_duplicate`` (``cdc`` only: an append sent
                                again seconds later, after newer changes)
``spark/kill_task``             the Spark task sending the n-th append is killed
                                (SIGKILL) while its request is in flight
``backend/outage``              the control plane is killed some seconds into the
                                run and comes back a few seconds later
==============================  ======================================================
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from onceover_jobs.generate import bad_keys, file_bounds
from onceover_jobs.sink.failpoints import POINTS, Action
from onceover_jobs.sink.wire.requests import REQUEST_OVERHEAD_BYTES

from onceover.modes import EXACTLY_ONCE_MODES, ModeTraits, Publish, traits_of
from onceover.modes import MODES as SINK_MODES
from onceover_tools.chaos.proxy import APPEND_ROWS, BATCH_COMMIT, WireFault

WORKLOADS = (
    "load_files",
    "foreach_batch",
    "two_tables",
    "racing_drivers",
    "cluster",
    "bad_rows",
    "overwrite",
    "overwrite_dynamic",
    "cdc",
)
OVERWRITE_WORKLOADS = frozenset({"overwrite", "overwrite_dynamic"})
"""A user's nightly ``mode("overwrite")`` job (onceover_jobs.examples.nightly_overwrite):
the whole table replaced, or (dynamic) only the days its rows fall in."""
RACER_AT_S = (2.0, 20.0)
"""When the racing driver starts, drawn: from both planning at once to mid-run."""
MODES: tuple[str, ...] = SINK_MODES
"""The sink's modes. ``default`` is the at-least-once baseline: the harness is expected to
catch its duplicates."""
DEFAULT_MODES = EXACTLY_ONCE_MODES
WORKLOAD_MODES: dict[str, tuple[str, ...]] = {
    "load_files": MODES,
    # onceover_jobs.examples' --mode (parser_for) takes every exactly-once mode
    "foreach_batch": EXACTLY_ONCE_MODES,
    "two_tables": EXACTLY_ONCE_MODES,
    "racing_drivers": EXACTLY_ONCE_MODES,
    "cluster": EXACTLY_ONCE_MODES,
    "bad_rows": EXACTLY_ONCE_MODES,
    # an overwrite stages its rows in pending mode, its only one
    "overwrite": ("pending",),
    "overwrite_dynamic": ("pending",),
    # changes are applied only on the _default stream: writeAtLeastOnce, its only mode
    "cdc": ("default",),
}
"""The modes each workload's job takes; ``default`` is the load job's baseline and the
CDC job's only mode."""
OWN_MODE_ONLY = frozenset({"cdc"})
"""Workloads drawn in their one mode whatever ``--modes`` asks: ``cdc`` runs only on the
``_default`` stream (at least once on the wire), where BigQuery's change sequence numbers
make it exactly once in effect, so a session of the exactly-once modes draws it too."""
STORES = ("posix", "s3", "gcs")
"""Where a schedule's ledger is: this disk, or a bucket on a local stand-in."""
STORE_WEIGHTS = {"posix": 2, "s3": 1, "gcs": 1}
"""How often draws take each store: half the schedules on disk, a quarter in each bucket."""
SCHEMA_VERSION = 1
"""A schedule without ``store`` (written before it had one) is a ``posix`` one."""

ROWS = 3_000
FILES = 6
FILES_PER_BATCH = 2
REQUEST_MAX_BYTES = 10_000
"""Small requests (the sink's minimum), so a task sends several and a fault can land mid-stream."""
MAX_RESTARTS = 6
BYTES_PER_ROW = 58
"""Measured: one generated order event in Arrow IPC (``onceover_jobs.generate``), for
sizing draws."""
CDC_BYTES_PER_ROW = 100
"""What one generated change (``onceover_jobs.generate_changes``) takes of a request's room
as the sink cuts proto rows (its change type and derived sequence number with it), for
sizing ``cdc`` draws. Measured: 3,000 changes in 6 files at 10,000 bytes a request went
in 38 appends (about 80 a request, 6-7 a file)."""
BAD_FRACTION = 0.005
"""``bad_rows``: the share of the source's rows BigQuery refuses (15 of 3,000)."""

OVERWRITE_POINTS = frozenset(name for name in POINTS if name.startswith("overwrite."))
"""The steps of a ``mode("overwrite")`` write after its rows are staged: only the
overwrite workloads pass them (:func:`kinds_for`)."""
FAILPOINT_KINDS = tuple(
    f"failpoint/{name}/{action}"
    for name, point in POINTS.items()
    for action in Action
    if action is not Action.DROP or point.has_response
)
OVERWRITE_KINDS = frozenset(k for k in FAILPOINT_KINDS if k.split("/")[1] in OVERWRITE_POINTS)
"""The failpoint kinds only the overwrite workloads meet."""
WIRE_KINDS = (
    "wire/unavailable",
    "wire/drop_response",
    "wire/delay",
    "wire/cut",
    "wire/uncommitted",
    "wire/late_duplicate",
)
OTHER_KINDS = ("spark/kill_task", "backend/outage")
KINDS = FAILPOINT_KINDS + WIRE_KINDS + OTHER_KINDS

# What a mode's streams pass through follows from how the mode publishes a batch:
# streams committed with BatchCommitWriteStreams are finalized first, flushed streams are
# flushed, and streams visible as appended (committed, default) are neither. Only a mode
# that creates its streams calls CreateWriteStream (default writes on ``_default``).
_POINTS_OF_PUBLISH: dict[Publish, frozenset[str]] = {
    "batch_commit": frozenset({"finalize.after", "commit.before", "commit.after"}),
    "flush": frozenset({"flush.between", "flush.after"}),
    "none": frozenset(),
}
_UNARY_OF_PUBLISH: dict[Publish, tuple[str, ...]] = {
    "batch_commit": ("FinalizeWriteStream", "BatchCommitWriteStreams"),
    "flush": ("FlushRows",),
    "none": (),
}
_BATCH_COMMIT_WIRE = frozenset({"wire/uncommitted"})
"""Wire faults only a BatchCommitWriteStreams call meets (a commit with no commit time)."""
CDC_KINDS = frozenset({"wire/late_duplicate"})
"""Wire faults drawn for ``cdc`` only. A request applied again late (a zombie task's, a
front end's retry) is what reorders changes on ``_default``: the sink's sequence numbers
must make the late old change lose to the newer one. A stream with offsets answers it
ALREADY_EXISTS, and the baseline load duplicates under any re-send already: there it
would test nothing new (and would change those workloads' draws)."""
LATE_DUPLICATE_S = (4.0, 20.0)
"""How long after the original a ``late_duplicate`` copy is sent: past a micro-batch or
more, or (sent when the proxy stops) after the job ended."""
# bad_rows: each task with refused rows creates, fills and finalizes a PENDING stream on
# the dead-letter table (passing finalize.after), and the driver commits those with
# BatchCommitWriteStreams (passing commit.after, not commit.before) before it publishes
# the batch, in every mode.
_DEAD_LETTER_POINTS = frozenset({"finalize.after", "commit.after"})
_DEAD_LETTER_UNARY = ("FinalizeWriteStream", "BatchCommitWriteStreams")


def _sets_rows_aside(traits: ModeTraits, workload: str) -> bool:
    """Whether a run of ``workload`` writes dead-letter streams: ``bad_rows`` does, in the
    exactly-once modes it runs in (:data:`WORKLOAD_MODES`)."""
    return workload == "bad_rows" and traits.exactly_once


def _points_not_passed(traits: ModeTraits) -> frozenset[str]:
    """The failpoints of the ways of publishing other than the mode's own."""
    return frozenset().union(
        *(points for publish, points in _POINTS_OF_PUBLISH.items() if publish != traits.publish)
    )


def kinds_for(mode: str, workload: str = "load_files") -> tuple[str, ...]:
    """The fault kinds a run of ``workload`` in ``mode`` can meet."""
    traits = traits_of(mode)
    dead_letters = _sets_rows_aside(traits, workload)
    batch_commits = traits.publish == "batch_commit" or dead_letters
    not_passed = _points_not_passed(traits) - (_DEAD_LETTER_POINTS if dead_letters else frozenset())
    if workload not in OVERWRITE_WORKLOADS:
        not_passed |= OVERWRITE_POINTS
    return tuple(
        k
        for k in KINDS
        if (batch_commits or k not in _BATCH_COMMIT_WIRE)
        and (workload == "cdc" or k not in CDC_KINDS)
        and not (k.startswith("failpoint/") and k.split("/")[1] in not_passed)
    )


def unary_methods(mode: str, workload: str = "load_files") -> tuple[str, ...]:
    """The unary Storage Write calls a run of ``workload`` in ``mode`` makes."""
    traits = traits_of(mode)
    creates = ("CreateWriteStream",) if traits.creates_streams else ()
    own = (*creates, *_UNARY_OF_PUBLISH[traits.publish])
    if not _sets_rows_aside(traits, workload):
        return own
    return (*own, *(m for m in _DEAD_LETTER_UNARY if m not in own))


@dataclass(frozen=True)
class Fault:
    kind: str
    nth: int = 1
    """Failpoints: the hit; wire faults and task kills: the call or append message."""
    method: str | None = None
    """Wire faults: the Storage Write method."""
    delay_s: float = 0.0
    """``wire/delay``: how long the request is held."""
    at_s: float = 0.0
    """``backend/outage``: seconds after the run's first start."""
    for_s: float = 0.0
    """``backend/outage``: how long the control plane stays down."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.nth < 1:
            raise ValueError(f"{self.kind}: nth counts from 1")
        if self.kind.startswith("wire/") and self.method is None:
            raise ValueError(f"{self.kind}: a wire fault names its method")

    @property
    def describe(self) -> str:
        if self.kind == "backend/outage":
            return f"{self.kind} at {self.at_s:.1f} s for {self.for_s:.1f} s"
        if self.kind.startswith("wire/"):
            timed = self.kind in ("wire/delay", "wire/late_duplicate")
            extra = f" {self.delay_s:.2f} s" if timed else ""
            return f"{self.kind} {self.method} #{self.nth}{extra}"
        return f"{self.kind} #{self.nth}"

    def wire_fault(self) -> WireFault | None:
        """This fault as the proxy's plan entry (task kills are the proxy's too)."""
        if self.kind.startswith("wire/"):
            assert self.method is not None
            action: Any = self.kind.removeprefix("wire/")
            return WireFault(action, self.method, self.nth, self.delay_s)
        if self.kind == "spark/kill_task":
            return WireFault("kill", APPEND_ROWS, self.nth)
        return None


@dataclass(frozen=True)
class Schedule:
    seed: int
    index: int
    mode: str
    faults: tuple[Fault, ...]
    rows: int = ROWS
    files: int = FILES
    files_per_batch: int = FILES_PER_BATCH
    request_max_bytes: int = REQUEST_MAX_BYTES
    max_restarts: int = MAX_RESTARTS
    workload: str = "load_files"
    racer_at_s: float | None = None
    """``racing_drivers``: seconds after each run starts that a second driver starts."""
    store: str = "posix"
    """Where the ledger is (:data:`STORES`)."""
    version: int = field(default=SCHEMA_VERSION)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.workload not in WORKLOADS:
            raise ValueError(
                f"workload must be one of {', '.join(WORKLOADS)}, not {self.workload!r}"
            )
        if self.store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, not {self.store!r}")
        if self.mode not in (takes := WORKLOAD_MODES[self.workload]):
            modes = f"{', '.join(takes[:-1])} or {takes[-1]}" if len(takes) > 1 else takes[0]
            raise ValueError(f"{self.workload} runs in {modes} mode")
        if (self.workload == "racing_drivers") != (self.racer_at_s is not None):
            raise ValueError("racer_at_s is set for racing_drivers, and only for it")
        if self.racer_at_s is not None and self.racer_at_s < 0:
            raise ValueError("racer_at_s must be at least 0")
        if self.rows < 1 or self.files < 1 or self.files_per_batch < 1:
            raise ValueError("rows, files and files_per_batch must be at least 1")
        points = [f.kind.split("/")[1] for f in self.faults if f.kind.startswith("failpoint/")]
        if len(points) != len(set(points)):
            raise ValueError("a failpoint can be armed once per schedule")

    @property
    def name(self) -> str:
        return f"seed{self.seed}-{self.index:04d}"

    def bad_keys(self) -> tuple[int, ...]:
        """``bad_rows``: the keys (``event_id``) of the rows BigQuery refuses, drawn
        from the schedule's seed and index; none for other workloads."""
        if self.workload != "bad_rows":
            return ()
        return tuple(bad_keys(self.rows, BAD_FRACTION, self.seed * 100_000 + self.index))

    def failpoint_spec(self) -> str:
        """``ONCEOVER_FAILPOINTS`` for this schedule's failpoint faults."""
        parts = []
        for fault in self.faults:
            if fault.kind.startswith("failpoint/"):
                _, point, action = fault.kind.split("/")
                parts.append(f"{point}={action}@{fault.nth}")
        return ";".join(parts)

    def wire_faults(self) -> list[WireFault]:
        return [w for f in self.faults if (w := f.wire_fault()) is not None]

    def outages(self) -> list[Fault]:
        return [f for f in self.faults if f.kind == "backend/outage"]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "name": self.name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schedule:
        fields = {k: v for k, v in data.items() if k not in ("name", "faults")}
        if fields.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(f"schedule version {fields['version']} is not {SCHEMA_VERSION}")
        faults = tuple(Fault(**fault) for fault in data.get("faults", ()))
        return cls(faults=faults, **fields)

    def save(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def load_schedule(path: Path) -> Schedule:
    """A schedule from its JSON file, or from a report's schedule entry."""
    data = json.loads(path.read_text())
    if "schedule" in data:  # one result from a report
        data = data["schedule"]
    return Schedule.from_json(data)


# -- drawing ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How many of each hit one clean run makes: the range ``nth`` is drawn from."""

    batches: int
    tasks: int
    appends: int
    streams: int | None = None
    """CreateWriteStream calls: one per task, unless buffered or committed mode continues
    each partition's stream from batch to batch (onceover_jobs.sink.ledger.slots); None:
    ``tasks``."""
    between: int | None = None
    """``flush.between``: buffered commits with two streams or more to flush (the point
    passed after the first); None: ``batches``."""
    commits: int | None = None
    """BatchCommitWriteStreams calls (``commit.after`` hits); None: ``batches``
    (``bad_rows`` adds one per batch with refused rows, its dead-letter commit)."""
    finalizes: int | None = None
    """FinalizeWriteStream calls (``finalize.after`` hits); None: ``tasks``
    (``bad_rows`` adds a dead-letter stream per task with refused rows)."""

    @classmethod
    def of(cls, rows: int, files: int, files_per_batch: int, request_max_bytes: int) -> Shape:
        per_file = math.ceil(rows / files)
        per_request = max(1, (request_max_bytes - REQUEST_OVERHEAD_BYTES) // BYTES_PER_ROW)
        # The sink halves a request until it fits, so a file's rows go in a power of two.
        pieces = 1
        while math.ceil(per_file / pieces) > per_request:
            pieces *= 2
        return cls(math.ceil(files / files_per_batch), files, files * pieces)

    @classmethod
    def for_schedule(cls, schedule: Schedule) -> Shape:
        """The fewest hits a clean run of the schedule's workload makes (for drawing)."""
        s = schedule
        shape = cls.of(s.rows, s.files, s.files_per_batch, s.request_max_bytes)
        if s.workload == "cdc":
            # The load's shape (a file a task; on _default, so no stream is created), its
            # rows the changes, cut into requests as proto rows (no halving to a power of
            # two): the whole requests a file's changes fill, the fewest a clean run makes.
            per_request = (s.request_max_bytes - REQUEST_OVERHEAD_BYTES) // CDC_BYTES_PER_ROW
            per_file = s.rows // s.files
            shape = replace(shape, appends=s.files * max(1, per_file // max(1, per_request)))
        slotted = traits_of(s.mode).slotted
        if s.workload == "foreach_batch":
            # Per micro-batch three writes, each committed: two of the batch's files
            # (a task each), then one summary task. Inside foreachBatch the writes keep
            # the mode they are given, so buffered and committed ones continue their
            # streams too; a buffered micro-batch flushes two streams in each of its
            # two orders writes and one (no flush.between) in its summary write.
            continued = 5 if slotted else None
            b = shape.batches
            return cls(3 * b, 5 * b, 5 * b, continued, 2 * b)
        if s.workload == "two_tables":
            # Three writes, one commit each: two over three shuffle partitions, one
            # summary (a single stream: no flush.between in buffered mode).
            return cls(3, 7, 7, None, 2)
        if s.workload == "bad_rows":
            return shape.with_dead_letters(s, slotted=slotted)
        if s.workload in OVERWRITE_WORKLOADS:
            # One write over three shuffle partitions, staged and swapped once.
            return cls.of(s.rows, 3, 3, s.request_max_bytes)
        if slotted:  # the streaming sink: one stream per partition, once
            return replace(shape, streams=s.files_per_batch)
        return shape

    def with_dead_letters(self, schedule: Schedule, *, slotted: bool) -> Shape:
        """The load job's shape with the dead-letter streams its bad rows add: one per
        task (a file) holding a bad row, created, finalized and committed, a commit per
        batch holding one (in that batch's commit, before its own streams')."""
        s = schedule
        bounds = file_bounds(s.rows, s.files)
        files = {next(i for i in range(s.files) if k < bounds[i + 1]) for k in s.bad_keys()}
        batches = {f // s.files_per_batch for f in files}
        streams = s.files_per_batch if slotted else self.tasks
        if slotted:  # nothing of its own is finalized or batch-committed
            return replace(
                self, streams=streams + len(files), commits=len(batches), finalizes=len(files)
            )
        return replace(
            self,
            streams=streams + len(files),
            commits=self.batches + len(batches),
            finalizes=self.tasks + len(files),
        )

    def hits(self, kind: str, method: str | None = None) -> int:
        """Hits of ``kind``'s failpoint or wire method in one clean run."""
        point_or_method = method or kind.split("/")[1]
        counted = {
            "commit.after": self.commits,
            "BatchCommitWriteStreams": self.commits,
            "finalize.after": self.finalizes,
            "FinalizeWriteStream": self.finalizes,
            "flush.between": self.between,
            "CreateWriteStream": self.streams,
        }.get(point_or_method)
        if counted is not None:
            return counted
        per_batch = (
            "ledger.after_intent", "commit.before", "commit.after", "flush.between",
            *OVERWRITE_POINTS,
        )  # fmt: skip
        if point_or_method in (*per_batch, "BatchCommitWriteStreams"):
            return self.batches
        # Every task's partition has rows: a stream and a finalize per task (pending), a
        # flush per partition and batch (buffered), which is a task too.
        per_task = ("finalize.after", "FinalizeWriteStream", "flush.after", "FlushRows")
        if point_or_method in (*per_task, "CreateWriteStream"):
            return self.tasks
        return self.appends


class _Deck:
    """Fault kinds dealt round-robin in shuffled order: even coverage, random order."""

    def __init__(self, kinds: Sequence[str], rng: random.Random) -> None:
        self.kinds = list(kinds)
        self.rng = rng
        self.cards: list[str] = []

    def deal(self, refuse: set[str]) -> str:
        if not [c for c in self.cards if c not in refuse]:
            fresh = self.kinds[:]
            self.rng.shuffle(fresh)
            self.cards.extend(fresh)
        card = next(c for c in self.cards if c not in refuse)
        self.cards.remove(card)
        return card


def draw_schedules(
    seed: int,
    count: int,
    *,
    modes: Sequence[str] = DEFAULT_MODES,
    rows: int = ROWS,
    faults_per_schedule: tuple[int, int] = (2, 4),
    workloads: Sequence[str] = ("load_files",),
    stores: Sequence[str] = STORES,
) -> Iterator[Schedule]:
    """``count`` schedules from ``seed``: each (workload, mode) pair in turn (a workload
    skips the modes its job does not take, ``cdc`` takes its own: :func:`drawn_modes`),
    fault kinds dealt evenly, each schedule's store drawn from ``stores``
    (:func:`draw_stores`)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible draws, not secrets
    drawn_stores = draw_stores(seed, stores)
    # Kinds only some modes can meet are dealt more often there, so they are not much
    # rarer than the rest over a session that alternates modes (_weighted_kinds). One
    # deck per set of kinds: workloads that meet the same kinds in a mode share it.
    decks: dict[tuple[str, tuple[str, ...]], _Deck] = {}
    pairs = [(w, m) for w in workloads for m in drawn_modes(w, modes)]
    if not pairs:
        raise ValueError("no workload runs in the modes asked for")
    for index in range(count):
        workload, mode = pairs[index % len(pairs)]
        racer_at_s = round(rng.uniform(*RACER_AT_S), 1) if workload == "racing_drivers" else None
        base = Schedule(
            seed=seed, index=index, mode=mode, faults=(), rows=rows, workload=workload,
            racer_at_s=racer_at_s, store=next(drawn_stores),
        )  # fmt: skip
        shape = Shape.for_schedule(base)
        faults: list[Fault] = []
        taken: set[str] = set()
        weighted = tuple(_weighted_kinds(mode, drawn_modes(workload, modes), workload))
        deck = decks.setdefault((mode, weighted), _Deck(weighted, rng))
        for _ in range(rng.randint(*faults_per_schedule)):
            kind = deck.deal(taken)
            faults.append(_draw_fault(kind, unary_methods(mode, workload), shape, rng))
            taken.add(kind)
            if kind.startswith("failpoint/"):  # one arming per point
                point = kind.split("/")[1]
                taken.update(k for k in FAILPOINT_KINDS if k.split("/")[1] == point)
        yield replace(base, faults=tuple(faults))


def drawn_modes(workload: str, modes: Sequence[str]) -> tuple[str, ...]:
    """The modes ``workload`` is drawn in: those of ``modes`` its job takes
    (:data:`WORKLOAD_MODES`), and for a workload exactly once in its only mode whatever
    the modes asked (:data:`OWN_MODE_ONLY`: ``cdc`` on ``_default``), that mode."""
    if workload in OWN_MODE_ONLY:
        return WORKLOAD_MODES[workload]
    return tuple(m for m in modes if m in WORKLOAD_MODES[workload])


def draw_stores(seed: int, stores: Sequence[str] = STORES) -> Iterator[str]:
    """The stores of ``seed``'s schedules, in order, drawn by :data:`STORE_WEIGHTS`.

    A stream of their own (seeded with ``store:<seed>``), not the one faults are drawn
    from: taking a store leaves every other draw of the seed as it was, and the stores
    asked for do not change which faults a schedule arms.
    """
    unknown = [s for s in stores if s not in STORES]
    if not stores or unknown:
        raise ValueError(f"stores: give some of {', '.join(STORES)}, not {list(stores)}")
    chosen = list(dict.fromkeys(stores))
    weights = [STORE_WEIGHTS[s] for s in chosen]
    rng = random.Random(f"store:{seed}")  # noqa: S311 - reproducible draws, not secrets
    while True:
        yield rng.choices(chosen, weights)[0]


def _weighted_kinds(mode: str, modes: Sequence[str], workload: str = "load_files") -> list[str]:
    """``mode``'s kinds, each once more for every other mode drawn that cannot meet it:
    with pending and committed, pending's own kinds twice; with buffered as well,
    pending's and buffered's own kinds three times each (for ``workload``: ``bad_rows``
    meets ``commit.after`` in every mode)."""
    mine = kinds_for(mode, workload)
    others = [set(kinds_for(other, workload)) for other in dict.fromkeys(modes) if other != mode]
    return [*mine, *(k for unable in others for k in mine if k not in unable)]


def _draw_fault(kind: str, unary: Sequence[str], shape: Shape, rng: random.Random) -> Fault:
    if kind == "backend/outage":
        return Fault(kind, at_s=round(rng.uniform(1.0, 12.0), 1), for_s=round(rng.uniform(2, 8), 1))
    if kind == "wire/uncommitted":
        return Fault(kind, nth=rng.randint(1, shape.hits(kind, BATCH_COMMIT)), method=BATCH_COMMIT)
    if kind == "wire/late_duplicate":
        return Fault(kind, nth=rng.randint(1, shape.appends), method=APPEND_ROWS,
                     delay_s=round(rng.uniform(*LATE_DUPLICATE_S), 1))  # fmt: skip
    if kind.startswith("wire/"):
        unary = () if kind == "wire/cut" else unary
        method = APPEND_ROWS if not unary or rng.random() < 0.6 else rng.choice(unary)
        delay = round(rng.uniform(0.2, 3.0), 2) if kind == "wire/delay" else 0.0
        return Fault(kind, nth=rng.randint(1, shape.hits(kind, method)), method=method,
                     delay_s=delay)  # fmt: skip
    if kind == "spark/kill_task":
        return Fault(kind, nth=rng.randint(1, shape.appends))
    return Fault(kind, nth=rng.randint(1, shape.hits(kind)))
