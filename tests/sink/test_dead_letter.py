"""Rows BigQuery refuses: named, and with ``dead_letter`` set aside exactly once while
the rest lands exactly once, in every mode.

The local BigQuery checks column rules as BigQuery does (launcher patch ``row_errors``):
a request with a value too long for ``STRING(5)`` is refused whole, with ``row_errors``.
The tests play Spark's part (a task per partition, retried; the driver's commit, failed
between its two commits and replayed) and count rows in both tables in BigQuery."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import RowsRejectedError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.protocol.task import write_partition
from onceover_jobs.sink.rows.dead_letter import DEAD_LETTER_FIELDS, column_named

from onceover.bigquery import BigQueryConfig
from tests.helpers.writeapi import ARROW_SCHEMA, count, create_refusing_table, streaming_job

PARTITION_ROWS = 1_000
BAD = {0: (3, 250, 251, 999), 1: (0, 640)}
"""Partition → offsets of the rows whose ``name`` is too long for ``STRING(5)``."""
TOO_LONG = "much-too-long"
GOOD_ROWS = 2 * PARTITION_ROWS - sum(len(v) for v in BAD.values())


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_refusing_table(rest, f"{dataset}.refusing")


def fails_at(
    monkeypatch: pytest.MonkeyPatch, spec: str, pattern: str, call: Callable[[], object]
) -> None:
    """``call`` with the failpoints of ``spec`` armed fails at the one named ``pattern``;
    they are disarmed after."""
    monkeypatch.setenv(failpoints.ENV, spec)
    failpoints.reset()
    try:
        with pytest.raises(Exception, match=pattern):
            call()
    finally:
        monkeypatch.delenv(failpoints.ENV)
        failpoints.reset()


def job_for(
    bq_config: BigQueryConfig, table: str, tmp_path: Path, mode: str, **options: str
) -> SinkJob:
    return streaming_job(
        bq_config, table, tmp_path, mode=mode, key="id", **{"request.max_bytes": "10000"}, **options
    )


def partition_rows(partition: int) -> pa.RecordBatch:
    start = partition * PARTITION_ROWS
    names = [TOO_LONG if i in BAD[partition] else f"n{i % 1000}" for i in range(PARTITION_ROWS)]
    ids = list(range(start, start + PARTITION_ROWS))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(names)], schema=ARROW_SCHEMA)


def write(job: SinkJob, partition: int, attempt: int = 0, batch: int = 0) -> TaskResult:
    return write_partition(
        job, [partition_rows(partition)], TaskContextInfo(partition, attempt, batch)
    )


def set_aside(rest: bigquery.Client, table: str) -> list[tuple[int, int, str | None, str | None]]:
    """(partition, offset, key, column) of every row in the dead-letter table."""
    found = rest.query_and_wait(
        f"SELECT `partition`, `offset`, `key`, `column`, `row` FROM `{table}` "
        "ORDER BY `partition`, `offset`"
    )
    rows = []
    for row in found:
        assert json.loads(row["row"])["name"] == TOO_LONG  # the row as it was sent
        rows.append((int(row["partition"]), int(row["offset"]), row["key"], row["column"]))
    return rows


EXPECTED_ASIDE = [
    (p, o, str(p * PARTITION_ROWS + o), "name")
    for p, offsets in sorted(BAD.items())
    for o in offsets
]


@pytest.mark.parametrize(
    ("mode", "row_format"),
    [("pending", "arrow"), ("buffered", "arrow"), ("committed", "arrow"), ("committed", "proto")],
)
def test_bad_rows_are_set_aside_once_and_the_rest_land_once_after_a_retry_and_a_crash(
    mode: str,
    row_format: str,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Partition 0's first attempt dies after some appends (one of them a request with
    refused rows, sent again without them); its retry writes the partition again. The
    driver then fails right after its first commit (the dead-letter table's), and the
    replay of the batch finishes it. Counted in BigQuery: each good row once in the
    table, each bad row once in the dead-letter table."""
    dead_letter = f"{dataset}.refused_{mode}_{row_format}"
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    ensure_dead_letter_table(bq_config, dead_letter)  # what the driver does first
    job = job_for(bq_config, table, tmp_path, mode, dead_letter=dead_letter, row_format=row_format)

    fails_at(monkeypatch, "append.response=error@4", r"append\.response", lambda: write(job, 0))
    results = [write(job, 0, attempt=1), write(job, 1)]
    assert [r.dead_letters.rows if r.dead_letters else 0 for r in results] == [4, 2]

    commit = BatchCommitter(job, 0).commit
    fails_at(monkeypatch, "commit.after=error@1", r"commit\.after", lambda: commit(results))
    assert len(set_aside(rest, dead_letter)) == 6  # the first commit took effect

    replayed = [write(job, 0, attempt=0), write(job, 1, attempt=0)]
    record = BatchCommitter(job, 0).commit(replayed)
    assert record.committed
    assert record.dead_lettered_rows == 6
    assert record.expected_rows == GOOD_ROWS
    assert count(rest, table) == (GOOD_ROWS, GOOD_ROWS)
    assert set_aside(rest, dead_letter) == EXPECTED_ASIDE


