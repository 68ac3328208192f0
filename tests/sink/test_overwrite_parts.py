"""The parts of ``mode("overwrite")`` that need no Spark: the staging table's name, the
option, the scope's SQL, and the swap's record on every ledger store."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import LedgerError, SinkOptionError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.swaps import begin_swap, mark_swapped
from onceover_jobs.sink.table.overwrite import (
    STAGING_PREFIX,
    OverwriteScope,
    drop_staging,
    partition_overwrite_option,
    staging_table_id,
    swap_script,
    table_of_stream,
)
from onceover_jobs.sink.table.swap_job import JobOutcome, job_id_of

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import SwapRecord, read_swap


def test_a_runs_staging_table_is_the_same_for_every_attempt_and_fits_bigquerys_names() -> None:
    first = staging_table_id("p.d.orders", "nightly-1")
    assert first == staging_table_id("p.d.orders", "nightly-1")
    assert first != staging_table_id("p.d.orders", "nightly-2")
    assert first.startswith(f"p.d.{STAGING_PREFIX}orders_")
    assert staging_table_id("p.d.orders", None) != staging_table_id("p.d.orders", None)
    long = staging_table_id("p.d." + "t" * 1024, "r")
    assert len(long.rsplit(".", 1)[1]) <= 1024


def test_only_a_staging_table_is_ever_dropped() -> None:
    with pytest.raises(ValueError, match="not a staging table"):
        drop_staging(BigQueryConfig(), "p.d.orders")


@pytest.mark.parametrize(
    ("options", "given"),
    [
        ({}, None),
        ({"partitionoverwritemode": "STATIC"}, "static"),
        ({"partitionoverwritemode": "dynamic"}, "dynamic"),
        ({"spark.sql.sources.partitionoverwritemode": "Dynamic"}, "dynamic"),
    ],
)
def test_the_partition_overwrite_mode_is_read_as_spark_spells_it(
    options: dict[str, str], given: str | None
) -> None:
    assert partition_overwrite_option(options) == given


def test_a_wrong_partition_overwrite_mode_is_refused_naming_it() -> None:
    with pytest.raises(SinkOptionError, match=r"'partitionOverwriteMode'.*'daily'"):
        partition_overwrite_option({"partitionoverwritemode": "daily"})


def test_the_swap_deletes_the_scope_and_inserts_the_staged_rows_in_one_transaction() -> None:
    days = OverwriteScope("partitions", "day", "DATE_TRUNC({c}, DAY)")
    sql = swap_script("p.d.t", "p.d.s", ["id", "day"], days, 2)
    lines = sql.splitlines()
    assert lines[0] == "BEGIN TRANSACTION;"
    assert lines[-1] == "COMMIT TRANSACTION;"
    assert "SELECT COUNT(*) AS n FROM `p.d.s`) WHERE n != 2;" in lines[1]  # as staged
    assert "DATE_TRUNC(t.`day`, DAY) IN (SELECT DISTINCT DATE_TRUNC(s.`day`, DAY)" in lines[2]
    assert "t.`day` IS NULL AND EXISTS" in lines[2]  # the NULL partition is one too
    assert lines[3] == "INSERT INTO `p.d.t` (`id`, `day`) SELECT `id`, `day` FROM `p.d.s`;"
    whole = swap_script("p.d.t", "p.d.s", ["id"], OverwriteScope("table"), 0)
    assert "DELETE FROM `p.d.t` AS t WHERE TRUE;" in whole


def test_a_swaps_job_id_is_fixed_by_the_write_and_the_attempt() -> None:
    assert job_id_of("ledger/w", "None", attempt=0) == job_id_of("ledger/w", "None", attempt=0)
    assert job_id_of("ledger/w", "None", attempt=0) != job_id_of("ledger/w", "None", attempt=1)
    assert job_id_of("ledger/w", "None", attempt=0) != job_id_of("ledger/v", "None", attempt=0)
    transient = JobOutcome("j", {"reason": "backendError", "message": "try again"})
    lost = JobOutcome(
        "j", {"reason": "invalidQuery", "message": "aborted due to concurrent update"}
    )
    wrong = JobOutcome("j", {"reason": "invalidQuery", "message": "no such column"})
    assert (transient.retryable, lost.retryable, wrong.retryable) == (True, True, False)
    assert table_of_stream("projects/p/datasets/d/tables/s/streams/x") == "p.d.s"


def test_a_swap_is_recorded_once_and_only_moves_forward(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "nightly-1", "p.d.orders", "0")
    assert read_swap(ledger.store, ledger.directory, None) is None
    first = SwapRecord("swapping", "p.d.orders", "p.d.s", "every row", "j_0", 0, "now")
    begin_swap(ledger, None, first, replacing=None)
    assert read_swap(ledger.store, ledger.directory, None) == first
    racer = SwapRecord("swapping", "p.d.orders", "p.d.s2", "every row", "j_0", 0, "now")
    with pytest.raises(LedgerError, match="another driver started"):
        begin_swap(ledger, None, racer, replacing=None)  # a second driver of the run
    second = SwapRecord("swapping", "p.d.orders", "p.d.s", "every row", "j_1", 1, "later")
    with pytest.raises(LedgerError, match="another driver started"):
        begin_swap(ledger, None, second, replacing=racer)  # not what the ledger holds
    begin_swap(ledger, None, second, replacing=first)  # the first attempt's job failed
    done = mark_swapped(ledger, None, second, at="done")
    assert read_swap(ledger.store, ledger.directory, None) == done
    assert done.swapped
    with pytest.raises(LedgerError, match="the swap is done"):
        begin_swap(ledger, None, second, replacing=done)
