"""Runs one schedule: the real job, its faults, its restarts, then the verdict.

For a schedule, in order:

1. write the source files (``rows`` unique keys; for ``bad_rows`` a few of them bad;
   for ``cdc`` ``rows`` changes of a key set, :mod:`onceover_jobs.generate_changes`)
   and fresh tables (the orders table; a summary table for the user-code workloads;
   for ``bad_rows`` an orders table whose ``currency`` is ``STRING(3)``, and no
   dead-letter table: the sink creates it; for the overwrite workloads the orders
   table seeded with old rows, :mod:`onceover_tools.chaos.overwrite`; for ``cdc`` a table
   whose primary key is declared, :mod:`onceover_tools.chaos.cdc`); for a schedule
   whose ledger is in a bucket (its ``store``), a fresh bucket on the session's stand-in
   (:mod:`onceover_tools.chaos.stores`);
2. start a fault proxy in front of the local BigQuery's Storage Write API, armed
   with the schedule's wire faults and task kills;
3. run the workload's job (``python -m onceover_jobs.load_files``, or a user's script in
   ``onceover_jobs.examples``) against the proxy with the schedule's failpoints armed (hits
   counted across every process and restart), events going to the control plane,
   while a timer takes the control plane down and up again for each outage fault;
4. while the job fails, run it again on the same checkpoint, at most
   ``max_restarts`` times;
5. ask BigQuery (every workload: the orders table holds each source key once, but
   the bad ones, which it must not hold; the summary table one row per group,
   summing to the source's rows; the dead-letter table each bad key once for the
   run, and nothing else; after an overwrite the old rows of the replaced scope gone,
   the others there once, and no staging table left; after ``cdc`` the source's final
   state, key by key) and, for the load job that
   reports to it, the control plane (:mod:`onceover_tools.chaos.verify`), and read the
   ledger where the store put it: the table's writes committed there, none on this
   disk if it is in a bucket.

The stack (local BigQuery, control plane, object-store stand-ins) is shared by every
schedule of a chaos session: :class:`ChaosStack`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_jobs.generate_changes import change_tables, final_state, write_change_files
from onceover_jobs.sink.failpoints import ENV as FAILPOINTS_ENV
from onceover_jobs.sink.failpoints import SEED_ENV as FAILPOINTS_SEED_ENV
from onceover_jobs.sink.failpoints import STATE_ENV as FAILPOINTS_STATE_ENV
from onceover_jobs.sink.job.options import LEDGER_ENV

from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover.checkpoint_layout import ledger_root
from onceover.checkpoint_layout import run_id_path as checkpoint_run_id
from onceover.errors import LedgerError
from onceover.job_env import EXIT_REFUSED, MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover.modes import traits_of
from onceover.processes import ChildProcess, job_environment, with_quick_jvm
from onceover_tools.chaos.cdc import compare_mirror, create_keyed, mirror_problems, table_rows
from onceover_tools.chaos.on_cluster import cluster_outcome, driver_dir, submit_argv
from onceover_tools.chaos.overwrite import create_seeded, old_keys, staging_problems
from onceover_tools.chaos.proxy import FaultProxy
from onceover_tools.chaos.schedule import OVERWRITE_WORKLOADS, Fault, Schedule
from onceover_tools.chaos.stores import BucketLedger, StandIns
from onceover_tools.chaos.task_kill import KILLED, kill_sender
from onceover_tools.chaos.verify import (
    KeyAggregate,
    bad_keys_problems,
    compare_keys,
    control_plane_view,
    dead_letter_problems,
    dead_letter_view,
    keys_present,
    ledger_problems,
    ledger_view,
    summary_problems,
    table_aggregate,
)
from onceover_tools.spark_cluster import SparkCluster
from onceover_tools.stack import BackendProcess

logger = logging.getLogger(__name__)

DATASET = "onceover_chaos"
KEY = "event_id"
JOB_TIMEOUT_S = 240.0
"""A run still going after this is killed and counted as hung (a liveness violation)."""

SUMMARY_SCHEMAS = {
    "foreach_batch": [
        bigquery.SchemaField("batch_id", "INT64"),
        bigquery.SchemaField("orders", "INT64"),
    ],
    "two_tables": [
        bigquery.SchemaField("currency", "STRING"),
        bigquery.SchemaField("orders", "INT64"),
    ],
}
"""The user-code workloads' second table: one row per group, its orders counted."""