def test_without_a_dead_letter_table_the_write_fails_naming_each_row(
    bq_config: BigQueryConfig, rest: bigquery.Client, table: str, tmp_path: Path
) -> None:
    job = job_for(bq_config, table, tmp_path, "pending")
    with pytest.raises(RowsRejectedError) as refused:
        write(job, 0)
    message = str(refused.value)
    assert "partition 0 offset 3 key '3' column name" in message
    assert "partition 0 offset 250 key '250' column name" in message
    offsets = [row.offset for row in refused.value.rows]  # the first refused request's
    assert offsets[0] == 3
    assert set(offsets) <= set(BAD[0])
    assert "dead_letter" in message
    assert count(rest, table) == (0, 0)


def test_the_first_twenty_are_named_then_counted() -> None:
    from onceover_jobs.sink.rows.dead_letter import RefusedRow, describe_refused

    rows = [RefusedRow(0, i, str(i), "name", "too long", "{}") for i in range(25)]
    text = describe_refused(rows, "p.d.t")
    assert text.startswith("BigQuery refused 25 rows for p.d.t: partition 0 offset 0 key '0'")
    assert "offset 19 " in text
    assert "offset 20 " not in text
    assert text.endswith("; and 5 more")


def test_the_column_is_the_longest_name_the_message_holds() -> None:
    columns = ["name", "address", "address.city", "id", "value", "length"]
    assert column_named("Field name: STRING(5) value is 7 characters long", columns) == "name"
    assert column_named("Field address.city: exceeds max length 5", columns) == "address.city"
    assert column_named("the name is too long", columns) == "name"
    assert column_named("something else", columns) is None
    assert column_named("identity", columns) is None  # a word, not a prefix


def test_the_dead_letter_table_is_created_with_its_documented_columns(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    table = f"{dataset}.dead_letters"
    ensure_dead_letter_table(bq_config, table)
    ensure_dead_letter_table(bq_config, table)  # found, and fits
    schema = rest.get_table(table).schema
    assert [f.name for f in schema] == [name for name, *_ in DEAD_LETTER_FIELDS]


def test_a_dead_letter_table_without_the_columns_is_refused_naming_them(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    from onceover_jobs.sink.errors import SinkOptionError
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    table = f"{dataset}.not_dead_letters"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("run_id", "INT64")]))
    with pytest.raises(
        SinkOptionError, match=r"dead_letter.*run_id is INT64, not STRING;.*reason missing"
    ):
        ensure_dead_letter_table(bq_config, table)


