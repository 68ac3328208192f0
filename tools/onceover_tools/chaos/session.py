"""A chaos session: schedules run in lanes on one local BigQuery, a report after each.

Each lane has a control plane of its own and runs its schedules one after another
(the lanes share the object-store stand-ins, started for the first schedule whose
ledger is in a bucket);
``parallel`` lanes run side by side (a Spark job spends much of its time in one
single-threaded Python process, so two lanes nearly double the rate on two cores).
The report is rewritten after every schedule, so a session stopped part-way still
leaves one. A violation is printed the moment it is found, with its seed, its
schedule and the command that replays it.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from onceover.bigquery import BigQueryConfig
from onceover_tools.chaos.on_cluster import start_cluster
from onceover_tools.chaos.report import Session, now, replay_command, write_report
from onceover_tools.chaos.runner import (
    ChaosStack,
    ScheduleInterruptedError,
    ScheduleResult,
    run_schedule,
)
from onceover_tools.chaos.schedule import Schedule
from onceover_tools.chaos.stores import StandIns
from onceover_tools.spark_cluster import SparkCluster


def run_session(
    session: Session,
    schedules: Sequence[Schedule],
    bigquery: BigQueryConfig,
    report_dir: Path,
    out: TextIO,
    *,
    tokens: dict[str, str],
    parallel: int = 1,
) -> list[ScheduleResult]:
    """Run every schedule, print progress to ``out``, keep the report in ``report_dir``."""
    started_at = now()
    started = time.monotonic()
    results: dict[int, ScheduleResult] = {}
    lock = threading.Lock()
    lanes: queue.Queue[ChaosStack] = queue.Queue()
    cluster = _cluster_for(schedules, report_dir / "work" / "cluster", out)
    stores = StandIns(report_dir / "work")  # started only for a schedule in a bucket
    stacks = [
        ChaosStack(bigquery, report_dir / "work", tokens, lane, cluster=cluster, stores=stores)
        for lane in range(max(1, min(parallel, len(schedules))))
    ]
    width = len(str(len(schedules)))
    abort = threading.Event()

    def say(text: str) -> None:
        with lock:
            print(text, file=out, flush=True)

    def run_one(number: int, schedule: Schedule) -> None:
        stack = lanes.get()
        try:
            say(
                f"[{number:>{width}}/{len(schedules)}] {schedule.name} {schedule.workload} "
                f"{schedule.mode} ({schedule.store}): "
                + ("; ".join(f.describe for f in schedule.faults) or "no faults")
            )
            try:
                result = run_schedule(schedule, stack, abort=abort)
            except ScheduleInterruptedError:
                say(f"{'':>{2 * width + 3}} {schedule.name} stopped part-way: no verdict")
                return
        finally:
            lanes.put(stack)
        fired = sum(1 for o in result.faults if o.fired)
        say(
            f"{'':>{2 * width + 3}} {schedule.name} {'ok' if result.ok else 'VIOLATION'}: "
            f"{fired}/{len(result.faults)} faults fired, {result.restarts} restarts, "
            f"{result.bigquery.get('rows', 0):,} rows, {result.seconds:.0f} s"
        )
        with lock:
            if not result.ok:
                _print_violation(result, out)
            results[number] = result
            done = [results[n] for n in sorted(results)]
            write_report(report_dir, session, done, started_at, time.monotonic() - started)

    try:
        for stack in stacks:
            lanes.put(stack.start())
        with ThreadPoolExecutor(len(stacks), thread_name_prefix="chaos-lane") as pool:
            futures = [
                pool.submit(run_one, number, schedule)
                for number, schedule in enumerate(schedules, 1)
            ]
            try:
                for future in futures:
                    future.result()
            except KeyboardInterrupt:
                # Stop the jobs now rather than after every queued schedule; the report
                # keeps the schedules that finished.
                abort.set()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        for stack in stacks:
            stack.stop()
        stores.stop()
        if cluster is not None:
            cluster.stop()
    return [results[n] for n in sorted(results)]


def _cluster_for(schedules: Sequence[Schedule], work: Path, out: TextIO) -> SparkCluster | None:
    """A standalone cluster started for the session's ``cluster`` schedules, if any."""
    if not any(schedule.workload == "cluster" for schedule in schedules):
        return None
    print("Starting a standalone Spark cluster (a master, two workers)...", file=out)
    return start_cluster(work)


def _print_violation(result: ScheduleResult, out: TextIO) -> None:
    schedule = result.schedule
    print(f"VIOLATION in {schedule.name} (seed {schedule.seed}, mode {schedule.mode}):", file=out)
    for violation in result.violations:
        print(f"  - {violation}", file=out)
    print(f"  schedule: {json.dumps(schedule.to_json())}", file=out)
    print(f"  replay:   {replay_command(result)}", file=out)
    print(f"  logs:     {result.work_dir}", file=out, flush=True)