ORDER_SCHEMA = [
    bigquery.SchemaField("event_id", "INT64"),
    bigquery.SchemaField("order_id", "STRING"),
    bigquery.SchemaField("customer_id", "INT64"),
    bigquery.SchemaField("amount", "FLOAT64"),
    bigquery.SchemaField("currency", "STRING"),
    bigquery.SchemaField("event_time", "TIMESTAMP"),
]
BAD_COLUMN = "currency"
"""``bad_rows``: the column whose rule the bad rows break."""
BAD_COLUMN_MAX_LENGTH = 3
BAD_ROWS_SCHEMA = [
    bigquery.SchemaField(f.name, f.field_type, max_length=BAD_COLUMN_MAX_LENGTH)
    if f.name == BAD_COLUMN
    else f
    for f in ORDER_SCHEMA
]
"""``bad_rows``' orders table: ``currency`` is ``STRING(3)``, which the bad rows break."""
_FIRED_RE = re.compile(r"failpoint (?P<point>\S+) fired: (?P<action>\w+) \(hit (?P<hit>\d+)\)")


class ScheduleInterruptedError(Exception):
    """The session was stopped (Ctrl-C) while this schedule ran; it has no verdict."""


@dataclass
class JobRun:
    exit_code: int | None
    seconds: float
    hung: bool = False
    racer: RacerRun | None = None
    """``racing_drivers``: the second driver of this run, if the first lived to its start."""


@dataclass
class RacerRun:
    exit_code: int | None
    started_at_s: float
    hung: bool = False

    @property
    def refused(self) -> bool:
        return self.exit_code == EXIT_REFUSED


@dataclass
class FaultOutcome:
    fault: Fault
    fired: int = 0
    details: list[str] = field(default_factory=list)


@dataclass
class ScheduleResult:
    schedule: Schedule
    runs: list[JobRun]
    faults: list[FaultOutcome]
    violations: list[str]
    seconds: float
    bigquery: dict[str, int]
    control_plane: dict[str, Any]
    work_dir: Path
    cluster: dict[str, Any] = field(default_factory=dict)
    """``cluster``: the applications the schedule's runs were, the workers that ran them."""
    ledger: dict[str, Any] = field(default_factory=dict)
    """Where the ledger was, and what it held committed for the orders table."""

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def restarts(self) -> int:
        return max(0, len(self.runs) - 1)


class ChaosStack:
    """A control plane that schedules report to, one after another; restartable for outages.

    Schedules run side by side each get a stack of their own (a *lane*), so an outage
    hits only the schedule that drew it; the lanes share the session's cluster and
    object-store stand-ins.
    """

    def __init__(
        self,
        bigquery_config: BigQueryConfig,
        work_root: Path,
        tokens: dict[str, str],
        lane: int = 0,
        *,
        cluster: SparkCluster | None = None,
        stores: StandIns | None = None,
    ) -> None:
        self.bigquery = bigquery_config
        self.cluster = cluster
        """The session's standalone Spark cluster, when a ``cluster`` schedule runs."""
        self.work_root = work_root.resolve()  # a job may run in another directory
        self._own_stores = stores is None
        self.stores = StandIns(self.work_root) if stores is None else stores
        """The session's stand-ins, for the schedules whose ledger is in a bucket."""
        self.tokens = tokens
        self.lane = lane
        self.database_url = f"sqlite:///{(work_root / f'control-plane-{lane}.db').resolve()}"
        self._backend: BackendProcess | None = None
        self._port = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self._backend is not None
        return self._backend.url

    def start(self) -> ChaosStack:
        self.work_root.mkdir(parents=True, exist_ok=True)
        client = bigquery_client(self.bigquery)
        client.create_dataset(f"{client.project}.{DATASET}", exists_ok=True)
        self._start_backend()
        return self

    def _start_backend(self) -> None:
        backend = BackendProcess(
            port=self._port,
            database_url=self.database_url,
            bigquery=self.bigquery,
            tokens=self.tokens,
            log_path=self.work_root / f"control-plane-{self.lane}.log",
        )
        self._backend = backend  # before start: stop() must find it even if start is cut short
        backend.start()
        self._port = backend.port

    def outage(self, seconds: float, stop: threading.Event) -> None:
        """Kill the control plane (SIGKILL), keep it down ``seconds``, start it again."""
        with self._lock:
            assert self._backend is not None
            self._backend.stop(grace_s=0)
            stop.wait(seconds)
            self._start_backend()

    def stop(self) -> None:
        if self._backend is not None:
            self._backend.stop()
            self._backend = None
        if self._own_stores:
            self.stores.stop()