def test_a_committed_retry_after_rows_were_refused_and_acknowledged_lands_the_rest_once(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the chaos harness (``bad_rows``, committed mode): the first attempt's
    first request had a refused row and was acknowledged without it, and the attempt
    died with later requests in flight. Its retry reads the partition again from the
    first row: each row's stream offset is lower by the refused rows before it, counted
    once (counted twice, every request went one offset too low, BigQuery answered
    ALREADY_EXISTS, and the partition's tail was neither written nor set aside)."""
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    dead_letter = f"{dataset}.refused_after_ack"
    ensure_dead_letter_table(bq_config, dead_letter)
    job = streaming_job(
        bq_config, table, tmp_path, mode="committed", key="id", dead_letter=dead_letter,
        **{"request.max_bytes": "10000", "append.max_inflight": "1"},
    )  # fmt: skip
    # Requests of 416, 416 and 168 rows; the first refused (3 rows), sent again and
    # acknowledged; the second applied, its answer lost: the attempt fails there.
    fails_at(monkeypatch, "append.response=error@3", r"append\.response", lambda: write(job, 0))
    progress = job.ledger().partition(0, 0)
    assert progress is not None
    assert [o for o, _, _ in progress.refused] == [3, 250, 251]
    assert progress.acked_rows == 416  # the first request, acknowledged without them

    results = [write(job, 0, attempt=1), write(job, 1)]
    BatchCommitter(job, 0).commit(results)
    assert count(rest, table) == (GOOD_ROWS, GOOD_ROWS)
    assert set_aside(rest, dead_letter) == EXPECTED_ASIDE


def test_rows_set_aside_are_sent_in_the_jobs_row_format(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``row_format=proto`` is for a project that refuses Arrow: the rows set aside go to
    the dead-letter table as proto rows too, or that project fails on its first bad row."""
    from onceover_jobs.sink.modes import staging
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table
    from onceover_jobs.sink.wire.appender import StreamAppender

    sent: dict[str, set[str]] = {}

    class Recording(StreamAppender):
        def __init__(self, client: Any, stream: str, **options: Any) -> None:
            encoder = options["schema_payload"].__self__  # what writes each request's rows
            sent.setdefault(stream.split("/streams/", maxsplit=1)[0].rsplit("/", 1)[1], set()).add(
                type(encoder).__name__
            )
            super().__init__(client, stream, **options)

    monkeypatch.setattr(staging, "StreamAppender", Recording)
    dead_letter = f"{dataset}.refused"
    ensure_dead_letter_table(bq_config, dead_letter)
    job = job_for(
        bq_config, table, tmp_path, "pending", dead_letter=dead_letter, row_format="proto"
    )
    result = write(job, 1)
    assert BatchCommitter(job, 0).commit([result]).committed
    assert sent == {table.rsplit(".", 1)[1]: {"ProtoEncoder"}, "refused": {"ProtoEncoder"}}
    assert [row[:2] for row in set_aside(rest, dead_letter)] == [(1, o) for o in BAD[1]]


# -- DATETIME text that is none: refused by the sink itself, the same way -------------

DATETIME_FIELDS = [
    bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("at", "DATETIME"),
]
DATETIME_TEXT = pa.schema([("id", pa.int64()), ("at", pa.string())])
NO_DATETIME = {0: {5: "noon", 130: "2024-02-30 10:00:00", 131: "2024-01-01T10:00:00Z"},
               1: {0: "2024/01/01"}}  # fmt: skip
"""Partition → offset → a text that is no DATETIME."""


def datetime_job(
    bq_config: BigQueryConfig, table: str, tmp_path: Path, mode: str, **options: str
) -> SinkJob:
    from dataclasses import replace

    from onceover_jobs.sink.rows.schema import plan_write

    job = job_for(bq_config, table, tmp_path, mode, **options)
    return replace(
        job,
        plan=plan_write(table, DATETIME_TEXT, DATETIME_FIELDS),
        table_fields=tuple(f.to_api_repr() for f in DATETIME_FIELDS),
    )


def civil(i: int) -> str:
    """Row ``i``'s DATETIME text, in the literal's several forms."""
    forms = ("2024-02-29 13:05:09.{:06d}", "2024-2-29T13:05:09.{:06d}", "2024-02-29")
    return forms[i % 3].format(i)


def datetime_rows(partition: int) -> pa.RecordBatch:
    start = partition * PARTITION_ROWS
    texts = [NO_DATETIME[partition].get(i, civil(start + i)) for i in range(PARTITION_ROWS)]
    ids = list(range(start, start + PARTITION_ROWS))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(texts)], schema=DATETIME_TEXT)


def write_datetimes(job: SinkJob, partition: int, attempt: int = 0) -> TaskResult:
    return write_partition(job, [datetime_rows(partition)], TaskContextInfo(partition, attempt, 0))


@pytest.mark.parametrize(
    ("mode", "row_format"), [("pending", "arrow"), ("committed", "arrow"), ("committed", "proto")]
)
def test_datetime_text_that_is_none_is_set_aside_once_and_the_rest_lands_once(
    mode: str,
    row_format: str,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sink refuses such a row before sending (BigQuery has no value for it), and it
    goes where a row BigQuery refused goes: named, set aside exactly once, the rest
    written exactly once, across a failed attempt and its retry."""
    from onceover_jobs.sink.rows.dead_letter import ensure_dead_letter_table

    table = f"{dataset}.datetimes"
    rest.create_table(bigquery.Table(table, schema=DATETIME_FIELDS))
    dead_letter = f"{dataset}.no_datetime_{mode}_{row_format}"
    ensure_dead_letter_table(bq_config, dead_letter)
    job = datetime_job(bq_config, table, tmp_path, mode, dead_letter=dead_letter,
                       row_format=row_format)  # fmt: skip

    fails_at(
        monkeypatch, "append.response=error@4", r"append\.response",
        lambda: write_datetimes(job, 0),
    )  # fmt: skip
    if mode == "committed":  # the retry must know what the failed attempt set aside
        progress = job.ledger().partition(0, 0)
        assert progress is not None
        assert [(o, c) for o, c, _ in progress.refused] == [(5, "at"), (130, "at"), (131, "at")]
    results = [write_datetimes(job, 0, attempt=1), write_datetimes(job, 1)]
    assert [r.dead_letters.rows if r.dead_letters else 0 for r in results] == [3, 1]
    assert BatchCommitter(job, 0).commit(results).committed

    good = 2 * PARTITION_ROWS - 4
    assert count(rest, table) == (good, good)
    stored = {
        row["id"]: row["at"]
        for row in rest.query_and_wait(f"SELECT id, `at` FROM `{table}` WHERE id IN (0, 1, 2, 999)")
    }
    assert stored == {
        0: dt.datetime(2024, 2, 29, 13, 5, 9, 0),
        1: dt.datetime(2024, 2, 29, 13, 5, 9, 1),
        2: dt.datetime(2024, 2, 29),
        999: dt.datetime(2024, 2, 29, 13, 5, 9, 999),
    }
    aside = list(rest.query_and_wait(
        f"SELECT `partition`, `offset`, `key`, `column`, reason, `row` FROM `{dead_letter}` "
        "ORDER BY `partition`, `offset`"
    ))  # fmt: skip
    found = [(r["partition"], r["offset"], r["key"], r["column"], json.loads(r["row"])["at"])
             for r in aside]  # fmt: skip
    assert found == [
        (p, o, str(p * PARTITION_ROWS + o), "at", text)
        for p, texts in sorted(NO_DATETIME.items())
        for o, text in sorted(texts.items())
    ]
    reasons = [r["reason"] for r in aside]
    assert "is not a DATETIME literal" in reasons[0]
    assert "no such day or time" in reasons[1]


def test_without_a_dead_letter_table_datetime_text_that_is_none_fails_naming_the_row(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.datetimes"
    rest.create_table(bigquery.Table(table, schema=DATETIME_FIELDS))
    job = datetime_job(bq_config, table, tmp_path, "pending")

    with pytest.raises(RowsRejectedError) as refused:
        write_datetimes(job, 0)

    message = str(refused.value)
    assert "partition 0 offset 5 key '5' column at: Field at: 'noon' is not a DATETIME" in message
    assert "dead_letter" in message
    assert count(rest, table) == (0, 0)
