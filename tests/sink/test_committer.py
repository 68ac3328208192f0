"""The driver's commit protocol against the local BigQuery, step by step: what a replay,
a lost commit response and an abort after a commit that took effect each leave behind.
BigQuery's own COUNT decides; the ledger and the events are checked as well."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import CommitRejectedError, PendingBufferError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.wire.batch_commit import batch_commit
from onceover_tools.chaos.proxy import BATCH_COMMIT, FaultProxy, WireFault

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import BatchRecord, StreamCommit
from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import (
    append_all,
    append_request,
    commit,
    count,
    create_stream,
    create_table,
    rows,
    streaming_job,
)

PENDING = types.WriteStream.Type.PENDING


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


@pytest.fixture
def job(bq_config: BigQueryConfig, table: str, tmp_path: Path, receiver: Receiver) -> SinkJob:
    monitor = {"monitor.url": receiver.url, "monitor.token": TOKEN}
    return streaming_job(bq_config, table, tmp_path, mode="pending", **monitor)


def staged(write: BigQueryWriteClient, table: str, *ranges: tuple[int, int]) -> list[TaskResult]:
    """What tasks return: one finalized PENDING stream per (start, count), nothing visible."""
    results = []
    for partition, (start, size) in enumerate(ranges):
        stream = create_stream(write, table, PENDING).name
        append_all(write, [append_request(stream, rows(start, size), 0)])
        assert write.finalize_write_stream(name=stream).row_count == size
        results.append(TaskResult(stream, "PENDING", size, 0, partition, 0))
    return results


def test_a_batch_commits_once_and_its_replay_is_skipped(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    receiver: Receiver,
) -> None:
    first = BatchCommitter(job, 0).commit(staged(write, table, (0, 50), (50, 50)))
    assert first.committed
    assert count(rest, table) == (100, 100)

    replay = staged(write, table, (0, 50), (50, 50))  # Spark ran batch 0 again
    again = BatchCommitter(job, 0).commit(replay)
    assert again == first
    assert count(rest, table) == (100, 100)
    skipped = receiver.of_type("batch_skipped_duplicate")
    assert [e["orphaned_streams"] for e in skipped] == [[r.stream for r in replay]]
    assert len(receiver.of_type("batch_committed")) == 1


def test_a_lost_commit_response_resolves_as_committed(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(failpoints.ENV, "commit.after=drop@1")
    failpoints.reset()
    record = BatchCommitter(job, 3).commit(staged(write, table, (0, 40)))
    assert record.committed
    assert record.commit_time is not None
    assert count(rest, table) == (40, 40)


def test_abort_after_a_commit_that_took_effect_marks_it_committed(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    receiver: Receiver,
) -> None:
    results = staged(write, table, (0, 30), (30, 30))
    streams = tuple(StreamCommit(r.stream or "", r.rows, 0, r.partition, 0) for r in results)
    ledger = job.ledger()
    ledger.write_intent(BatchRecord(
        query_id=job.query_id, batch_id=1, table=job.table, mode="pending", state="intent",
        streams=streams, expected_rows=60, intent_at="2026-11-21T00:00:00+00:00",
    ))  # fmt: skip
    commit(write, table, *(s.stream for s in streams))  # the commit worker died right after

    BatchCommitter(job, 1).abort(results)  # what Spark does next

    record = ledger.batch(1)
    assert record is not None
    assert record.committed
    assert record.resolved
    assert not receiver.of_type("stream_orphaned")  # nothing committed is called an orphan
    BatchCommitter(job, 1).commit(staged(write, table, (0, 30), (30, 30)))  # the replay
    assert count(rest, table) == (60, 60)


def test_abort_before_commit_orphans_the_streams_and_the_replay_commits_once(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    receiver: Receiver,
) -> None:
    results = staged(write, table, (0, 25))
    BatchCommitter(job, 2).abort(results)
    orphaned = receiver.of_type("stream_orphaned")
    assert [e["stream"] for e in orphaned] == [results[0].stream]
    assert len(receiver.of_type("batch_aborted")) == 1
    assert count(rest, table) == (0, 0)

    BatchCommitter(job, 2).commit(staged(write, table, (0, 25)))
    assert count(rest, table) == (25, 25)


def test_an_intent_left_uncommitted_is_settled_with_its_own_streams_so_its_driver_adds_nothing(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(failpoints.ENV, "commit.before=error@1")
    failpoints.reset()
    first = staged(write, table, (0, 20))
    stalled = BatchCommitter(job, 4)  # driver A: its intent written, then it stalls
    with pytest.raises(Exception, match=r"commit\.before"):
        stalled.commit(first)
    intent = job.ledger().batch(4)
    assert intent is not None
    assert intent.state == "intent"
    assert intent.owner  # names the driver that wrote it

    replay = staged(write, table, (0, 20))  # driver B: a resume, an orchestrator's retry
    record = BatchCommitter(job, 4).commit(replay)
    assert [s.stream for s in record.streams] == [first[0].stream]  # the intent's own
    assert record.resolved
    assert count(rest, table) == (20, 20)

    # Driver A wakes and sends the commit it was about to send: STREAM_ALREADY_COMMITTED.
    names = [s.stream for s in intent.streams]
    again = batch_commit(
        stalled.client, job.retry_policy, job.parent, names, table=table, label=stalled.label
    )
    assert again is not None
    assert count(rest, table) == (20, 20)


def test_an_intent_whose_streams_are_gone_is_written_again_on_the_replays_streams(
    job: SinkJob, write: BigQueryWriteClient, rest: bigquery.Client, table: str
) -> None:
    gone = f"{job.parent}/streams/{'0' * 16}"  # gone (expired, or another table's)
    job.ledger().write_intent(
        BatchRecord(
            query_id="query-1", batch_id=5, table=table, mode="pending", state="intent",
            streams=(StreamCommit(gone, 20, 0, 0, 0),), expected_rows=20,
            intent_at="2026-11-01T00:00:00+00:00", owner="another host pid 1 started 1",
        )
    )  # fmt: skip
    replay = staged(write, table, (0, 20))
    record = BatchCommitter(job, 5).commit(replay)
    assert [s.stream for s in record.streams] == [replay[0].stream]
    assert not record.resolved
    assert count(rest, table) == (20, 20)


def test_a_lost_finalize_response_is_asked_again(
    job: SinkJob, write: BigQueryWriteClient, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onceover_jobs.sink.wire.stream_calls import finalize_stream
    from onceover_jobs.sink.wire.write_api import write_api

    stream = create_stream(write, table, PENDING).name
    append_all(write, [append_request(stream, rows(0, 12), 0)])
    monkeypatch.setenv(failpoints.ENV, "finalize.after=drop@1")
    failpoints.reset()
    # finalizing twice answers the count again
    assert finalize_stream(write_api(job.bigquery), job.retry_policy, stream) == 12
    assert failpoints.fired() == [("finalize.after", failpoints.Action.DROP, 1)]


@pytest.mark.parametrize("empty_answers", [1, 5])
def test_a_commit_answered_without_a_commit_time_is_not_taken_as_done(
    job: SinkJob,
    write: BigQueryWriteClient,
    rest: bigquery.Client,
    table: str,
    empty_answers: int,
) -> None:
    # BigQuery's API: an unset commit_time means the commit did not happen. The proxy
    # answers the first BatchCommits itself with neither a time nor an error.
    assert job.bigquery.grpc_endpoint is not None
    faults = [WireFault("uncommitted", BATCH_COMMIT, n) for n in range(1, empty_answers + 1)]
    with FaultProxy(job.bigquery.grpc_endpoint, faults) as proxy:
        through = replace(
            job, bigquery=BigQueryConfig(job.bigquery.rest_endpoint, proxy.endpoint,
                                         job.bigquery.project),
        )  # fmt: skip
        results = staged(write, table, (0, 40))
        if empty_answers < 5:  # answered again, committed
            record = BatchCommitter(through, 4).commit(results)
            assert record.committed
            assert record.commit_time is not None
            assert count(rest, table) == (40, 40)
        else:  # never confirmed: refused, the intent kept for a restart to settle
            with pytest.raises(CommitRejectedError, match="did not confirm the commit"):
                BatchCommitter(through, 4).commit(results)
            assert count(rest, table) == (0, 0)
            kept = job.ledger().batch(4)
            assert kept is not None
            assert kept.state == "intent"
    assert len(proxy.fired) == empty_answers


# -- BigQuery's 4-hour buffer (issue 55, item 2) -------------------------------------


@pytest.fixture
def short_buffer(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """BigQuery's buffer time and the sink's rule for it, both shortened to 1 s: the
    local BigQuery drops a finalized PENDING stream's rows 1 s after (``pending_buffer``),
    the sink commits none finalized longer ago."""
    from onceover_jobs.sink.wire import commit_limits
    from onceover_tools.localbq.limits import limited

    monkeypatch.setattr(commit_limits, "PENDING_BUFFER_S", 1.0)
    monkeypatch.setattr(commit_limits, "BUFFER_MARGIN_S", 0.0)
    with limited(pending_buffer_s=1.0):
        yield 1.0


def finalized_now(results: list[TaskResult]) -> list[TaskResult]:
    """``results`` as the pending mode's tasks return them: each with its finalize time."""
    now = datetime.now(UTC).isoformat()
    return [replace(r, finalized_at=now) for r in results]


