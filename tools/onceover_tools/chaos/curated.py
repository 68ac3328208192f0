"""The curated schedules: every fault kind armed, in as few job runs as can hold them.

``onceover chaos --curated`` runs these; CI runs them on every change. Random draws
(``--schedules N --seed S``, ``make chaos``) explore orders and hits that nobody
thought of; this set makes sure that nothing the harness can do is left out of a
short run. Each schedule arms one action at most of the failpoints its mode passes (a
point can be armed once per schedule), so the three pending schedules take the
actions of each point between them, and the three buffered ones (two on the load
job, the racing one) the actions of the flush points; wire faults take every method a
mode calls.

Every ``nth`` is at most the hits a clean run makes of its point or method
(:class:`~onceover_tools.chaos.schedule.Shape`: 3 batches, 6 tasks, 24 appends; in buffered
mode 2 streams, 6 flushes, 3 batches with two streams to flush). Hits are counted
across restarts and every batch, task and request passes each point at least once
before the job can finish, so every armed fault fires in every run of the set,
whatever Spark's timing: a test can ask that each one did.

The load job's six (three pending, two buffered, one committed) cost about 15 job
runs (a driver fault costs a restart; an executor fault is retried by Spark within
the run), where 20 random schedules cost about 34. Four more run users' own jobs
(``foreach_batch``, ``two_tables``, in pending and buffered mode), one races a second
driver against the load job (``racing_drivers``, buffered), one submits the load
job to a standalone cluster of two workers (``cluster``, committed), and two load
rows of which BigQuery refuses a few into a dead-letter table (``bad_rows``, buffered
and committed: the modes where the dead-letter commit is the batch's only
BatchCommitWriteStreams), and two run a user's nightly ``mode("overwrite")``
(``overwrite``, ``overwrite_dynamic``, pending), the only jobs that pass an overwrite's
steps, arming each with each action between them. The last streams a user's change data
capture (``cdc``, default mode, at least once on the wire): changes sent again by a lost
answer, a retried task and a replayed micro-batch must leave the table as the source's
final state, key by key (:data:`_CDC`).

Five keep their ledger in a bucket (:data:`IN_A_BUCKET`), the others on this disk: in
CI's share (:data:`CI_LEFT_OUT` says what it leaves) the second pending load on S3 (the
driver SIGKILLed just before a commit and just after one) and the racing drivers on
Cloud Storage (the second refused by the first's claim in the bucket, the first
SIGKILLed after a flush); beyond it the users' jobs in buffered mode and the cluster.
"""

from __future__ import annotations

from dataclasses import replace

from onceover_tools.chaos.proxy import APPEND_ROWS
from onceover_tools.chaos.schedule import Fault, Schedule

CURATED_SEED = 0
"""The seed curated schedules carry (their names are ``seed0-000N``); draws use others."""

_CREATE = "CreateWriteStream"
_FINALIZE = "FinalizeWriteStream"
_COMMIT = "BatchCommitWriteStreams"
_FLUSH = "FlushRows"


def _fp(point: str, action: str, nth: int) -> Fault:
    return Fault(f"failpoint/{point}/{action}", nth=nth)


def _wire(action: str, method: str, nth: int, delay_s: float = 0.0) -> Fault:
    return Fault(f"wire/{action}", nth=nth, method=method, delay_s=delay_s)


