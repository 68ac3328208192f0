"""A user's own scripts with their ledger in a bucket, as on Dataproc, EMR or Databricks:
killed and crashed where they run, run again, counted in BigQuery. Each test uses one
store (the ledger's own tests run against every store: tests/sink/test_ledger_stores.py).

- ``writeStream`` (onceover_jobs/examples/stream_orders.py), its ledger in an S3 bucket
  and in a Cloud Storage bucket: SIGKILLed (driver, JVM and Python workers) three times
  at random points, then run to the end: every order once.
- ``foreachBatch`` (onceover_jobs/examples/foreach_batch.py), three writes a micro-batch,
  its ledger in S3: crashed right after BigQuery committed, then run again: every order
  once, one summary row a micro-batch.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_tools.chaos.runner import ORDER_SCHEMA
from onceover_tools.localstores import LocalGCS, LocalS3

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import BatchRecord, scope_records, scopes
from onceover.processes import job_environment
from tests.sink.test_streaming import counted

pytestmark = pytest.mark.spark

ROWS, FILES = 800, 4
KILLS = 3
RUN_TIMEOUT_S = 240.0


def run_to_the_end(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )


def kill_at_random(
    argv: list[str],
    env: dict[str, str],
    rest: bigquery.Client,
    table: str,
    rng: random.Random,
    log: Path,
) -> int:
    """Start the script, wait until it adds rows (or ends), then SIGKILL its whole process
    group a random moment later. Returns the rows BigQuery held before the kill."""
    before = counted(rest, table)[0]
    with (
        open(log, "a") as out,
        subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        ) as job,
    ):
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline and job.poll() is None:
            if counted(rest, table)[0] > before:
                break
            time.sleep(0.2)  # polling BigQuery for the condition, bounded by the deadline
        else:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                pytest.fail(f"no rows within {RUN_TIMEOUT_S} s: {log.read_text()[-3000:]}")
        if job.poll() is None:
            time.sleep(rng.uniform(0.0, 1.5))  # the fault's moment, not a synchronisation
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(60)
    return before


@pytest.mark.parametrize(("store", "mode"), [("s3", "buffered"), ("gcs", "pending")])
def test_write_stream_with_its_ledger_in_a_bucket_killed_three_times_lands_every_order_once(
    store: str,
    mode: str,
    request: pytest.FixtureRequest,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
) -> None:
    stand_in: LocalS3 | LocalGCS = request.getfixturevalue(f"local_{store}")
    bucket: str = request.getfixturevalue(f"{store}_bucket")
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source = tmp_path / "orders"
    write_files(source, ROWS, FILES, "json")
    ledger = f"{bucket}/ledgers"
    env = {**job_environment(bq_config), **stand_in.environment()}
    argv = [sys.executable, "-m", "onceover_jobs.examples.stream_orders", "--source",
            str(source), "--table", table, "--checkpoint", str(tmp_path / "checkpoint"),
            "--ledger", ledger, "--mode", mode]  # fmt: skip
    rng = random.Random(f"{store}-{mode}")
    for _ in range(KILLS):
        kill_at_random(argv, env, rest, table, rng, tmp_path / "killed.log")
    finished = run_to_the_end(argv, env)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert counted(rest, table) == (ROWS, ROWS)
    # The ledger is in the bucket (and nowhere on the disk beside the checkpoint).
    (query,) = scopes_in(ledger, stand_in)
    assert {r.state for r in records_in(ledger, query, stand_in)} == {"committed"}
    assert not (tmp_path / "checkpoint" / "onceover").exists()


def test_foreach_batch_with_its_ledger_in_s3_crashed_after_a_commit_lands_every_order_once(
    local_s3: LocalS3,
    s3_bucket: str,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
) -> None:
    detail, summary = f"{dataset}.orders", f"{dataset}.batches"
    rest.create_table(bigquery.Table(detail, schema=ORDER_SCHEMA))
    rest.create_table(
        bigquery.Table(
            summary,
            schema=[
                bigquery.SchemaField("batch_id", "INT64"),
                bigquery.SchemaField("orders", "INT64"),
            ],
        )
    )
    source = tmp_path / "orders"
    write_files(source, 800, 2, "json")
    env = {**job_environment(bq_config), **local_s3.environment()}
    # The driver dies right after BigQuery committed the second write of the first
    # micro-batch (the ledger never heard); the re-run has no fault.
    env["ONCEOVER_FAILPOINTS"] = "commit.after=crash@2"
    env["ONCEOVER_FAILPOINTS_STATE"] = str(tmp_path / "failpoints")
    argv = [sys.executable, "-m", "onceover_jobs.examples.foreach_batch", "--source",
            str(source), "--table", detail, "--summary-table", summary, "--checkpoint",
            str(tmp_path / "checkpoint"), "--ledger", f"{s3_bucket}/ledger"]  # fmt: skip
    crashed = run_to_the_end(argv, env)
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    again = run_to_the_end(argv, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert counted(rest, detail) == (800, 800)
    rows = list(rest.query_and_wait(f"SELECT batch_id, orders FROM `{summary}` ORDER BY 1"))
    assert [(r["batch_id"], r["orders"]) for r in rows] == [(0, 400), (1, 400)]


def scopes_in(ledger: str, stand_in: LocalS3 | LocalGCS) -> list[str]:
    with stand_in_environment(stand_in):
        return scopes(ledger)


def records_in(ledger: str, scope: str, stand_in: LocalS3 | LocalGCS) -> list[BatchRecord]:
    with stand_in_environment(stand_in):
        return scope_records(ledger, scope)


@contextlib.contextmanager
def stand_in_environment(stand_in: LocalS3 | LocalGCS) -> Iterator[None]:
    """The stand-in's variables in this process while the ledger is read from here."""
    saved = {name: os.environ.get(name) for name in stand_in.environment()}
    os.environ.update(stand_in.environment())
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
