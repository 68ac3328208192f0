"""A user's own batch script (jobs/onceover_jobs/examples/daily_tables.py), run as they run it (its
own driver) and run again after it died: one run id writing two tables, one of them
twice, its ledger in a Cloud Storage bucket (as a Dataproc job keeps it). Counted in
BigQuery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_tools.chaos.runner import ORDER_SCHEMA
from onceover_tools.localstores import LocalGCS

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.sink.test_streaming import counted

pytestmark = pytest.mark.spark

SUMMARY_SCHEMA = [
    bigquery.SchemaField("currency", "STRING"),
    bigquery.SchemaField("orders", "INT64"),
]


def test_a_daily_job_killed_after_its_second_write_commits_is_rerun_exactly_once(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    local_gcs: LocalGCS,
    gcs_bucket: str,
) -> None:
    detail, summary = f"{dataset}.orders", f"{dataset}.daily"
    rest.create_table(bigquery.Table(detail, schema=ORDER_SCHEMA))
    rest.create_table(bigquery.Table(summary, schema=SUMMARY_SCHEMA))
    source = tmp_path / "orders"
    write_files(source, 4_000, 2, "json")
    env = {**job_environment(bq_config), **local_gcs.environment()}
    # The driver dies right after BigQuery committed the second write (the ledger never
    # heard), hits counted across both runs: the re-run has no fault.
    env["ONCEOVER_FAILPOINTS"] = "commit.after=crash@2"
    env["ONCEOVER_FAILPOINTS_STATE"] = str(tmp_path / "failpoints")
    args = [sys.executable, "-m", "onceover_jobs.examples.daily_tables", "--source", str(source),
            "--table", detail, "--summary-table", summary, "--ledger", f"{gcs_bucket}/ledger",
            "--run-id", "day-2026-11-24"]  # fmt: skip

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, env=env, capture_output=True, text=True, timeout=300, check=False
        )

    crashed = run()
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    assert counted(rest, detail) == (4_000, 4_000)  # both halves visible, then it died
    assert counted_summary(rest, summary) == 0

    again = run()
    assert again.returncode == 0, again.stderr[-3000:]
    assert counted(rest, detail) == (4_000, 4_000)  # nothing written twice
    assert counted_summary(rest, summary) == 4_000  # the summary, written once


def counted_summary(rest: bigquery.Client, table: str) -> int:
    row = next(iter(rest.query_and_wait(f"SELECT SUM(orders) AS n FROM `{table}`")))
    return int(row["n"] or 0)
