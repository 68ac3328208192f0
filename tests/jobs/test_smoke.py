"""The smoke job: real Spark, a real PENDING stream, rows counted by BigQuery itself."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.cloud import bigquery

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.helpers.writeapi import count

pytestmark = pytest.mark.spark


def test_the_smoke_job_lands_every_row_once(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table_id = f"{dataset}.smoke"

    result = subprocess.run(
        [sys.executable, "-m", "onceover_jobs.smoke", "--table", table_id, "--rows", "5000",
         "--rows-per-request", "1000"],
        env=job_environment(bq_config), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    assert count(rest, table_id) == (5000, 5000)
    assert "(5 appends with offsets, one commit)" in result.stdout


def test_a_bad_table_name_is_refused_before_spark_starts(bq_config: BigQueryConfig) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "onceover_jobs.smoke", "--table", "demo.smoke`; DROP TABLE x"],
        env=job_environment(bq_config), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip

    assert result.returncode == 2
    assert "--table 'demo.smoke`; DROP TABLE x' is not DATASET.TABLE" in result.stderr
