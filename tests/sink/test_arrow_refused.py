"""A project that refuses Arrow rows: the first append BigQuery refuses for its format
switches the job to proto rows in that process, before any row of it is counted; said in
one WARNING and one event; every row lands once, in every mode, and set-aside rows go as
proto too. Against the local BigQuery set to refuse Arrow (patch ``arrow_rows``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.modes import row_format
from onceover_jobs.sink.modes.staging import TaskContextInfo, row_encoder
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.protocol.task import write_partition
from onceover_jobs.sink.wire.requests import ArrowEncoder
from onceover_tools.localbq.limits import limited

from onceover.bigquery import BigQueryConfig
from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.writeapi import ARROW_SCHEMA, SCHEMA, count, create_table, rows, streaming_job

ROWS = 500


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test as a process that has not met BigQuery's answer to Arrow yet."""
    row_format.forget()
    yield
    row_format.forget()


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


def _job(bq_config: BigQueryConfig, table: str, tmp_path: Path, receiver: Receiver,
         mode: str) -> SinkJob:  # fmt: skip
    monitor = {"monitor.url": receiver.url, "monitor.token": TOKEN, "request.max_bytes": "20000"}
    return streaming_job(bq_config, table, tmp_path, mode=mode, **monitor)


@pytest.mark.parametrize("mode", ["pending", "buffered", "committed", "default"])
def test_the_first_refusal_switches_the_job_to_proto_and_every_row_lands_once(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    table: str,
    tmp_path: Path,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    mode: str,
) -> None:
    job = _job(bq_config, table, tmp_path, receiver, mode)
    with limited(arrow_rows="refused"), caplog.at_level(logging.WARNING):
        for batch in (0, 1):
            results = [
                write_partition(job, [rows(batch * 2 * ROWS + p * ROWS, ROWS)],
                                TaskContextInfo(p, 0, batch))
                for p in (0, 1)
            ]  # fmt: skip
            assert BatchCommitter(job, batch).commit(results).committed
    assert count(rest, table) == (4 * ROWS, 4 * ROWS)
    said = [
        r.getMessage() for r in caplog.records if "refused Arrow rows for project" in r.getMessage()
    ]
    assert len(said) == 1, said  # once per process, not per stream
    assert "Arrow format is not supported for this project" in said[0]
    (event,) = receiver.of_type("append_format_refused")
    assert (event["refused"], event["sent_as"], event["partition"]) == ("arrow", "proto", 0)
    assert row_format.row_format_of(job) == "proto"


def test_rows_set_aside_follow_the_jobs_row_format(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path,
    receiver: Receiver,
) -> None:  # fmt: skip
    """A row BigQuery refuses (a NULL for a REQUIRED column) goes to the dead-letter table
    as proto rows once Arrow was refused: else its own stream would be refused too."""
    table = f"{dataset}.strict"
    strict = [bigquery.SchemaField("id", "INT64", mode="REQUIRED"), SCHEMA[1]]
    rest.create_table(bigquery.Table(table, schema=strict))
    dead = f"{dataset}.strict_dead_letters"
    job = streaming_job(
        bq_config, table, tmp_path, mode="pending", dead_letter=dead,
        **{"monitor.url": receiver.url, "monitor.token": TOKEN},
    )  # fmt: skip
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    ensure_dead_letter_table(bq_config, dead)
    batch = pa.record_batch(
        [pa.array([1, None, 3], pa.int64()), pa.array(["a", "b", "c"])], schema=ARROW_SCHEMA
    )
    with limited(arrow_rows="refused"):
        result = write_partition(job, [batch], TaskContextInfo(0, 0, 0))
        assert BatchCommitter(job, 0).commit([result]).committed
    assert count(rest, table) == (2, 2)
    (set_aside,) = rest.query_and_wait(f"SELECT COUNT(*) AS n FROM `{dead}`")
    assert set_aside["n"] == 1


def test_the_same_rows_digest_the_same_whatever_format_they_go_in() -> None:
    """Committed mode records each request's digest; a retry that sends the rows as proto
    after BigQuery refused Arrow must find the digests an Arrow attempt recorded."""
    batch = rows(0, 100)
    proto = row_encoder("proto", lambda: SCHEMA, ARROW_SCHEMA)
    assert proto.encode(batch).digest == ArrowEncoder(ARROW_SCHEMA).encode(batch).digest
    assert proto.encode(batch).digest != ArrowEncoder(ARROW_SCHEMA).encode(rows(1, 100)).digest


def test_a_refusal_after_arrow_was_taken_is_not_read_as_the_format(
    bq_config: BigQueryConfig, rest: bigquery.Client, table: str, tmp_path: Path,
    receiver: Receiver,
) -> None:  # fmt: skip
    """Once BigQuery took the job's Arrow rows in this process, nothing is kept to send
    again: a later refusal fails the write as any refusal does, nothing switched."""
    job = _job(bq_config, table, tmp_path, receiver, "pending")
    first = write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 0))
    assert row_format.arrow_settled(job)
    with limited(arrow_rows="refused"), pytest.raises(Exception, match="Arrow format"):
        write_partition(job, [rows(ROWS, ROWS)], TaskContextInfo(1, 0, 0))
    assert row_format.row_format_of(job) == "arrow"
    assert BatchCommitter(job, 0).commit([first]).committed
    assert count(rest, table) == (ROWS, ROWS)
