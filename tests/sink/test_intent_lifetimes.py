"""Intents against BigQuery's stream lifetimes: a PENDING stream not committed within
24 hours is deleted (the local BigQuery enforces it, here after half a second). A
replay of an intent whose streams are gone writes the batch again only when the ledger
proves no commit was asked for; otherwise it stops and says how to settle it. Judged
by the rows and distinct keys in BigQuery."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from google.api_core.exceptions import NotFound
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
from onceover_jobs.sink import failpoints, settle
from onceover_jobs.sink.errors import IntentUnresolvableError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_tools.localbq.limits import limited

from onceover.bigquery import BigQueryConfig
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import count, create_table, streaming_job
from tests.sink.test_committer import staged

pytestmark = pytest.mark.alone  # times what must not wait (make test runs these alone)

LIFETIME_S = 0.5


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


@pytest.fixture
def job(bq_config: BigQueryConfig, table: str, tmp_path: Path) -> SinkJob:
    return streaming_job(bq_config, table, tmp_path, mode="pending", **{"retry.deadline_s": "5"})


def fails_at(
    point: str, job: SinkJob, results: list[TaskResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failpoints.ENV, f"{point}=error@1")
    failpoints.reset()
    with pytest.raises(Exception, match=point.replace(".", r"\.")):
        BatchCommitter(job, 0).commit(results)
    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()


def expired(write: BigQueryWriteClient, results: list[TaskResult]) -> None:
    def gone() -> bool | None:
        for result in results:
            try:
                write.get_write_stream(name=result.stream, retry=None, timeout=5)
            except NotFound:
                continue
            return None
        return True

    wait_until("the intent's streams to expire", gone, 10)


def test_an_intent_no_commit_was_asked_for_is_written_again_when_its_streams_expired(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with limited(pending_lifetime_s=LIFETIME_S):
        first = staged(write, table, (0, 50), (50, 50))
        fails_at("ledger.after_intent", job, first, monkeypatch)  # the driver died
        expired(write, first)
        replay = staged(write, table, (0, 50), (50, 50))  # the restart runs batch 0 again
        record = BatchCommitter(job, 0).commit(replay)
    assert record.committed
    assert [s.stream for s in record.streams] == [r.stream for r in replay]
    assert count(rest, table) == (100, 100)


@pytest.mark.parametrize(("outcome", "rows_after"), [("rewrite", 100), ("committed", 0)])
def test_an_intent_whose_commit_was_asked_for_stops_and_is_settled_by_hand(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    outcome: str,
    rows_after: int,
) -> None:
    with limited(pending_lifetime_s=LIFETIME_S):
        first = staged(write, table, (0, 50), (50, 50))
        fails_at("commit.before", job, first, monkeypatch)  # asked for, answer unknown
        expired(write, first)
        replay = staged(write, table, (0, 50), (50, 50))
        with pytest.raises(IntentUnresolvableError) as stopped:
            BatchCommitter(job, 0).commit(replay)
        message = str(stopped.value)
        assert "100 rows" in message
        assert "a commit of them was asked for" in message
        assert count(rest, table) == (0, 0)  # nothing written again, nothing guessed

        # The person counts the batch's rows, then runs the command the message gives.
        command = message.split("`")[1 if outcome == "committed" else 3]
        assert command.startswith("python -m onceover_jobs.sink.settle ")
        assert command.endswith(outcome)
        assert settle.main(shlex.split(command)[3:]) == 0
        assert settle.main(shlex.split(command)[3:]) == 2  # nothing left to settle

        again = staged(write, table, (0, 50), (50, 50))
        BatchCommitter(job, 0).commit(again)
    assert count(rest, table) == (rows_after, rows_after)