def run_schedule(
    schedule: Schedule, stack: ChaosStack, *, abort: threading.Event | None = None
) -> ScheduleResult:
    """Run ``schedule`` to the end and judge it; ``abort`` stops it without a verdict."""
    abort = abort or threading.Event()
    started = time.monotonic()
    work = stack.work_root / schedule.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    schedule.save(work / "schedule.json")
    _write_source(schedule, work / "source")
    client = bigquery_client(stack.bigquery)
    table = _fresh_tables(client, schedule)
    bucket = stack.stores.ledger_for(schedule)

    outcomes = {id(f): FaultOutcome(f) for f in schedule.faults}
    assert stack.bigquery.grpc_endpoint is not None
    proxy = FaultProxy(stack.bigquery.grpc_endpoint, schedule.wire_faults(), on_kill=kill_sender)
    runs: list[JobRun] = []
    with proxy, _outages(schedule, stack, outcomes) as job_started:
        env = _job_environment(schedule, stack, proxy, work, bucket)
        argv, cwd = _command(schedule, stack, table, work, env, bucket)
        for attempt in range(schedule.max_restarts + 1):
            run = _run_job(schedule, argv, cwd, work, env, attempt, job_started, abort)
            runs.append(run)
            if run.exit_code == 0 or run.hung:
                break
    _count_wire_faults(schedule, proxy, outcomes)
    _count_failpoints(schedule, work / "failpoints", outcomes)

    violations = _run_problems(runs)
    counts, problems = _table_problems(client, schedule, table)
    violations += problems
    cluster: dict[str, Any] = {}
    if schedule.workload == "cluster":
        assert stack.cluster is not None
        cluster, problems = cluster_outcome(stack.cluster, f"onceover-{job_name(schedule)}")
        violations += problems
    control_plane, problems = _workload_problems(client, schedule, stack, table, work, counts)
    violations += problems
    ledger, problems = _ledger_problems(schedule, table, work, bucket)
    violations += problems
    return ScheduleResult(
        schedule=schedule,
        runs=runs,
        faults=[outcomes[id(f)] for f in schedule.faults],
        violations=violations,
        seconds=time.monotonic() - started,
        bigquery=counts,
        control_plane=control_plane,
        work_dir=work,
        cluster=cluster,
        ledger=ledger,
    )


CDC_FORMAT = "parquet"
"""``cdc``: the change files' format (the other workloads read JSON)."""


def _write_source(schedule: Schedule, source: Path) -> None:
    """The schedule's source files: orders (a few bad for ``bad_rows``), or changes."""
    if schedule.workload == "cdc":
        write_change_files(
            source, schedule.rows, schedule.files, CDC_FORMAT, seed=changes_seed(schedule),
            apart=schedule.files_per_batch,
        )  # fmt: skip
        return
    write_files(
        source, schedule.rows, schedule.files, "json", seed=schedule.seed, bad=schedule.bad_keys()
    )


def changes_seed(schedule: Schedule) -> int:
    """``cdc``: what the changes are drawn from, the schedule's own (as its bad keys are)."""
    return schedule.seed * 100_000 + schedule.index


def _workload_problems(  # noqa: PLR0917 - one call site, every argument named there
    client: bigquery.Client,
    schedule: Schedule,
    stack: ChaosStack,
    table: str,
    work: Path,
    counts: dict[str, int],
) -> tuple[dict[str, Any], list[str]]:
    """What the workload's own tables and the control plane say, and what is wrong: a
    user's job's summary table, an overwrite's staging tables, the load job's dead
    letters (added to ``counts``) and its run as the control plane tells it."""
    if (summary_schema := SUMMARY_SCHEMAS.get(schedule.workload)) is not None:
        group = summary_schema[0].name
        return {}, summary_problems(client, f"{table}_summary", group, schedule.rows)
    if schedule.workload in OVERWRITE_WORKLOADS:
        return {}, staging_problems(client, table)
    if schedule.workload == "cdc":
        # A user's streaming query: its run never reads "succeeded" on the control plane
        # (a query that stops cleanly sends nothing the sink sees), and its run id is the
        # sink's, not kept where the load job keeps one. Its events still go there, so an
        # outage is met; what is judged is the table (and the ledger).
        return {}, []
    run_id_path = checkpoint_run_id(work / "checkpoint")
    if not run_id_path.exists():
        return {}, ["the job never recorded a run id"]
    run_id = run_id_path.read_text().strip()
    problems: list[str] = []
    if schedule.workload == "bad_rows":
        set_aside, problems = _dead_letter_problems(client, schedule, table, run_id)
        counts |= set_aside
    control_plane, more = _control_plane_problems(schedule, stack, run_id)
    return control_plane, problems + more