_FAULTS: tuple[tuple[str, tuple[Fault, ...]], ...] = (  # the load job (onceover_jobs.load_files)
    ("pending", (
        _fp("append.before", "crash", 3),
        _fp("append.response", "error", 5),
        _fp("finalize.after", "drop", 2),
        _fp("ledger.after_intent", "crash", 1),
        _fp("commit.before", "error", 2),
        _fp("commit.after", "drop", 3),
        _wire("unavailable", APPEND_ROWS, 4),
        _wire("delay", _CREATE, 2, delay_s=1.5),
    )),
    ("pending", (
        _fp("append.before", "error", 6),
        _fp("append.response", "drop", 2),
        _fp("finalize.after", "crash", 4),
        _fp("ledger.after_intent", "error", 2),
        _fp("commit.before", "crash", 1),
        _fp("commit.after", "crash", 3),
        _wire("drop_response", APPEND_ROWS, 7),
        _wire("cut", APPEND_ROWS, 12),
        _wire("unavailable", _FINALIZE, 3),
        _wire("uncommitted", _COMMIT, 1),
    )),
    ("pending", (
        _fp("append.before", "drop", 9),
        _fp("append.response", "crash", 11),
        _fp("finalize.after", "error", 5),
        _fp("commit.after", "error", 1),
        _wire("drop_response", _COMMIT, 2),
        _wire("delay", APPEND_ROWS, 15, delay_s=2.0),
        Fault("spark/kill_task", nth=18),
        Fault("backend/outage", at_s=3.0, for_s=4.0),
    )),
    # Buffered mode (writeStream's default): a partition's stream kept from batch to
    # batch and flushed at each commit, one FlushRows per stream (2 streams, 6 flushes).
    # The first: a driver crash after an intent (the replay flushes every stream of it)
    # and between a batch's flushes (one partition visible, the other not yet); a worker
    # dead after BigQuery took its append and a task failed before one (each retry
    # starts the partition over on a new stream), another killed mid-append. The
    # second: the job failed between a batch's flushes, flushes whose answers are lost
    # (FlushRows asked again, to an offset already flushed). The third, the flush the
    # driver dies after, is the racing schedule's.
    ("buffered", (
        _fp("append.before", "error", 11),
        _fp("append.response", "crash", 7),
        _fp("ledger.after_intent", "crash", 1),
        _fp("flush.between", "crash", 2),
        _fp("flush.after", "drop", 5),
        _wire("unavailable", _FLUSH, 3),
        _wire("cut", APPEND_ROWS, 9),
        _wire("delay", _CREATE, 1, delay_s=1.5),
        Fault("spark/kill_task", nth=20),
    )),
    ("buffered", (
        _fp("append.before", "drop", 6),
        _fp("append.response", "drop", 3),
        _fp("flush.between", "error", 3),
        _fp("flush.after", "error", 1),
        _wire("drop_response", _FLUSH, 4),
        _wire("unavailable", _CREATE, 2),
        _wire("delay", APPEND_ROWS, 12, delay_s=2.0),
        Fault("backend/outage", at_s=4.0, for_s=3.0),
    )),
    # Committed mode, once on the load job since buffered became writeStream's default
    # (its second schedule's failpoints are taken by the users' jobs and the cluster
    # in committed mode, its wire faults and outage by this one): a stream per
    # partition, once, 2 CreateWriteStream calls.
    ("committed", (
        _fp("append.before", "crash", 5),
        _fp("append.response", "drop", 8),
        _fp("ledger.after_intent", "crash", 2),
        _wire("cut", APPEND_ROWS, 3),
        _wire("drop_response", APPEND_ROWS, 6),
        _wire("drop_response", _CREATE, 1),
        _wire("unavailable", _CREATE, 2),
        Fault("spark/kill_task", nth=14),
        Fault("backend/outage", at_s=5.0, for_s=3.0),
    )),
)  # fmt: skip


# Users' own jobs (onceover_jobs.examples): a foreachBatch writing three times per micro-batch
# (9 commits, at least 15 appends in a clean run; 15 streams in pending mode, 5 in
# buffered, whose writes continue their streams), a batch job writing
# two tables under one run id after a repartition() (3 commits, 7 streams and appends).
# A crash just after BigQuery committed a write that is not the first of its call or
# run, and a task killed mid-append, in pending and buffered modes (committed mode is
# the load job's and the cluster's: it asks the same of the input whoever wrote it).
# (No executor crash beside a task kill: the kill would find its worker gone.)
_USER_CODE: tuple[tuple[str, str, tuple[Fault, ...]], ...] = (
    ("foreach_batch", "pending", (
        _fp("commit.after", "crash", 2),
        _fp("append.response", "drop", 3),
        _fp("ledger.after_intent", "error", 4),
        _wire("unavailable", _COMMIT, 5),
    )),
    ("foreach_batch", "buffered", (
        _fp("append.before", "error", 3),
        _fp("ledger.after_intent", "crash", 2),
        Fault("spark/kill_task", nth=6),
    )),
    ("two_tables", "pending", (
        _fp("commit.after", "crash", 2),
        _fp("append.before", "error", 4),
        _wire("drop_response", APPEND_ROWS, 5),
    )),
    ("two_tables", "buffered", (
        _fp("append.response", "drop", 3),
        _fp("ledger.after_intent", "error", 3),
        Fault("spark/kill_task", nth=5),
    )),
)  # fmt: skip


# A second driver on the first's checkpoint, started 6 s into each run: while the first
# still plans (refused, exit 3), or after the crash at the second commit killed it
# (it takes over). The crash costs a restart, which has a racer of its own. Buffered
# mode, writeStream's default (what the race is for, the driver's claim, does not depend
# on the mode): the crash comes just after the second batch's first flush took effect,
# one of its partitions visible.
_RACING: tuple[str, tuple[Fault, ...], float] = (
    "buffered",
    (_fp("flush.after", "crash", 3), _wire("unavailable", APPEND_ROWS, 4)),
    6.0,
)


