"""OpenLineage run events of the sink (issue 29, item 3): found as the OpenLineage clients
find their receiver, sent one a POST through the emitter's spool, and received by a
stand-in that validates each with the openlineage-python client's models and the
receipts facet's schema (tests/helpers/lineage_receiver.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_jobs.outbox import EventEmitter, default_spool_root, spool_dirs
from onceover_jobs.sink.errors import LineageConfigError, SinkOptionError
from onceover_jobs.sink.job.lineage_config import LineageConfig, resolve
from onceover_jobs.sink.reporting.lineage import (
    BIGQUERY_NAMESPACE,
    SPOOL_FOLDER,
    first_start,
    lineage_run_id,
    run_event,
    wire,
)
from onceover_tools.chaos.runner import ORDER_SCHEMA
from pyspark.sql import SparkSession
from pyspark.sql import functions as fn

from onceover.key_checksum import key_checksum_sql
from onceover.ledger_files import BatchRecord, StreamCommit, scope_records
from tests.helpers.lineage_receiver import API_KEY, LineageReceiver, receipts_of
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import count, create_refusing_table
from tests.sink.test_streaming import SOURCE_SCHEMA

STAMP = [
    bigquery.SchemaField("_onceover_run_id", "STRING"),
    bigquery.SchemaField("_onceover_batch_id", "INT64"),
]


@pytest.fixture
def lineage() -> Iterator[LineageReceiver]:
    server = LineageReceiver()
    server.up()
    yield server
    server.down()


def _options(receiver: LineageReceiver) -> dict[str, str]:
    return {"openlineage.url": receiver.url, "openlineage.api_key": API_KEY}


def _at_least(receiver: LineageReceiver, n: int) -> list[dict[str, Any]] | None:
    events = receiver.received()
    return events if len(events) >= n else None


# -- configuration ----------------------------------------------------------------------


def _yml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


HTTP_YML = """
transport:
  type: http
  url: http://from-file:5000
  endpoint: api/v1/lineage
  auth:
    type: api_key
    apiKey: file-key
