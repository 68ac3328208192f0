"""One soak, top to bottom: the stack, the query, faults on a clock, samples, the stop
and the drain, the verdict, the report.

The stack: where the query writes (:mod:`onceover_tools.soak.target`: the local BigQuery
behind the gRPC fault proxy, or real BigQuery behind the soak's CONNECT proxy) and a
control plane (SQLite) the query's events go to. The query is restarted at once whenever
it ends before its time (a fault killed or failed it), on the same checkpoint, as an
orchestrator's restart policy does.
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import httpx
from google.cloud import bigquery
from onceover_backend.commands import development_tokens
from onceover_jobs.examples.rate_stream import KEY, field_name
from onceover_jobs.sink.failpoints import ENV as FAILPOINTS_ENV
from onceover_jobs.sink.failpoints import STATE_ENV as FAILPOINTS_STATE_ENV

from onceover.bigquery import BigQueryConfig
from onceover.job_env import MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover.processes import job_environment
from onceover_tools.chaos.verify import control_plane_view
from onceover_tools.soak.chart import draw
from onceover_tools.soak.faults import Faults
from onceover_tools.soak.job import SoakJob
from onceover_tools.soak.plan import SoakPlan
from onceover_tools.soak.report import SoakReport, sample_line, write_report
from onceover_tools.soak.sampler import Sampler, batches_committed
from onceover_tools.soak.shapes import Shape
from onceover_tools.soak.target import LOCAL, Target, control_plane_streams, open_target
from onceover_tools.soak.verdict import (
    Verdict,
    judge_flatness,
    judge_ledger,
    judge_streams,
    judge_table,
)
from onceover_tools.stack import BackendProcess

TICK_S = 0.5
FIRST_COMMIT_TIMEOUT_S = 300.0
"""The query's first micro-batch must be committed within this (a JVM's start, the
table's first stream); else the soak stops: something is wrong before any fault."""
CONTROL_PLANE_WAIT_S = 15.0
"""After the drain, how long the control plane may take to count the table's rows (its
ingest lag is under a second in the runs of record)."""
MAX_UNPLANNED_RESTARTS = 5
"""Restarts of a query that ended when no fault of the soak's ended it: beyond these
the soak stops and fails (a query that cannot run would otherwise restart for an hour)."""


def _schema(shape: Shape) -> list[bigquery.SchemaField]:
    return [
        bigquery.SchemaField(KEY, "INT64"),
        bigquery.SchemaField("event_time", "TIMESTAMP"),
        *(bigquery.SchemaField(field_name(i), "STRING") for i in range(shape.fields)),
    ]


def _fresh_table(client: bigquery.Client, table: str, shape: Shape) -> None:
    """The soak's table, empty (the dataset made if it is missing)."""
    client.create_dataset(table.rsplit(".", 1)[0], exists_ok=True)
    client.delete_table(table, not_found_ok=True)
    client.create_table(bigquery.Table(table, schema=_schema(shape)))


def _environment(
    bigquery_config: BigQueryConfig, work: Path, control_url: str, tokens: dict[str, str]
) -> dict[str, str]:
    env = job_environment(bigquery_config)
    env.pop(FAILPOINTS_ENV, None)  # nothing armed ahead: the soak arms each on time
    env[FAILPOINTS_STATE_ENV] = str(work / "failpoints")
    env["ONCEOVER_SPOOL_DIR"] = str(work / "spool")
    env[MONITOR_URL_ENV] = control_url
    env[MONITOR_TOKEN_ENV] = tokens["ingest"]
    env["ONCEOVER_LOG_FORMAT"] = "text"
    return env


def run_soak(plan: SoakPlan, command: str, out: TextIO) -> SoakReport:
    """Run the soak of ``plan``; its report (written to ``plan.report_dir`` as it goes)."""
    report = SoakReport(
        command=command, shape=plan.shape, mode=plan.mode_name, mode_option=plan.mode,
        crash_every_s=plan.crash_every_s, partitions=plan.partitions,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )  # fmt: skip
    work = plan.report_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if plan.data_dir is not None:
        shutil.rmtree(plan.data_dir, ignore_errors=True)
        plan.data_dir.mkdir(parents=True)
    print(
        f"Soak: {plan.shape.describe()}; mode {plan.mode_name}; report in {plan.report_dir}",
        file=out,
        flush=True,
    )
    tokens = development_tokens()  # new ones each call: the backend's and the soak's
    with (
        open_target(
            plan.bigquery, dataset=plan.dataset, options=dict(plan.options),
            data_dir=plan.data_dir, work=work,
        ) as target,
        BackendProcess(
            database_url=f"sqlite:///{(work / 'control-plane.db').resolve()}",
            bigquery=target.direct,
            tokens=tokens,
            log_path=work / "control-plane.log",
        ) as control,
    ):  # fmt: skip
        report.bigquery, report.table = target.describe, target.table
        print(f"Writing to {target.table} in {target.describe}", file=out, flush=True)
        _Soak(plan, report, target, (control, tokens), work, out).run()
    write_report(report, plan.report_dir)
    return report