def _command(  # noqa: PLR0917 - one call site, every argument named there
    schedule: Schedule,
    stack: ChaosStack,
    table: str,
    work: Path,
    env: dict[str, str],
    bucket: BucketLedger | None,
) -> tuple[list[str], Path | None]:
    """The job's command and working directory (None: this one's): the workload's own
    (:func:`job_argv`), or for ``cluster`` submitted to the session's cluster, with the
    variables that reach the ledger's bucket shipped to the executors."""
    argv = job_argv(schedule, table, work, ledger=None if bucket is None else bucket.url)
    if schedule.workload != "cluster":
        return argv, None
    if stack.cluster is None:
        raise ValueError(f"{schedule.name} runs on a cluster, and the session has none")
    reach = () if bucket is None else tuple(bucket.environment)
    return submit_argv(stack.cluster, argv, env, work, executor_env=reach), driver_dir(work)


def _table_problems(
    client: bigquery.Client, schedule: Schedule, table: str
) -> tuple[dict[str, int], list[str]]:
    """BigQuery's counts of the orders table, and what is wrong with them: each source
    key once, but the bad ones (``bad_rows``), none of which may be there; ``cdc``: the
    source's final state, key by key."""
    if schedule.workload == "cdc":
        return _mirror_problems(client, schedule, table)
    bad = schedule.bad_keys()
    actual = table_aggregate(client, table, KEY)
    good = sorted(set(range(schedule.rows)) - set(bad))
    if schedule.workload in OVERWRITE_WORKLOADS:  # with the old rows it keeps, each once
        _, kept = old_keys(dynamic=schedule.workload == "overwrite_dynamic")
        good += list(kept)
    problems = compare_keys(KeyAggregate.of(good), actual)
    if bad:
        problems += bad_keys_problems(table, keys_present(client, table, KEY, bad))
    return {"rows": actual.rows, "distinct_keys": actual.distinct}, problems


def _mirror_problems(
    client: bigquery.Client, schedule: Schedule, table: str
) -> tuple[dict[str, int], list[str]]:
    """``cdc``: the mirror compared with the source's final state, key by key."""
    changes = change_tables(
        schedule.rows, schedule.files, changes_seed(schedule), apart=schedule.files_per_batch
    )
    expected = final_state(changes)
    changed = {k for t in changes for k in t.column("customer_id").to_pylist()}
    view = compare_mirror(expected, table_rows(client, table), sorted(changed - set(expected)))
    return view.counts(), mirror_problems(table, view)


def _dead_letter_problems(
    client: bigquery.Client, schedule: Schedule, table: str, run_id: str
) -> tuple[dict[str, int], list[str]]:
    """``bad_rows``: BigQuery's counts of the dead-letter table for the run and the
    table, and what is wrong with them: each bad key once, nothing else."""
    bad = schedule.bad_keys()
    where = dead_letter_table(table)
    view = dead_letter_view(client, where, run_id=run_id, target=table, column=BAD_COLUMN)
    problems = dead_letter_problems(KeyAggregate.of(bad), view, table=where, column=BAD_COLUMN)
    counts = {
        "bad_rows": len(bad),
        "dead_letter_rows": view.ours.rows,
        "dead_letter_distinct_keys": view.ours.distinct,
        "dead_letter_other_rows": view.rows - view.ours.rows,
    }
    return counts, problems


