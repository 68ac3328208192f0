"""A chaos session: schedules run in lanes on one local BigQuery, a report after each.

Each lane has a control plane of its own and runs its schedules one after another
(the lanes share the object-store stand-ins, started for the first schedule whose
ledger is in a bucket);
``parallel`` lanes run side by side (a Spark job spends much of its time in one
single-threaded Python process, so two lanes nearly double the rate on two cores).
The report is rewritten after every schedule, so a session stopped part-way still
leaves one, and a drawn session started again in the same directory resumes from it
(:func:`resume`): the schedules it judged are kept, not run again, and the others are
run from the start. A violation is printed the moment it is found, with its seed, its
schedule and the command that replays it.
"""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TextIO

from onceover.bigquery import BigQueryConfig
from onceover_tools.chaos.on_cluster import start_cluster
from onceover_tools.chaos.report import (
    Judged,
    Session,
    discard_report,
    judged_before,
    now,
    refuse_drawn_report,
    replay_command,
    write_report,
)
from onceover_tools.chaos.runner import (
    ChaosStack,
    ScheduleInterruptedError,
    ScheduleResult,
    run_schedule,
)
from onceover_tools.chaos.schedule import Schedule
from onceover_tools.chaos.stores import StandIns
from onceover_tools.spark_cluster import SparkCluster


def resume(
    session: Session, schedules: Sequence[Schedule], report_dir: Path, *, fresh: bool = False
) -> Judged:
    """What ``session`` judged already in ``report_dir``, to be kept and not run again.

    ``fresh`` discards the report there (and its schedules' work) first. Only a drawn
    session resumes: a curated or replayed one starts over (its report replaced once a
    schedule is judged), refused where a drawn session's report is. Refused too
    (:class:`~onceover_tools.chaos.report.ReportMismatchError`) where the report there
    is of a session drawn with other arguments.
    """
    if fresh:
        discard_report(report_dir)
    if session.drawn:
        return judged_before(report_dir, session, schedules)
    refuse_drawn_report(report_dir, session)
    return Judged({}, now(), 0.0, [])


def run_session(
    session: Session,
    schedules: Sequence[Schedule],
    bigquery: BigQueryConfig,
    report_dir: Path,
    out: TextIO,
    *,
    tokens: dict[str, str],
    parallel: int = 1,
    judged: Judged | None = None,
) -> list[ScheduleResult]:
    """Run every schedule not ``judged`` already, print progress to ``out``, keep the
    report in ``report_dir`` (the judged results in it, counted in its totals)."""
    sitting = _Sitting()
    earlier = judged or Judged({}, sitting.started_at, 0.0, [])
    results: dict[int, ScheduleResult] = dict(earlier.results)
    to_run = _not_judged(schedules, earlier, report_dir / "work")
    if not to_run:
        return [results[n] for n in sorted(results)]
    lock = threading.Lock()
    lanes: queue.Queue[ChaosStack] = queue.Queue()
    cluster = _cluster_for([s for _, s in to_run], report_dir / "work" / "cluster", out)
    stores = StandIns(report_dir / "work")  # started only for a schedule in a bucket
    stacks = [
        ChaosStack(bigquery, report_dir / "work", tokens, lane, cluster=cluster, stores=stores)
        for lane in range(max(1, min(parallel, len(to_run))))
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
            _keep(report_dir, session, results, earlier, sitting)

    try:
        for stack in stacks:
            lanes.put(stack.start())
        with ThreadPoolExecutor(len(stacks), thread_name_prefix="chaos-lane") as pool:
            futures = [pool.submit(run_one, number, schedule) for number, schedule in to_run]
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


def _not_judged(
    schedules: Sequence[Schedule], earlier: Judged, work: Path
) -> list[tuple[int, Schedule]]:
    """The schedules to run, by number: those without a verdict, each one's work directory
    removed (left by a sitting stopped part-way through it, maybe: run from the start)."""
    to_run = [(n, s) for n, s in enumerate(schedules, 1) if n not in earlier.results]
    for _, schedule in to_run:
        shutil.rmtree(work / schedule.name, ignore_errors=True)
    return to_run


@dataclass(frozen=True)
class _Sitting:
    """One run of ``onceover chaos``: a resumed session is several."""

    started_at: datetime = field(default_factory=now)
    started: float = field(default_factory=time.monotonic)


def _keep(
    report_dir: Path,
    session: Session,
    results: dict[int, ScheduleResult],
    earlier: Judged,
    sitting: _Sitting,
) -> None:
    """Write the report: every result by its number, the earlier sittings' and this one's."""
    seconds = time.monotonic() - sitting.started
    this = {
        "started_at": sitting.started_at.isoformat(),
        "seconds": round(seconds, 1),
        "judged": len(results) - len(earlier.results),
    }
    first = earlier.started if earlier.sittings else sitting.started_at
    write_report(
        report_dir, session, [results[n] for n in sorted(results)], first,
        earlier.seconds + seconds, sittings=[*earlier.sittings, this],
    )  # fmt: skip


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