def wait_past(seconds: float) -> None:
    """Until ``seconds`` have passed: the buffer's own time is what the test is about."""
    start = time.monotonic()
    wait_until("the buffer's time to pass", lambda: time.monotonic() - start > seconds or None, 10)


def test_a_batch_finalized_longer_ago_than_bigquery_keeps_it_is_never_committed_blind(
    job: SinkJob, write: BigQueryWriteClient, rest: bigquery.Client, table: str,
    short_buffer: float,
) -> None:  # fmt: skip
    """Committed anyway, the commit would succeed and the rows would be gone (the
    local BigQuery shows it: tests/localbq/test_limits.py). Refused before its intent; the
    replay writes the batch again on new streams, once."""
    late = finalized_now(staged(write, table, (0, 30), (30, 30)))
    wait_past(short_buffer + 0.2)
    with pytest.raises(PendingBufferError, match=r"2 of its 2 streams .* finalized more than"):
        BatchCommitter(job, 6).commit(late)
    assert job.ledger().batch(6) is None  # no intent
    assert count(rest, table) == (0, 0)

    replay = finalized_now(staged(write, table, (0, 30), (30, 30)))
    assert BatchCommitter(job, 6).commit(replay).committed
    assert count(rest, table) == (60, 60)


def test_an_intent_left_past_the_buffer_time_is_written_again_not_committed(
    job: SinkJob, write: BigQueryWriteClient, rest: bigquery.Client, table: str,
    monkeypatch: pytest.MonkeyPatch, short_buffer: float,
) -> None:  # fmt: skip
    """A driver that stopped between its intent and its commit, resumed after BigQuery
    dropped the rows: the intent's streams are not committed (their rows may be gone),
    the replay's are, and the batch is in the table once."""
    monkeypatch.setenv(failpoints.ENV, "commit.before=error@1")
    failpoints.reset()
    first = finalized_now(staged(write, table, (0, 25)))
    with pytest.raises(Exception, match=r"commit\.before"):
        BatchCommitter(job, 7).commit(first)
    assert job.ledger().batch(7) is not None
    wait_past(short_buffer + 0.2)

    replay = finalized_now(staged(write, table, (0, 25)))
    record = BatchCommitter(job, 7).commit(replay)
    assert [s.stream for s in record.streams] == [replay[0].stream]
    assert count(rest, table) == (25, 25)