def _ledger_problems(
    schedule: Schedule, table: str, work: Path, bucket: BucketLedger | None
) -> tuple[dict[str, Any], list[str]]:
    """Where the ledger was and what it held for the orders table, and what is wrong
    with it: none there, rows other than BigQuery must hold, or (in a bucket) records on
    this disk too. The at-least-once baseline load is not judged by its ledger; ``cdc``,
    at least once too, is: its batches are recorded as any (intent, then committed, each
    partition's changes counted once) and its sequence bases live beside them."""
    on_disk = disk_ledger(schedule, work)
    where = on_disk if bucket is None else bucket.url
    said: dict[str, Any] = {"store": schedule.store, "where": where}
    good = schedule.rows - len(schedule.bad_keys())
    try:
        view = ledger_view(where, table)
        said |= {"writes": view.writes, "rows": view.rows}
        if not traits_of(schedule.mode).exactly_once and schedule.workload != "cdc":
            return said, []
        return said, ledger_problems(view, good, not_at=None if bucket is None else on_disk)
    except LedgerError as exc:  # unreadable after the faults: a finding, not a crash
        return said, [f"the ledger at {where} cannot be read: {exc}"]


def _control_plane_problems(
    schedule: Schedule, stack: ChaosStack, run_id: str
) -> tuple[dict[str, Any], list[str]]:
    """What the control plane says of the run, and what is wrong with it: it must say
    succeeded with every row committed (but the bad ones, which were set aside)."""
    good = schedule.rows - len(schedule.bad_keys())
    view = control_plane_view(stack.url, stack.tokens["viewer"], run_id, good)
    said = {
        "run_id": run_id,
        "status": view.status,
        "rows_committed": view.rows_committed,
        "attempts": view.attempts,
        "write_requests": view.write_requests,
    }
    return said, view.problems


def _fresh_tables(client: bigquery.Client, schedule: Schedule) -> str:
    """Create the schedule's orders table (and summary table) anew; the orders table."""
    table = f"{client.project}.{DATASET}.{schedule.name.replace('-', '_')}"
    client.delete_table(table, not_found_ok=True)
    schema = BAD_ROWS_SCHEMA if schedule.workload == "bad_rows" else ORDER_SCHEMA
    if schedule.workload in OVERWRITE_WORKLOADS:  # old rows the run must replace
        dynamic = schedule.workload == "overwrite_dynamic"
        create_seeded(client, table, schema, dynamic=dynamic)
    elif schedule.workload == "cdc":
        create_keyed(client, table)
    else:
        client.create_table(bigquery.Table(table, schema=schema))
    if schedule.workload == "bad_rows":  # the sink creates it (onceover_jobs.sink.rows.dead_letter)
        client.delete_table(dead_letter_table(table), not_found_ok=True)
    summary_schema = SUMMARY_SCHEMAS.get(schedule.workload)
    if summary_schema is not None:
        client.delete_table(f"{table}_summary", not_found_ok=True)
        client.create_table(bigquery.Table(f"{table}_summary", schema=summary_schema))
    return table


def _run_problems(runs: list[JobRun]) -> list[str]:
    """Liveness: the last run finished, and no run or racing driver hung."""
    problems: list[str] = []
    if runs[-1].hung:
        problems.append(f"run {len(runs)} hung: killed after {JOB_TIMEOUT_S:.0f} s")
    elif runs[-1].exit_code != 0:
        problems.append(
            f"the job did not finish in {len(runs)} runs (last exit status {runs[-1].exit_code})"
        )
    problems += [
        f"the racing driver of run {n} hung: killed after {JOB_TIMEOUT_S:.0f} s"
        for n, run in enumerate(runs, 1)
        if run.racer is not None and run.racer.hung
    ]
    return problems


def _job_environment(
    schedule: Schedule,
    stack: ChaosStack,
    proxy: FaultProxy,
    work: Path,
    bucket: BucketLedger | None,
) -> dict[str, str]:
    through_proxy = BigQueryConfig(
        stack.bigquery.rest_endpoint, proxy.endpoint, stack.bigquery.project
    )
    env = job_environment(through_proxy)
    for name in (FAILPOINTS_ENV, FAILPOINTS_STATE_ENV, FAILPOINTS_SEED_ENV):
        env.pop(name, None)
    spec = schedule.failpoint_spec()
    if spec:
        env[FAILPOINTS_ENV] = spec
    env[FAILPOINTS_STATE_ENV] = str(work / "failpoints")
    env[FAILPOINTS_SEED_ENV] = f"{schedule.seed}:{schedule.index}"
    env["ONCEOVER_SPOOL_DIR"] = str(work / "spool")
    # foreachBatch writes name no ledger: the variable is where a user's session puts it
    env[LEDGER_ENV] = str(work / "ledger") if bucket is None else bucket.url
    if bucket is not None:
        env.update(bucket.environment)  # as a user exports them for the driver
    env["ONCEOVER_HEARTBEAT_S"] = "2"
    env[MONITOR_URL_ENV] = stack.url
    env[MONITOR_TOKEN_ENV] = stack.tokens["ingest"]
    env["ONCEOVER_LOG_FORMAT"] = "text"
    return with_quick_jvm(env)  # a chaos run is short: the JVM's start-up is much of it