# The load job on a standalone cluster, committed mode: a Python worker dies right after
# BigQuery took its third append (rows visible) and another is killed mid-append; Spark
# retries each task in the same run, maybe on the other worker, and the retry must
# carry on from what the ledger recorded, with the same rows. Then the driver dies
# after its second intent: a new application, new executors. (The longest schedule:
# docs/guides/chaos.md has its time.)
_CLUSTER: tuple[str, tuple[Fault, ...]] = (
    "committed",
    (
        _fp("append.response", "crash", 3),
        Fault("spark/kill_task", nth=8),
        _fp("ledger.after_intent", "crash", 2),
        _wire("unavailable", _CREATE, 2),
    ),
)


# Bad rows (about 15 of 3,000, in every file): BigQuery refuses them, the sink sends the
# rest of their request again and sets them aside on a PENDING stream of the task's own on
# the dead-letter table, finalized (finalize.after) and committed by the driver
# (BatchCommitWriteStreams, commit.after) before it flushes the batch (buffered) or marks
# it (committed): 3 such commits, 6 such finalizes in a clean run. In each, the driver
# dies just after a dead-letter commit took effect (its batch not yet published or
# marked: the replay must not set those rows aside again, and must publish the rest), a
# task is killed mid-append and another fails (its retry takes out the same rows again,
# and only one attempt's dead letters are committed), and a dead-letter finalize or
# commit answer is lost or empty.
_BAD_ROWS: tuple[tuple[str, tuple[Fault, ...]], ...] = (
    ("buffered", (
        _fp("commit.after", "crash", 1),
        _fp("finalize.after", "drop", 3),
        _fp("append.before", "error", 9),
        _wire("drop_response", _COMMIT, 2),
        _wire("unavailable", _FLUSH, 2),
        Fault("spark/kill_task", nth=15),
    )),
    ("committed", (
        _fp("commit.after", "crash", 2),
        _fp("append.response", "crash", 6),
        _wire("uncommitted", _COMMIT, 1),
        _wire("unavailable", _FINALIZE, 2),
        Fault("spark/kill_task", nth=9),
    )),
)  # fmt: skip


# A user's nightly mode("overwrite") (onceover_jobs.examples.nightly_overwrite) of a table
# seeded with old rows: three tasks stage the rows in pending mode (one commit into the
# staging table), then one transaction swaps them in. Between them the two arm each step
# after the staging with each action: the driver dies (crash) or the job fails (error)
# once the rows are staged, once the swap is in the ledger but not asked for, and once
# its job ran but is not marked; each restart must go on from the step the ledger shows,
# never staging or swapping twice. On the way a staging append is refused (UNAVAILABLE)
# or its task killed, and the staging commit's answer is lost. The plain one replaces the
# whole table; the dynamic one only the day its rows fall in, the day before untouched.
_OVERWRITES: tuple[tuple[str, tuple[Fault, ...]], ...] = (
    ("overwrite", (
        _fp("overwrite.after_staged", "crash", 1),
        _fp("overwrite.before_swap", "error", 1),
        _fp("overwrite.after_swap", "crash", 1),
        _wire("unavailable", APPEND_ROWS, 5),
        _wire("drop_response", _COMMIT, 1),
    )),
    ("overwrite_dynamic", (
        _fp("overwrite.after_staged", "error", 1),
        _fp("overwrite.before_swap", "crash", 1),
        _fp("overwrite.after_swap", "error", 1),
        Fault("spark/kill_task", nth=4),
    )),
)  # fmt: skip


# A user's streaming change data capture (onceover_jobs.examples.cdc_mirror, default mode:
# BigQuery applies changes on _default only, at least once on the wire): 3,000 inserts,
# updates, deletes and re-inserts in 6 files, 2 a micro-batch, 36 appends or more in a
# clean run. What makes CDC go wrong is a change applied twice or late, so each fault
# sends changes again: an append's answer lost on the wire (the request re-sent, its
# changes applied twice), another lost at the sink (the same, mid-partition), a task
# killed mid-append (Spark retries it: the partition's changes sent again from its
# start), and the driver killed once the second micro-batch's changes are applied and
# its intent is in the ledger (the restart replays the micro-batch, after its own
# changes: the same sequence numbers, from the base the ledger kept, change nothing);
# and an append of the first micro-batch applied again 6 s later, after newer changes
# of its keys (or, sent as the proxy stops, after the job ended): the old changes must
# lose to the newer ones by their sequence numbers, as BigQuery orders them.
_CDC: tuple[Fault, ...] = (
    _wire("late_duplicate", APPEND_ROWS, 8, delay_s=6.0),
    _wire("drop_response", APPEND_ROWS, 5),
    _fp("append.response", "drop", 20),
    _fp("ledger.after_intent", "crash", 2),
    Fault("spark/kill_task", nth=30),
)


