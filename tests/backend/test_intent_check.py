"""What the dry-run plan says of a batch the ledger holds as intended, asked of the local
BigQuery's real Write API: committed in BigQuery though not in the checkpoint (with
BigQuery's commit time as proof), not committed, streams BigQuery no longer knows."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

from google.api_core.exceptions import NotFound
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_backend.services.resume.intent_check import IntentChecker
from onceover_tools.localbq.limits import limited

from onceover.bigquery import BigQueryConfig, write_client
from onceover.ledger_files import BatchRecord, StreamCommit
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import (
    append_all,
    append_request,
    commit,
    create_stream,
    create_table,
    rows,
)


def finalized_stream(write: BigQueryWriteClient, table: str) -> str:
    stream = create_stream(write, table, types.WriteStream.Type.PENDING).name
    append_all(write, [append_request(stream, rows(0, 10), 0)])
    write.finalize_write_stream(name=stream)
    return stream


def intent(table: str, *streams: str, mode: str = "pending") -> BatchRecord:
    return BatchRecord(
        query_id="q1", batch_id=3, table=table, mode=mode, state="intent",
        streams=tuple(StreamCommit(s, 10, 100, i, 0) for i, s in enumerate(streams)),
        expected_rows=10 * len(streams), intent_at="2026-11-25T10:00:00Z",
    )  # fmt: skip


def test_a_batch_bigquery_committed_is_shown_with_its_commit_time(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    write = write_client(bq_config)
    streams = [finalized_stream(write, table), finalized_stream(write, table)]
    answer = commit(write, table, *streams)  # the driver died before recording it

    found = IntentChecker(bq_config).check(intent(table, *streams))

    assert found.in_bigquery == "committed"
    assert found.commit_time == cast(datetime, answer.commit_time).isoformat()  # proto-plus
    assert found.resume_will.startswith("record it committed and skip it")


def test_finalized_streams_not_committed_are_committed_by_the_resume(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    write = write_client(bq_config)
    found = IntentChecker(bq_config).check(intent(table, finalized_stream(write, table)))
    assert (found.in_bigquery, found.commit_time) == ("not_committed", None)
    assert found.resume_will.startswith("commit its streams")


def test_streams_bigquery_no_longer_knows(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table = create_table(rest, dataset)
    write = write_client(bq_config)
    checker = IntentChecker(bq_config)
    # BigQuery forgets a PENDING stream not committed within its lifetime (a day; here
    # half a second, launcher patch stream_lifetimes) and then answers NOT_FOUND.
    with limited(pending_lifetime_s=0.5):
        gone = finalized_stream(write, table)
        wait_until("the stream to expire", lambda: _gone(write, gone), 10)
        never_asked = checker.check(intent(table, gone))
        asked = checker.check(
            replace(intent(table, gone), commit_started_at="2026-11-25T10:00:01Z")
        )

    assert never_asked.in_bigquery == asked.in_bigquery == "streams_gone"
    assert never_asked.resume_will.startswith("write the batch again")
    assert asked.resume_will.startswith("stop and ask a person")


def _gone(write: BigQueryWriteClient, stream: str) -> bool | None:
    try:
        write.get_write_stream(name=stream, retry=None, timeout=5)
    except NotFound:
        return True
    return None


def test_other_modes_need_no_question() -> None:
    checker = IntentChecker(BigQueryConfig())  # never asked: no client is built
    assert checker.check(intent("p.d.t", "s", mode="committed")).in_bigquery == "committed"
    assert checker.check(intent("p.d.t", "s", mode="buffered")).in_bigquery == "unknown"


def test_a_mode_this_control_plane_does_not_know_is_said_so_not_guessed() -> None:
    """A ledger written by a newer sink: the plan says it cannot tell, and never asks
    BigQuery as if the batch were another mode's."""
    checker = IntentChecker(BigQueryConfig())  # never asked: no client is built
    found = checker.check(intent("p.d.t", "s", mode="overwrite"))
    assert (found.in_bigquery, found.commit_time) == ("unknown", None)
    assert "'overwrite'" in found.resume_will
    assert "the modes are pending, buffered, committed, default" in found.resume_will