def _run_job(  # noqa: PLR0917 - one call site, every argument named there
    schedule: Schedule,
    argv: list[str],
    cwd: Path | None,
    work: Path,
    env: dict[str, str],
    attempt: int,
    job_started: threading.Event,
    abort: threading.Event,
) -> JobRun:
    log = work / f"run-{attempt}.log"
    directory = None if cwd is None else str(cwd)
    child = ChildProcess(f"run {attempt + 1}", argv, env=env, log_path=log, cwd=directory)
    racer = _Racer(schedule, argv, env, work / f"racer-{attempt}.log")
    if abort.is_set():
        raise ScheduleInterruptedError(schedule.name)
    started = time.monotonic()
    popen = child.start()
    job_started.set()
    try:
        while (code := popen.poll()) is None:
            if abort.wait(0.2):
                child.stop(grace_s=5)
                raise ScheduleInterruptedError(schedule.name)
            racer.start_when_due(started)
            if time.monotonic() - started > JOB_TIMEOUT_S:
                child.stop(grace_s=5)
                return JobRun(None, time.monotonic() - started, hung=True, racer=racer.stop())
        child.stop()  # closes the log
        return JobRun(code, time.monotonic() - started, racer=racer.wait(abort))
    finally:
        racer.stop()


class _Racer:
    """``racing_drivers``: the same job on the same checkpoint, started ``racer_at_s``
    into the run while the first still runs; its outcome is reported, not judged (a
    refusal, a takeover of a first driver a fault killed, or a fault of its own are all
    fair), but it must end, and every row is counted in BigQuery after it."""

    def __init__(self, schedule: Schedule, argv: list[str], env: dict[str, str], log: Path):
        self.at_s = schedule.racer_at_s
        self.child = ChildProcess(f"racer of {log.stem}", argv, env=env, log_path=log)
        self.started: float | None = None
        self.run: RacerRun | None = None

    def start_when_due(self, origin: float) -> None:
        if self.at_s is None or self.started is not None:
            return
        if time.monotonic() - origin >= self.at_s:
            self.started = time.monotonic()
            self.child.start()
            self.run = RacerRun(None, round(self.started - origin, 1))

    def wait(self, abort: threading.Event) -> RacerRun | None:
        if self.run is None or self.started is None:
            return None
        popen = self.child.popen
        assert popen is not None
        while (code := popen.poll()) is None:
            if abort.wait(0.2):
                raise ScheduleInterruptedError("racing driver")
            if time.monotonic() - self.started > JOB_TIMEOUT_S:
                self.run.hung = True
                return self.stop()
        self.run.exit_code = code
        return self.stop()

    def stop(self) -> RacerRun | None:
        if self.started is not None:
            self.child.stop(grace_s=5)
        return self.run


@contextlib.contextmanager
def _outages(
    schedule: Schedule, stack: ChaosStack, outcomes: dict[int, FaultOutcome]
) -> Iterator[threading.Event]:
    """Take the control plane down for each outage fault, timed from the job's first start."""
    job_started = threading.Event()
    done = threading.Event()

    def timeline() -> None:
        if not job_started.wait(JOB_TIMEOUT_S):
            return
        origin = time.monotonic()
        for fault in sorted(schedule.outages(), key=lambda f: f.at_s):
            if done.wait(max(0.0, origin + fault.at_s - time.monotonic())):
                return  # the job finished first: this outage never happened
            stack.outage(fault.for_s, done)
            outcome = outcomes[id(fault)]
            outcome.fired += 1
            outcome.details.append(f"down at {fault.at_s:.1f} s for {fault.for_s:.1f} s")

    thread = threading.Thread(target=timeline, name="chaos-outages", daemon=True)
    thread.start()
    try:
        yield job_started
    finally:
        done.set()
        job_started.set()
        thread.join()


def _count_wire_faults(
    schedule: Schedule, proxy: FaultProxy, outcomes: dict[int, FaultOutcome]
) -> None:
    for fault in schedule.faults:
        wire = fault.wire_fault()
        if wire is None:
            continue
        for fired in proxy.fired:
            if fired.fault != wire:
                continue
            if fired.detail:
                outcomes[id(fault)].details.append(fired.detail)
            # A kill counts only when a worker died: its process may be gone already.
            if fault.kind != "spark/kill_task" or fired.detail.startswith(KILLED):
                outcomes[id(fault)].fired += 1


