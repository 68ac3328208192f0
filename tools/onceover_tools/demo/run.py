"""``onceover demo``'s steps in order, the stack around them, then serving until stopped."""

from __future__ import annotations

import shutil
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from onceover_jobs.generate import write_files

from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig
from onceover.job_env import MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover_tools.demo import stories
from onceover_tools.demo.alerting import alerts_delivered
from onceover_tools.demo.control_plane import ControlPlane
from onceover_tools.demo.loads import (
    CLEAN,
    CRASHED,
    DATASET,
    FILES,
    LOADS,
    TAMPERED,
    UNDER_FAULTS,
    Load,
    LoadJob,
)
from onceover_tools.demo.progress import Steps
from onceover_tools.demo.receiver import WebhookReceiver
from onceover_tools.demo.tables import create_dataset
from onceover_tools.localbq import LocalBigQueryProcess
from onceover_tools.stack import BackendProcess, check_children

STEPS = 8
FAULTS_TITLE = "Run under dropped responses, an UNAVAILABLE burst and an offset gap"


def backend_settings(logs: Path) -> dict[str, str]:
    """The demo's backend: its files under ``logs``, alerts evaluated every second (not
    every 15 s), deliveries looked for twice a second, a failed delivery retried soon."""
    return {
        "ONCEOVER_DATA_DIR": str(logs.resolve()),  # resumed attempts' logs go there too
        "ONCEOVER_ALERT_EVAL_INTERVAL_S": "1",
        "ONCEOVER_WEBHOOK_POLL_S": "0.5",
        "ONCEOVER_WEBHOOK_BACKOFF_S": "1",
        "ONCEOVER_SPOOL_DIR": str((logs / "spool").resolve()),
    }


def run_demo(rows: int, logs: Path, tokens: dict[str, str], stop: threading.Event) -> int:
    """The whole demo; returns once ``stop`` is set after the dashboard is up."""
    started = time.monotonic()
    # The local BigQuery starts empty each time: checkpoints and the database must too.
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    steps = Steps(STEPS, logs)
    with ExitStack() as stack:
        with steps.step("Starting the local BigQuery and the backend") as step:
            bigquery = stack.enter_context(
                LocalBigQueryProcess(log_path=logs / "local-bigquery.log")
            )
            backend = stack.enter_context(
                BackendProcess(
                    bigquery=bigquery.config,
                    log_path=logs / "backend.log",
                    database_url=f"sqlite:///{logs.resolve() / 'onceover.db'}",
                    tokens=tokens,
                    settings=backend_settings(logs),
                )
            )
            step.done(f"BigQuery REST {bigquery.config.rest_endpoint}, backend {backend.url}")
        api = ControlPlane(backend.url, tokens["operator"], stop)
        stack.callback(api.close)

        title = f"Generating {rows:,} order events, loading them {len(LOADS)} times side by side"
        with steps.step(title) as step:
            monitor = {MONITOR_URL_ENV: backend.url, MONITOR_TOKEN_ENV: tokens["ingest"]}
            jobs = _start_loads(stack, rows, logs, bigquery.config, monitor)
            project = bigquery.config.project or LOCAL_PROJECT
            names = ",".join(load.name for load in LOADS)
            step.done(f"{FILES} JSON files; tables {project}.{DATASET}.orders_{{{names}}}")

        with steps.step("Clean run (onceover_jobs.load_files, pending mode)") as step:
            step.done(stories.clean(jobs[CLEAN], api, stop, rows))
        with steps.step(FAULTS_TITLE) as step:
            step.done(stories.under_faults(jobs[UNDER_FAULTS], api, stop, rows))
        with steps.step("Crashing a run at commit.after") as step:
            step.done(stories.crashed(jobs[CRASHED], api, stop))
        with steps.step("Reconciling") as step:
            step.done(stories.reconciled(jobs[CLEAN], jobs[TAMPERED], api, stop, rows))
        with steps.step("Alert rules, with webhooks to a local receiver") as step:
            receiver = stack.enter_context(WebhookReceiver())
            step.done(alerts_delivered(api, receiver, stop))
        with steps.step("Serving the dashboard") as step:
            step.done(f"ready in {time.monotonic() - started:.0f} s")

        crashed = jobs[CRASHED].run_id()
        print(
            f"Dashboard: {backend.url}/  (sign in with the operator token)\n"
            f"  operator token  {tokens['operator']}\n"
            f"  to resume       {backend.url}/runs/{crashed}  (the crashed run: press Resume)\n"
            f"  BigQuery REST   {bigquery.config.rest_endpoint}  "
            f"(gRPC {bigquery.config.grpc_endpoint})\n"
            f"  logs            {logs}\n"
            "Ctrl-C to stop.",
            flush=True,
        )
        while not stop.wait(0.5):
            check_children(bigquery.child, backend.child)
    print("Onceover demo stopped.", flush=True)
    return 0


def _start_loads(
    stack: ExitStack, rows: int, logs: Path, bigquery: BigQueryConfig, monitor: dict[str, str]
) -> dict[Load, LoadJob]:
    """The order files, and every load's job started on them (stopped when ``stack`` ends)."""
    source = logs / "orders"
    write_files(source, rows, FILES, "json")
    create_dataset(bigquery)
    jobs = {load: LoadJob(load, source, logs / "loads", bigquery, monitor) for load in LOADS}
    for job in jobs.values():
        stack.callback(job.stop)
        job.start()
    return jobs
