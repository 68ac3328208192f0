"""A user's own batch script whose rows BigQuery partly refuses (a few names too long
for the table's ``STRING(5)``), run as they run it: with ``dead_letter``, killed right
after its first commit and run again; without it, failing with the rows named. Counted
in BigQuery: each good row once in the table, each bad row once in the dead-letter
table; and the control plane the script reports to shows the same."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.backend.conftest import INGEST, TOKENS, VIEWER, bearer
from tests.backend.live import serving
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import count, create_refusing_table

pytestmark = pytest.mark.spark

ROWS = 2_000
RUN_ID = "refusing-2026-11-25"
BAD_IDS = [i for i in range(ROWS) if i % 397 == 5]  # 5, 402, 799, 1196, 1593, 1990

SCRIPT = """
import sys

from pyspark.sql import SparkSession, functions as F

from onceover_jobs.sink.datasource import register

table, dead_letter, ledger, monitor = sys.argv[1:5]
spark = (
    SparkSession.builder.master("local[2]").appName("refusing")
    .config("spark.ui.enabled", "false").getOrCreate()
)
register(spark)
name = (
    F.when(F.col("id") % 397 == 5, F.lit("much-too-long"))
    .otherwise(F.concat(F.lit("n"), (F.col("id") % 1000).cast("string")))
)
orders = spark.range(0, 2000, 1, 2).select("id", name.alias("name"))
writer = (
    orders.write.format("onceover").mode("append")
    .option("table", table).option("key", "id")
    .option("run_id", "refusing-2026-11-25").option("ledger", ledger)
)
if dead_letter != "-":
    writer = writer.option("dead_letter", dead_letter)
if monitor != "-":
    url, token = monitor.split(" ")
    writer = writer.option("monitor.url", url).option("monitor.token", token)
writer.save()
"""


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_refusing_table(rest, f"{dataset}.names")


def run_script(
    bq_config: BigQueryConfig,
    tmp_path: Path,
    table: str,
    dead_letter: str,
    monitor: str = "-",
    **env: str,
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "load_names.py"
    script.write_text(SCRIPT)
    ledger = tmp_path / "ledger"
    return subprocess.run(
        [sys.executable, str(script), table, dead_letter, str(ledger), monitor],
        env={**job_environment(bq_config), **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bad_rows_set_aside_once_after_a_crash_between_the_two_commits(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, table: str, tmp_path: Path
) -> None:
    dead_letter = f"{dataset}.names_refused"
    database = f"sqlite:///{tmp_path / 'control-plane.db'}"
    upgrade_to_head(database)
    settings = Settings(database_url=database, tokens=TOKENS, frontend_dist=tmp_path / "none")
    with serving(create_app(settings, bigquery=bq_config)) as url:
        shown = _run_twice(bq_config, rest, dataset, table, dead_letter, tmp_path, url)
    good = ROWS - len(BAD_IDS)
    assert shown["rows_committed"] == good
    assert shown["dead_letter_table"] == dead_letter
    assert sorted(int(r["key"]) for r in shown["rejections"]) == BAD_IDS
    assert {r["column"] for r in shown["rejections"]} == {"name"}


def _run_twice(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    table: str,
    dead_letter: str,
    tmp_path: Path,
    url: str,
) -> dict[str, Any]:
    """The script killed after its first commit, then run again; what the control plane
    shows of the run once it counted the rows set aside."""
    monitor = f"{url} {INGEST}"
    crashed = run_script(
        bq_config, tmp_path, table, dead_letter, monitor,
        # The driver dies right after BigQuery committed the dead-letter rows, before
        # the table's commit; hits counted across both runs, so the re-run has no fault.
        ONCEOVER_FAILPOINTS="commit.after=crash@1",
        ONCEOVER_FAILPOINTS_STATE=str(tmp_path / "failpoints"),
    )  # fmt: skip
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    assert count(rest, table) == (0, 0)

    again = run_script(
        bq_config, tmp_path, table, dead_letter, monitor,
        ONCEOVER_FAILPOINTS_STATE=str(tmp_path / "failpoints"),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    good = ROWS - len(BAD_IDS)
    assert count(rest, table) == (good, good)
    aside = rest.query_and_wait(
        f"SELECT `key`, `column`, run_id, `table` FROM `{dead_letter}` "
        "ORDER BY CAST(`key` AS INT64)"
    )
    assert [(r["key"], r["column"], r["run_id"], r["table"]) for r in aside] == [
        (str(i), "name", RUN_ID, table) for i in BAD_IDS
    ]

    def counted_aside() -> dict[str, Any] | None:
        run = httpx.get(f"{url}/api/runs/{RUN_ID}", headers=bearer(VIEWER), timeout=10)
        body: dict[str, Any] = run.json() if run.status_code == 200 else {}
        done = body.get("rows_dead_lettered") == len(BAD_IDS) and body["status"] == "succeeded"
        return body if done else None

    # The script's run ends succeeded: the sink reports it
    # (onceover_jobs.sink.reporting.run_report).
    shown: dict[str, Any] = wait_until("the run's rows set aside, ended", counted_aside, 30)
    return shown


def test_without_a_dead_letter_table_the_script_fails_naming_the_rows(
    bq_config: BigQueryConfig, rest: bigquery.Client, table: str, tmp_path: Path
) -> None:
    failed = run_script(bq_config, tmp_path, table, "-")
    assert failed.returncode != 0
    assert "RowsRejectedError" in failed.stderr
    # Whichever partition's task failed first is the one Spark reports: each names its
    # first refused request's rows (the bad ids of partition 0 are 5, 402, 799; of
    # partition 1, 1196, 1593, 1990).
    named = re.search(r"BigQuery refused 3 rows for \S+: partition (\d) offset (\d+) key '(\d+)' "
                      r"column name: Field name: STRING\(5\)", failed.stderr)  # fmt: skip
    assert named is not None, failed.stderr[-3000:]
    partition, offset, key = (int(g) for g in named.groups())
    assert key == partition * 1000 + offset
    assert key == min(i for i in BAD_IDS if i // 1000 == partition)
    assert count(rest, table) == (0, 0)