class SoakFailedError(RuntimeError):
    """The soak could not go on (no first commit, a query that keeps ending, a drain
    that does not end): the verdict says so, beside what BigQuery holds."""


class _Soak:
    def __init__(  # noqa: PLR0917 - one call site, every argument named there
        self,
        plan: SoakPlan,
        report: SoakReport,
        target: Target,
        control_plane: tuple[BackendProcess, dict[str, str]],
        work: Path,
        out: TextIO,
    ) -> None:
        control, tokens = control_plane
        self.plan, self.report, self.control, self.work, self.out = (
            plan, report, control, work, out,
        )  # fmt: skip
        self.client, self.table = target.client, target.table
        _fresh_table(self.client, self.table, plan.shape)
        self.origin = time.monotonic()
        env = _environment(target.job_bigquery, work, control.url, tokens)
        self.job = SoakJob(
            shape=plan.shape, mode=plan.mode, table=self.table, work=work, env=env,
            partitions=plan.partitions, request_max_bytes=plan.request_max_bytes,
            sink_options=target.sink_options, origin=self.origin,
        )  # fmt: skip
        self.faults = Faults(
            kinds=plan.fault_kinds, every_s=plan.crash_every_s, mode=plan.mode_name,
            proxy=target.proxy, job=self.job, state=work / "failpoints",
        )  # fmt: skip
        self.viewer = tokens["viewer"]
        streams = target.streams or control_plane_streams(control.url, self.viewer)
        self.sampler = Sampler(
            job=self.job, proxy=target.proxy, client=self.client, streams=streams,
            table=self.table, control_plane=(control.url, self.viewer), spool=work / "spool",
            bigquery_pid=target.bigquery_pid,
            data_dir=plan.data_dir if plan.bigquery == LOCAL else None,
        )  # fmt: skip
        report.runs, report.faults = self.job.runs, self.faults.done
        report.samples = self.sampler.samples
        self.unplanned = 0
        self.first_commit_s: float | None = None
        """The soak's time runs from here: the source has made at least the shape's rows
        (rate x minutes) by the end, however long the first JVM took to start."""

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def now(self) -> float:
        return time.monotonic() - self.origin

    def run(self) -> None:
        try:
            self._query()
            self._stop_and_drain()
        except SoakFailedError as exc:
            self.say(f"FAILED: {exc}")
            self.report.seconds = self.report.seconds or self.now()
            self.report.verdict = judge_table(
                self.client, self.table, self.plan.shape, self.job.checkpoint
            )
            self.report.verdict.problems.insert(0, str(exc))
            return
        finally:
            self.job.close()
        self._judge()
        title = f"{self.plan.shape.describe()}, {self.plan.mode_name}"
        chart = draw(self.report.samples, self.report.faults, title,
                     self.plan.report_dir / "soak-chart.png")  # fmt: skip
        self.report.chart = str(chart)

    def _ends(self) -> float:
        """Seconds into the soak when its time is up (not known before the first commit)."""
        if self.first_commit_s is None:
            return float("inf")
        return self.first_commit_s + self.plan.shape.minutes * 60

    def _query(self) -> None:
        """The query for the soak's time: restarted when it ends, faults, samples."""
        self.job.start()
        next_sample = 0.0
        while (now := self.now()) < self._ends():
            self._restart_if_ended(now)
            commits = batches_committed(self.job.checkpoint)
            if commits and self.first_commit_s is None:
                self.first_commit_s = self.report.first_commit_s = now
            if commits == 0 and now > FIRST_COMMIT_TIMEOUT_S:
                raise SoakFailedError(
                    f"no micro-batch committed in {FIRST_COMMIT_TIMEOUT_S:.0f} s; "
                    f"see {self.work}/run-{self.job.runs[-1].number}.log"
                )
            armed = self.faults.tick(now, commits, self._ends())
            if armed is not None:
                self.say(f"  {now / 60:6.1f} min  fault {armed.number}: {armed.kind} "
                         f"{armed.detail}")  # fmt: skip
            if now >= next_sample:
                self.say(sample_line(self.sampler.take(now)))
                next_sample += self.plan.sample_every_s
                write_report(self.report, self.plan.report_dir)
            time.sleep(TICK_S)

    def _restart_if_ended(self, now: float) -> None:
        if not self.job.ended():
            return
        last = self.job.runs[-1]
        if not any(
            f.fired_s is not None and f.fired_s >= last.started_s - TICK_S for f in self.faults.done
        ):
            self.unplanned += 1
        if self.unplanned > MAX_UNPLANNED_RESTARTS:
            raise SoakFailedError(
                f"the query ended {self.unplanned} times with no fault of the soak's; "
                f"see {self.work}/run-{last.number}.log"
            )
        self.say(f"  {now / 60:6.1f} min  run {last.number} ended ({last.ended_by}, status "
                 f"{last.exit_code}); starting run {last.number + 1}")  # fmt: skip
        self.job.start()

    def _stop_and_drain(self) -> None:
        self.faults.disarm()
        self.report.seconds = self.now()
        self.say(f"  {self.report.seconds / 60:6.1f} min  time is up: the query stops, "
                 "then runs once more to the source's present (the drain)")  # fmt: skip
        self.job.stop()
        drained = time.monotonic()
        run = self.job.drain(self.plan.drain_timeout_s)
        self.report.drain_s = round(time.monotonic() - drained, 1)
        self.faults.follow(self.now(), batches_committed(self.job.checkpoint))
        self.say(sample_line(self.sampler.take(self.now())))
        if run.ended_by != "drained":
            raise SoakFailedError(
                f"the drain ended {run.ended_by}; see {self.work}/run-{run.number}.log"
            )

    def _judge(self) -> None:
        plan, report = self.plan, self.report
        verdict = judge_table(self.client, self.table, plan.shape, self.job.checkpoint)
        report.verdict = verdict
        judge_ledger(verdict, self.job.ledger, self.table, plan.mode_name)
        # the quarters, and the warm-up (the first), of the time from the first commit on
        began = self.first_commit_s or 0.0
        starts = [run.started_s for run in self.job.runs]
        judge_flatness(verdict, report.samples, report.seconds, began, starts)
        warm = began + (report.seconds - began) / 4
        late = sum(f.fired_s is not None and f.fired_s >= warm for f in report.faults)
        judge_streams(
            verdict, report.samples, warm, report.seconds, plan.mode_name, plan.partitions, late
        )
        for fault in report.faults:
            if fault.missed:
                verdict.problems.append(f"fault {fault.number} ({fault.kind}) never fired")
            elif fault.first_commit_s is None and not fault.disarmed:
                verdict.problems.append(
                    f"after fault {fault.number} ({fault.kind}) no micro-batch was committed"
                )
        self._judge_control_plane(verdict)

    def _judge_control_plane(self, verdict: Verdict) -> None:
        """The control plane knows the query as one run (every restart an attempt of it)
        and counts the table's rows committed."""
        answer = httpx.get(
            f"{self.control.url}/api/runs",
            params={"table": self.table},
            headers={"Authorization": f"Bearer {self.viewer}"},
            timeout=30,
        )
        answer.raise_for_status()
        runs = [run["run_id"] for run in answer.json()["data"]]
        if len(runs) != 1:
            verdict.problems.append(f"the control plane knows {len(runs)} runs of the query")
            if not runs:
                return
        run_id = runs[0]
        # Its status is not judged: a streaming query stopped cleanly stays `running`.
        view = control_plane_view(
            self.control.url, self.viewer, run_id, verdict.rows, CONTROL_PLANE_WAIT_S, status=None
        )
        self.report.control_plane = {
            "run_id": run_id,
            "status": view.status,
            "rows_committed": view.rows_committed,
            "attempts": view.attempts,
            "write_requests": view.write_requests,
        }
        if view.rows_committed != verdict.rows:
            verdict.problems.append(
                f"the control plane counts {view.rows_committed} rows committed; the table "
                f"holds {verdict.rows:,}"
            )