def _count_failpoints(schedule: Schedule, state: Path, outcomes: dict[int, FaultOutcome]) -> None:
    log = state / "fired.log"
    lines = log.read_text().splitlines() if log.exists() else []
    for fault in schedule.faults:
        if not fault.kind.startswith("failpoint/"):
            continue
        _, point, action = fault.kind.split("/")
        for line in lines:
            match = _FIRED_RE.search(line)
            if match and match["point"] == point and match["action"] == action:
                outcomes[id(fault)].fired += 1
                outcomes[id(fault)].details.append(f"hit {match['hit']}")


def job_argv(schedule: Schedule, table: str, work: Path, *, ledger: str | None = None) -> list[str]:
    """The command of the schedule's workload; the same for every restart. ``ledger``: a
    bucket's URL for the ledger, where the job keeps it on this disk otherwise
    (:func:`disk_ledger`); foreach_batch takes it from ``$ONCEOVER_LEDGER``, as the
    users' writes inside foreachBatch name none."""
    common = [
        "--source", str(work / "source"), "--table", table, "--mode", schedule.mode,
        "--request-max-bytes", str(schedule.request_max_bytes),
    ]  # fmt: skip
    if schedule.workload == "foreach_batch":
        return [
            sys.executable, "-m", "onceover_jobs.examples.foreach_batch", *common,
            "--summary-table", f"{table}_summary", "--checkpoint", str(work / "checkpoint"),
            "--max-files-per-trigger", str(schedule.files_per_batch),
        ]  # fmt: skip
    if schedule.workload in OVERWRITE_WORKLOADS:
        dynamic = ["--dynamic"] if schedule.workload == "overwrite_dynamic" else []
        return [
            sys.executable, "-m", "onceover_jobs.examples.nightly_overwrite", *common,
            "--ledger", ledger or str(work / "ledger"), "--run-id", f"chaos-{schedule.name}",
            *dynamic,
        ]  # fmt: skip
    if schedule.workload == "cdc":  # writeAtLeastOnce: no --mode
        cdc = [
            sys.executable, "-m", "onceover_jobs.examples.cdc_mirror",
            "--source", str(work / "source"), "--format", CDC_FORMAT, "--table", table,
            "--checkpoint", str(work / "checkpoint"),
            "--max-files-per-trigger", str(schedule.files_per_batch),
            "--request-max-bytes", str(schedule.request_max_bytes),
        ]  # fmt: skip
        return cdc if ledger is None else [*cdc, "--ledger", ledger]
    if schedule.workload == "two_tables":
        return [
            sys.executable, "-m", "onceover_jobs.examples.daily_tables", *common,
            "--summary-table", f"{table}_summary", "--ledger", ledger or str(work / "ledger"),
            "--run-id", f"chaos-{schedule.name}",
        ]  # fmt: skip
    load = [
        sys.executable, "-m", "onceover_jobs.load_files", *common, "--format", "json", "--key", KEY,
        "--checkpoint", str(work / "checkpoint"), "--job", job_name(schedule),
        "--max-files-per-trigger", str(schedule.files_per_batch),
    ]  # fmt: skip
    if ledger is not None:
        load += ["--ledger", ledger]
    if schedule.workload == "bad_rows":
        return [*load, "--dead-letter", dead_letter_table(table)]
    return load


def disk_ledger(schedule: Schedule, work: Path) -> str:
    """Where the schedule's job keeps its ledger on this disk when given no bucket: the
    users' jobs in ``work/ledger`` (``--ledger``, ``$ONCEOVER_LEDGER``), the load job in
    its checkpoint."""
    if schedule.workload in SUMMARY_SCHEMAS or schedule.workload in OVERWRITE_WORKLOADS:
        return str(work / "ledger")  # the users' jobs
    return ledger_root(work / "checkpoint")


def dead_letter_table(table: str) -> str:
    """``bad_rows``: where the job sets aside the rows BigQuery refuses for ``table``."""
    return f"{table}_dead_letters"


def job_name(schedule: Schedule) -> str:
    """The load job's ``--job`` (its Spark application is ``onceover-<job>``)."""
    return f"chaos-{schedule.name}"
