"""The load job end to end: real Spark (local[2,4]), real local BigQuery, injected faults.

Exactly-once is judged by BigQuery itself: COUNT(*) and COUNT(DISTINCT event_id) of
the table after the job (and, after a crash, after the same command run again).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import bigquery

from jobs.generate import write_files
from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment

pytestmark = pytest.mark.spark

ROWS = 100_000


def counted(rest: bigquery.Client, table: str) -> tuple[int, int]:
    row = next(
        iter(
            rest.query_and_wait(
                f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`"
            )
        )
    )
    return int(row["n"]), int(row["ids"])


def load(
    bq_config: BigQueryConfig,
    source: Path,
    table: str,
    checkpoint: Path,
    *extra: str,
    failpoints: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = job_environment(bq_config)
    env["ONCEOVER_SPOOL_DIR"] = str(checkpoint.parent / "spool")
    if failpoints:
        env["ONCEOVER_FAILPOINTS"] = failpoints
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.load_files",
            "--source",
            str(source),
            "--format",
            "json",
            "--table",
            table,
            "--key",
            "event_id",
            "--checkpoint",
            str(checkpoint),
            "--create-table",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("orders")
    write_files(directory, ROWS, 4, "json")
    return directory


@pytest.mark.parametrize("mode", ["pending", "committed", "default"])
def test_each_mode_lands_every_row(
    mode: str,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    source: Path,
    tmp_path: Path,
) -> None:
    table = f"{dataset}.orders"
    result = load(bq_config, source, table, tmp_path / "ckpt", "--mode", mode)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Committed {ROWS:,} rows" in result.stdout
    # default mode is at-least-once in general; with no faults it lands each row once
    assert counted(rest, table) == (ROWS, ROWS)


@pytest.mark.parametrize("point", ["ledger.after_intent", "commit.before", "commit.after"])
def test_a_driver_crash_then_the_same_command_commits_exactly_once(
    point: str,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    source: Path,
    tmp_path: Path,
) -> None:
    table = f"{dataset}.orders"
    checkpoint = tmp_path / "ckpt"
    args = ("--max-files-per-trigger", "2")
    crashed = load(bq_config, source, table, checkpoint, *args, failpoints=f"{point}=crash@1")
    assert crashed.returncode != 0
    assert f"failpoint {point} fired" in crashed.stderr

    again = load(bq_config, source, table, checkpoint, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert counted(rest, table) == (ROWS, ROWS)
    ledgers = list((checkpoint / "onceover").glob("*/batch-*.json"))
    records = [json.loads(path.read_text()) for path in ledgers]
    assert sorted(r["batch_id"] for r in records) == [0, 1]
    assert all(r["state"] == "committed" for r in records)
    # only a crash after the commit leaves a batch that BigQuery, not the ledger, settles
    assert any(r["resolved"] for r in records) == (point == "commit.after")


def test_a_failed_task_is_retried_by_spark_and_rows_land_once(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    source: Path,
    tmp_path: Path,
) -> None:
    table = f"{dataset}.orders"
    result = load(bq_config, source, table, tmp_path / "ckpt", failpoints="append.before=error@2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failpoint append.before fired" in result.stderr
    assert counted(rest, table) == (ROWS, ROWS)


def test_lost_append_responses_are_deduplicated(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    source: Path,
    tmp_path: Path,
) -> None:
    table = f"{dataset}.orders"
    result = load(
        bq_config,
        source,
        table,
        tmp_path / "ckpt",
        "--mode",
        "committed",
        failpoints="append.response=drop%0.2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failpoint append.response fired" in result.stderr
    assert counted(rest, table) == (ROWS, ROWS)


def test_a_second_run_on_the_same_checkpoint_writes_nothing_new(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    source: Path,
    tmp_path: Path,
) -> None:
    table = f"{dataset}.orders"
    first = load(bq_config, source, table, tmp_path / "ckpt")
    assert first.returncode == 0, first.stderr[-3000:]
    second = load(bq_config, source, table, tmp_path / "ckpt")
    assert second.returncode == 0, second.stderr[-3000:]
    assert counted(rest, table) == (ROWS, ROWS)


def test_a_missing_table_without_create_table_is_one_clear_line(
    bq_config: BigQueryConfig, dataset: str, source: Path, tmp_path: Path
) -> None:
    env = job_environment(bq_config)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.load_files",
            "--source",
            str(source),
            "--format",
            "json",
            "--table",
            f"{dataset}.absent",
            "--key",
            "event_id",
            "--checkpoint",
            str(tmp_path / "ckpt"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2
    assert f"table {dataset}.absent does not exist" in result.stderr
    assert "--create-table" in result.stderr