# Where the ledger is, for the schedules not on this disk (the store is orthogonal to
# the faults: each keeps the faults it had on disk). In CI's share: the second pending
# load (the driver's JVM SIGKILLed just before its first commit and just after its third,
# with every restart reading its intents back from S3) and the racing drivers (the
# second driver refused by the first's claim, read from Cloud Storage, where each claim
# is a compare-and-swap on its generation; the first driver SIGKILLed after a flush).
# Beyond it: the users' jobs in buffered mode (the foreachBatch's ledger from
# $ONCEOVER_LEDGER, the batch job's from --ledger) and the cluster, whose executors
# reach the bucket by what spark.executorEnv gives them.
IN_A_BUCKET: dict[str, str] = {
    "seed0-0001": "s3",
    "seed0-0007": "gcs",
    "seed0-0009": "s3",
    "seed0-0010": "gcs",
    "seed0-0011": "s3",
}

# CI's share: the eight schedules that between them arm every fault kind (the three
# pending loads take each pending point's actions, the two buffered loads and the racing
# drivers the flush points', the two overwrites the overwrite steps'), with a ledger on
# each object store (the second pending load on S3, the racing drivers on Cloud Storage),
# and the CDC mirror (seed0-0016, _CDC: changes re-sent on the wire and by the sink, a
# task retried, a micro-batch replayed after the driver died; two runs, about a minute).
# Left to ``onceover chaos --curated`` and ``make chaos``, each run elsewhere on every
# change under faults of its own: the committed load (tests/jobs/test_load_files.py
# continues a crashed partition from the ledger), the users' jobs
# (tests/jobs/test_user_scripts.py, test_ledger_in_a_bucket.py), the standalone cluster
# (tests/jobs/test_cluster_job.py resumes onto one) and bad rows
# (tests/jobs/test_dead_letter_script.py, tests/chaos/test_bad_rows.py). The whole set's
# time against CI's budget is in docs/guides/chaos.md ("The curated schedules").
CI_LEFT_OUT: frozenset[tuple[str, str]] = frozenset({
    ("load_files", "committed"),
    ("foreach_batch", "pending"),
    ("foreach_batch", "buffered"),
    ("two_tables", "pending"),
    ("two_tables", "buffered"),
    ("cluster", "committed"),
    ("bad_rows", "buffered"),
    ("bad_rows", "committed"),
})  # fmt: skip

SHARES = ("all", "ci")
"""What ``--curated`` takes: the whole set, or CI's share of it."""


def curated_schedules(share: str = "all") -> list[Schedule]:
    """The curated set (``share`` "all") or CI's share of it ("ci"), in the order it runs.
    A schedule keeps its name and index in either, so a report of one compares with
    the other's."""
    if share not in SHARES:
        raise ValueError(f"share: {share!r} is not one of {', '.join(SHARES)}")
    every = _curated()
    if share == "ci":
        return [s for s in every if (s.workload, s.mode) not in CI_LEFT_OUT]
    return every


def _curated() -> list[Schedule]:
    load_files = [(("load_files", mode, faults)) for mode, faults in _FAULTS]
    schedules = [
        Schedule(seed=CURATED_SEED, index=index, mode=mode, faults=faults, workload=workload)
        for index, (workload, mode, faults) in enumerate([*load_files, *_USER_CODE])
    ]
    mode, faults, racer_at_s = _RACING
    racing = Schedule(
        seed=CURATED_SEED, index=len(schedules), mode=mode, faults=faults,
        workload="racing_drivers", racer_at_s=racer_at_s,
    )  # fmt: skip
    mode, faults = _CLUSTER
    cluster = Schedule(
        seed=CURATED_SEED, index=len(schedules) + 1, mode=mode, faults=faults, workload="cluster"
    )
    first = len(schedules) + 2
    bad_rows = [
        Schedule(seed=CURATED_SEED, index=index, mode=mode, faults=faults, workload="bad_rows")
        for index, (mode, faults) in enumerate(_BAD_ROWS, start=first)
    ]
    first = len(schedules) + 2 + len(bad_rows)
    overwrites = [
        Schedule(seed=CURATED_SEED, index=index, mode="pending", faults=faults, workload=workload)
        for index, (workload, faults) in enumerate(_OVERWRITES, start=first)
    ]
    cdc = Schedule(
        seed=CURATED_SEED, index=first + len(overwrites), mode="default", faults=_CDC,
        workload="cdc",
    )  # fmt: skip
    every = [*schedules, racing, cluster, *bad_rows, *overwrites, cdc]
    return [replace(s, store=IN_A_BUCKET.get(s.name, "posix")) for s in every]
