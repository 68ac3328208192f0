"""Committed mode's retries, one task attempt after another as Spark runs them: a retry
whose rows are the first attempt's goes on from the ledger; one whose rows differ (a
shuffle without a fixed order, another partitioning) stops before mixing them. Judged
by what BigQuery holds."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import NonDeterministicInputError
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.protocol.task import write_partition

from onceover.bigquery import BigQueryConfig
from tests.helpers.writeapi import count, create_table, rows, streaming_job

ROWS = 2_000  # about 500 rows to a 10,000-byte request: four requests


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


@pytest.fixture
def job(bq_config: BigQueryConfig, table: str, tmp_path: Path) -> SinkJob:
    small = {"mode": "committed", "request.max_bytes": "10000", "retry.deadline_s": "5"}
    return streaming_job(bq_config, table, tmp_path, **small)


def first_attempt_fails_at_its_second_append(job: SinkJob, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.ENV, "append.response=error@2")
    failpoints.reset()
    with pytest.raises(Exception, match=r"append\.response"):
        write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 7))
    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()


def test_a_retry_with_the_same_rows_goes_on_from_the_ledger(
    job: SinkJob, rest: bigquery.Client, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_attempt_fails_at_its_second_append(job, monkeypatch)
    # Spark hands the retry the same rows, cut into other Arrow batches.
    same = pa.Table.from_batches([rows(0, ROWS)]).to_batches(max_chunksize=333)
    result = write_partition(job, same, TaskContextInfo(0, 1, 7))
    assert result.rows == ROWS
    assert count(rest, table) == (ROWS, ROWS)


@pytest.mark.parametrize("change", ["other rows", "reordered", "fewer rows"])
def test_a_retry_whose_rows_differ_stops_before_mixing_them(
    job: SinkJob,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    first_attempt_fails_at_its_second_append(job, monkeypatch)
    replay = {
        "other rows": [rows(10_000, ROWS)],  # another partitioning put other rows here
        "reordered": [rows(0, ROWS).take(pa.array(range(ROWS - 1, -1, -1)))],
        "fewer rows": [rows(0, 100)],
    }[change]
    with pytest.raises(NonDeterministicInputError) as stopped:
        write_partition(job, replay, TaskContextInfo(0, 1, 7))
    text = str(stopped.value)
    assert "partition 0 attempt 1" in text
    assert "offsets 0.." in text
    assert "repartition" in text
    # Only the first attempt's rows (its requests in flight may all have landed), each
    # once: nothing of the retry mixed in.
    landed, distinct, highest = held(rest, table)
    assert 0 < landed == distinct
    assert highest < ROWS


def held(rest: bigquery.Client, table: str) -> tuple[int, int, int]:
    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d, MAX(id) AS top FROM `{table}`"
    row = next(iter(rest.query_and_wait(query)))
    return int(row["n"]), int(row["d"]), int(row["top"])