"""


def test_the_receiver_is_found_in_the_openlineage_clients_order(tmp_path: Path) -> None:
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    env = {"OPENLINEAGE_URL": "http://from-env:5000", "OPENLINEAGE_API_KEY": "env-key"}

    def found(options: dict[str, str], environ: dict[str, str]) -> LineageConfig | None:
        return resolve(options, environ, cwd, home)

    # Nothing set: nothing sent. The variables alone: them, with the client's endpoint.
    assert found({}, {}) is None
    by_env = found({}, {**env, "OPENLINEAGE_ENDPOINT": "/custom/lineage"})
    assert by_env is not None
    assert (by_env.target, by_env.api_key) == ("http://from-env:5000/custom/lineage", "env-key")
    # ~/.openlineage/openlineage.yml comes before the variables, ./openlineage.yml before it.
    _yml(home / ".openlineage" / "openlineage.yml", HTTP_YML.replace("from-file", "from-home"))
    assert getattr(found({}, env), "url", None) == "http://from-home:5000"
    _yml(cwd / "openlineage.yml", HTTP_YML)
    in_cwd = found({}, env)
    assert in_cwd is not None
    assert (in_cwd.target, in_cwd.api_key) == ("http://from-file:5000/api/v1/lineage", "file-key")
    # OPENLINEAGE_CONFIG before both files; the sink's options before any file.
    named = _yml(tmp_path / "named.yml", HTTP_YML.replace("from-file", "named"))
    assert getattr(found({}, {**env, "OPENLINEAGE_CONFIG": str(named)}), "url", "") == (
        "http://named:5000"
    )
    by_option = found({"openlineage.url": "http://option:1"}, env)
    assert by_option is not None
    assert (by_option.url, by_option.api_key, by_option.namespace) == (
        "http://option:1",
        None,
        "default",
    )
    # OPENLINEAGE_DISABLED wins over everything; the namespace is the clients' variable.
    assert found({"openlineage.url": "http://option:1"}, {"OPENLINEAGE_DISABLED": "true"}) is None
    named_ns = found({}, {**env, "OPENLINEAGE_NAMESPACE": "billing"})
    assert getattr(named_ns, "namespace", None) == "billing"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("transport:\n  type: kafka\n  topic: lineage\n", "transport.type"),
        ("transport:\n  type: http\n", "transport.url"),
        (
            "transport:\n  type: http\n  url: http://x\n  auth:\n    type: jwt\n",
            "transport.auth.type",
        ),
        ("transport:\n  type: http\n  url: http://x\n  auth:\n    type: api_key\n", "apiKey"),
        ("transport:\n  type: http\n  url: ftp://x\n", "transport.url"),
    ],
)
def test_a_wrong_config_file_is_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = _yml(tmp_path / "openlineage.yml", text)
    with pytest.raises(LineageConfigError, match=field) as caught:
        resolve({}, {"OPENLINEAGE_CONFIG": str(path)}, tmp_path, tmp_path)
    assert str(path) in str(caught.value)
    if field == "transport.type":
        assert "'kafka' is not supported: the sink sends its events over http only" in str(
            caught.value
        )


def test_wrong_options_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(SinkOptionError, match=r"openlineage\.url"):
        resolve({"openlineage.url": "lineage:5000"}, {}, tmp_path, tmp_path)
    with pytest.raises(SinkOptionError, match=r"openlineage\.run_id"):
        resolve(
            {"openlineage.url": "http://x", "openlineage.run_id": "r-1"}, {}, tmp_path, tmp_path
        )
    with pytest.raises(LineageConfigError, match="OPENLINEAGE_CONFIG"):
        resolve({}, {"OPENLINEAGE_CONFIG": str(tmp_path / "gone.yml")}, tmp_path, tmp_path)


# -- the wire ---------------------------------------------------------------------------


def _record(batch: int) -> BatchRecord:
    return BatchRecord(
        query_id="q-1", batch_id=batch, table="p.d.t", mode="buffered", state="committed",
        streams=(StreamCommit("s-0", 5, 500, 0, 0), StreamCommit("s-1", 3, 300, 1, 0)),
        expected_rows=8, intent_at="2026-11-25T10:00:00+00:00",
        committed_at="2026-11-25T10:00:01+00:00", offsets=('{"logOffset":0}',),
    )  # fmt: skip


def _event(config: LineageConfig, kind: Any, **extra: Any) -> dict[str, Any]:
    return run_event(
        kind, config=config, run_uuid=lineage_run_id("r-1", "driver-a"), job_name="orders",
        streaming=True, table="p.d.t", onceover_run_id="r-1", attempt_id="driver-a", **extra,
    )  # fmt: skip


def test_each_event_is_its_own_post_with_the_api_key_and_a_bad_one_is_set_aside(
    tmp_path: Path, lineage: LineageReceiver
) -> None:
    config = LineageConfig(url=lineage.url, api_key=API_KEY)
    emitter = EventEmitter(
        config.target, API_KEY, tmp_path / "spool", wire=wire(config), flush_interval_s=0.05
    )
    bad = _event(config, "RUNNING", receipts=[_record(1)])
    bad["run"]["runId"] = "not-a-uuid"
    try:
        emitter.emit(_event(config, "START"))
        emitter.emit(_event(config, "RUNNING", receipts=[_record(0)]))
        emitter.emit(bad)
        emitter.emit(_event(config, "FAIL", error="micro-batch 2: Spark aborted the write"))
        assert emitter.flush(30)
    finally:
        emitter.close(1)
    assert [e["eventType"] for e in lineage.received()] == ["START", "RUNNING", "FAIL"]
    assert lineage.posts == 4  # one event a POST
    assert (emitter.delivered, emitter.rejected) == (3, 1)
    assert "runId" in lineage.refused[0] or "UUID" in lineage.refused[0]
    kept = json.loads((tmp_path / "spool" / "rejected.jsonl").read_text())
    assert kept["status"] == 400
    assert kept["events"][0]["run"]["runId"] == "not-a-uuid"


def test_the_start_of_a_run_attempt_is_sent_once(tmp_path: Path) -> None:
    run = lineage_run_id("r-1", "driver-a")
    assert first_start(run, tmp_path)
    assert not first_start(run, tmp_path)
    assert first_start(lineage_run_id("r-1", "driver-b"), tmp_path)


# -- the sink, on the shared Spark session -----------------------------------------------


def _checksum(rest: bigquery.Client, table: str, where: str) -> int:
    query = f"SELECT {key_checksum_sql('event_id')} AS c FROM `{table}` WHERE {where}"
    return int(next(iter(rest.query_and_wait(query)))["c"])


def test_a_batch_write_sends_start_then_complete_with_the_table_and_its_receipt(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path,
    lineage: LineageReceiver,
) -> None:  # fmt: skip
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA + STAMP))
    source = tmp_path / "orders"
    write_files(source, 400, 2, "json")
    (
        spark.read.schema(SOURCE_SCHEMA).json(str(source)).write.format("onceover")
        .mode("append").option("table", table).option("key", "event_id")
        .option("stamp", "true").option("run_id", "lineage-ok").option("job", "orders-daily")
        .option("ledger", str(tmp_path / "ledger")).options(**_options(lineage)).save()
    )  # fmt: skip

    events = wait_until("START and COMPLETE", lambda: _at_least(lineage, 2), 30)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert lineage.refused == []
    start, complete = events
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert start["job"] == complete["job"]
    assert (start["job"]["namespace"], start["job"]["name"]) == ("default", "orders-daily")
    assert start["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert start["eventTime"] <= complete["eventTime"]
    (output,) = complete["outputs"]
    assert (output["namespace"], output["name"]) == (BIGQUERY_NAMESPACE, table)
    columns = [f["name"] for f in output["facets"]["schema"]["fields"]]
    assert columns == [f.name for f in rest.get_table(table).schema]
    # The receipt is the ledger's, and the table holds what it says.
    (receipt,) = receipts_of(complete)
    (record,) = scope_records(tmp_path / "ledger", "lineage-ok")
    rows, distinct = count_rows(rest, table)
    assert receipt["rows"] == rows == distinct == 400
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 400
    assert output["outputFacets"]["outputStatistics"]["size"] == receipt["bytes"] > 0
    assert (
        receipt["keyChecksum"]
        == record.key_checksum
        == _checksum(rest, table, "_onceover_run_id = 'lineage-ok'")
    )
    assert receipt["commitTime"] == record.commit_time
    assert {s["stream"] for s in receipt["streams"]} == {s.stream for s in record.streams}
    assert receipts_of(start) == []


def count_rows(rest: bigquery.Client, table: str) -> tuple[int, int]:
    row = next(iter(rest.query_and_wait(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS k FROM `{table}`"
    )))  # fmt: skip
    return int(row["n"]), int(row["k"])


def test_an_aborted_write_sends_fail_with_the_error(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path,
    lineage: LineageReceiver,
) -> None:  # fmt: skip
    table = create_refusing_table(rest, f"{dataset}.names")
    bad = spark.range(0, 20, 1, 1).select("id", fn.lit("much-too-long").alias("name"))
    with pytest.raises(Exception, match=r"much-too-long|Field name"):
        (
            bad.write.format("onceover").mode("append").option("table", table)
            .option("run_id", "lineage-bad").option("ledger", str(tmp_path / "ledger"))
            .options(**_options(lineage)).save()
        )  # fmt: skip
    events = wait_until("START and FAIL", lambda: lineage.of_type("FAIL") or None, 30)
    assert [e["eventType"] for e in lineage.received()] == ["START", "FAIL"]
    (fail,) = events
    assert "Spark aborted the write" in fail["run"]["facets"]["errorMessage"]["message"]
    assert receipts_of(fail) == []
    assert count(rest, table) == (0, 0)


def test_a_streaming_query_sends_running_per_committed_micro_batch(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path,
    lineage: LineageReceiver,
) -> None:  # fmt: skip
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 300, 2, "json")
    query = (
        spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
        .json(str(source)).writeStream.format("onceover").option("table", table)
        .options(**_options(lineage)).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()

    wait_until("START and two RUNNING", lambda: _at_least(lineage, 3), 30)
    running = lineage.of_type("RUNNING")
    assert [e["eventType"] for e in lineage.received()] == ["START", "RUNNING", "RUNNING"]
    assert lineage.refused == []
    assert {e["run"]["runId"] for e in lineage.received()} == {running[0]["run"]["runId"]}
    assert running[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    ledger = {r.batch_id: r for r in scope_records(checkpoint / "onceover", query.id)}
    for batch, event in enumerate(running):
        (receipt,) = receipts_of(event)
        assert (receipt["query"], receipt["batch"]) == (query.id, batch)
        assert receipt["rows"] == ledger[batch].expected_rows == 150
        assert receipt["sourceOffsets"] == list(ledger[batch].offsets or ())
        assert event["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 150
    assert count_rows(rest, table) == (300, 300)


def test_the_receiver_down_spools_the_events_and_they_are_delivered_later(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = create_refusing_table(rest, f"{dataset}.names")
    receiver = LineageReceiver()
    receiver.up()
    receiver.down()  # a port nothing listens on, for now
    config = LineageConfig(url=receiver.url, api_key=API_KEY)
    # Where the driver's workers spool (their environment is this process's).
    spool = spool_dirs(default_spool_root() / SPOOL_FOLDER, config.target, API_KEY)[0]
    good = spark.range(0, 50, 1, 1).select("id", fn.lit("ok").alias("name"))
    started = time.monotonic()
    (
        good.write.format("onceover").mode("append").option("table", table)
        .option("run_id", "lineage-later").option("ledger", str(tmp_path / "ledger"))
        .options(**_options(receiver)).save()
    )  # fmt: skip
    took = time.monotonic() - started

    def spooled() -> list[dict[str, Any]] | None:
        lines = [
            json.loads(line)
            for path in sorted(spool.glob("events-*"))
            for line in path.read_text().splitlines()
        ]
        return lines if len(lines) >= 2 else None

    held = wait_until("START and COMPLETE in the spool", spooled, 30)
    assert [e["eventType"] for e in held] == ["START", "COMPLETE"]
    assert count(rest, table) == (50, 50)
    # Refused connections cost the commit nothing like the flush's 2 s allowance.
    assert took < 30, took

    receiver.up()  # on the same port
    try:
        # Any emitter of this receiver and key sends the spool: the workers' own, or this one.
        emitter = EventEmitter(config.target, API_KEY, spool, wire=wire(config))
        try:
            emitter.flush(30)
            events = wait_until("the spooled events delivered", lambda: _at_least(receiver, 2), 30)
        finally:
            emitter.close(1)
    finally:
        receiver.down()
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert receipts_of(events[1])[0]["rows"] == 50
    assert receiver.refused == []


def test_a_wrong_config_file_fails_the_write_before_a_row_naming_the_field(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = create_refusing_table(rest, f"{dataset}.names")
    path = _yml(tmp_path / "openlineage.yml", "transport:\n  type: kafka\n  topic: lineage\n")
    frame = spark.range(0, 10, 1, 1).select("id", fn.lit("ok").alias("name"))
    with pytest.raises(Exception, match=r"transport\.type: 'kafka' is not supported") as caught:
        (
            frame.write.format("onceover").mode("append").option("table", table)
            .option("run_id", "lineage-config").option("ledger", str(tmp_path / "ledger"))
            .option("openlineage.config", str(path)).save()
        )  # fmt: skip
    assert str(path) in str(caught.value)
    assert count(rest, table) == (0, 0)
