"""Re-drive: a run's set-aside rows sent again once the cause is fixed, on the shared Spark
session, counted in BigQuery: each fixed row lands once however often the re-drive runs,
a row still refused stays set aside with the new reason for the next one, and a re-drive
that stopped before its commit is finished, not started again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.redrive.run import redrive, set_aside_rows
from onceover_jobs.redrive.selection import Redrives
from onceover_jobs.sink.errors import RedriveRefusedError
from pyspark.sql import SparkSession

from onceover.bigquery import BigQueryConfig
from onceover.ledger_store import open_store
from tests.helpers.writeapi import count_distinct, create_refusing_table

pytestmark = pytest.mark.spark

RUN = "orders-2026-12-03"
ROWS = 20
TOO_LONG = {3, 7, 11, 15}
"""Keys whose name is longer than the table's ``STRING(5)``: BigQuery refuses them."""


def names(key: int) -> str:
    return f"long-name-{key}" if key in TOO_LONG else f"n{key}"


@pytest.fixture
def tables(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> tuple[str, str, str]:
    """The orders table and its dead-letter table after the run set 4 rows aside; the
    ledger the run and its re-drives share."""
    table = create_refusing_table(rest, f"{dataset}.orders")
    dead_letter = f"{dataset}.orders_dead_letters"
    ledger = str(tmp_path / "ledger")
    rows = [(key, names(key)) for key in range(ROWS)]
    (
        spark.createDataFrame(rows, "id long, name string").repartition(2).write.format("onceover")
        .option("table", table).option("run_id", RUN).option("dead_letter", dead_letter)
        .option("key", "id").option("ledger", ledger).mode("append").save()
    )  # fmt: skip
    assert count_distinct(rest, table, "id") == (ROWS - 4, ROWS - 4)
    return table, dead_letter, ledger


def fix_in_place(rest: bigquery.Client, dead_letter: str, key: int, name: str) -> None:
    """A person corrects a set-aside row's value in the dead-letter table."""
    rest.query_and_wait(
        f"UPDATE `{dead_letter}` SET `row` = '{json.dumps({'id': key, 'name': name})}' "
        f"WHERE `key` = '{key}'"
    )


def test_a_redrive_lands_each_fixed_row_once_however_often_it_runs(
    spark: SparkSession,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    tables: tuple[str, str, str],
) -> None:
    table, dead_letter, ledger = tables
    for key in (3, 7, 11):
        fix_in_place(rest, dead_letter, key, f"k{key}")

    first = redrive(spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id")
    assert (first.sent, first.set_aside_again, first.landed) == (4, 1, 3)
    assert count_distinct(rest, table, "id") == (ROWS - 1, ROWS - 1)
    again = set_aside_rows(rest, dead_letter, f"{RUN}:redrive-1", exact=True)
    assert [(r.key, r.column) for r in again] == [("15", "name")]  # with the new reason
    assert "too long" in again[0].reason.lower() or "length" in again[0].reason.lower()

    # Run again without fixing 15: it is refused again; nothing lands twice.
    second = redrive(spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id")
    assert (second.sent, second.landed) == (1, 0)
    assert count_distinct(rest, table, "id") == (ROWS - 1, ROWS - 1)

    # The column widened: the last row lands, once; then nothing is left.
    widened = rest.get_table(table)
    widened.schema = [bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
                      bigquery.SchemaField("name", "STRING", max_length=20)]  # fmt: skip
    rest.update_table(widened, ["schema"])
    third = redrive(spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id")
    assert (third.sent, third.landed) == (1, 1)
    assert count_distinct(rest, table, "id") == (ROWS, ROWS)
    found = {r["id"]: r["name"] for r in rest.query_and_wait(f"SELECT id, name FROM `{table}`")}
    assert found[3] == "k3"
    assert found[15] == "long-name-15"

    last = redrive(spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id")
    assert last.redrive is None
    assert "no set-aside rows left" in last.describe()
    assert count_distinct(rest, table, "id") == (ROWS, ROWS)


def test_a_redrive_that_stopped_before_its_commit_is_finished_with_its_own_rows(
    spark: SparkSession,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    tables: tuple[str, str, str],
) -> None:
    """Its record names its rows before any is sent: a re-drive killed after that finds
    it unfinished and sends those rows under the same run id (the sink writes them
    once), not the rows set aside since."""
    table, dead_letter, ledger = tables
    for key in TOO_LONG:
        fix_in_place(rest, dead_letter, key, f"k{key}")
    rows = set_aside_rows(rest, dead_letter, RUN)
    recorded = Redrives(open_store(ledger), RUN).record(1, rows[:2], dead_letter)  # a crash
    with pytest.raises(RedriveRefusedError, match="give that table to finish it first"):
        redrive(spark, bq_config, run_id=RUN, dead_letter=f"{dead_letter}_other", ledger=ledger)

    finished = redrive(
        spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id"
    )
    assert finished.resumed
    assert finished.redrive == recorded
    assert finished.landed == 2
    rest_of_them = redrive(
        spark, bq_config, run_id=RUN, dead_letter=dead_letter, ledger=ledger, key="id"
    )
    assert (rest_of_them.sent, rest_of_them.landed, rest_of_them.resumed) == (2, 2, False)
    assert count_distinct(rest, table, "id") == (ROWS, ROWS)


def test_a_redrive_of_a_redrives_own_run_is_refused(
    spark: SparkSession, bq_config: BigQueryConfig, tmp_path: Path
) -> None:
    """Its rows set aside again are the run's, which the run's next re-drive takes: a
    re-drive of the re-drive (records of its own) would send them twice."""
    with pytest.raises(RedriveRefusedError, match=f"re-drive {RUN!r}"):
        redrive(spark, bq_config, run_id=f"{RUN}:redrive-1", dead_letter="p.d.t",
                ledger=str(tmp_path))  # fmt: skip


def test_the_command_needs_the_runs_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    from onceover_jobs.redrive.__main__ import parser, redrive_from

    monkeypatch.delenv("ONCEOVER_LEDGER", raising=False)
    args = parser().parse_args([RUN, "--dead-letter", "p.d.t"])
    with pytest.raises(RedriveRefusedError, match="--ledger: give the run's ledger"):
        redrive_from(args)
