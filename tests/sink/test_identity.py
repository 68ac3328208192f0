"""Write identities without Spark: local properties read, ordinals counted, records filed
under their write, the old layout still read, the shared-ledger probe."""

from __future__ import annotations

from pathlib import Path

import pytest
from onceover_jobs.sink.errors import LedgerNotSharedError
from onceover_jobs.sink.ledger.identity import SparkCall, WriteIdentity
from onceover_jobs.sink.ledger.leases import check_probe, leave_probe
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_replacing

from onceover.ledger_files import BatchRecord, scope_records, scopes

SESSION = "spark-session-23859882-1bdc-4064-aa48-bf8074e3919d"


def record(batch_id: int | None, table: str = "p.d.t") -> BatchRecord:
    return BatchRecord(
        query_id="q", batch_id=batch_id, table=table, mode="pending", state="intent",
        streams=(), expected_rows=0, intent_at="2026-11-24T00:00:00Z",
    )  # fmt: skip


def test_spark_local_properties_tell_foreach_batch_from_a_batch_write() -> None:
    foreach = SparkCall.from_properties(
        {
            "sql.streaming.queryId": "q-1",
            "streaming.sql.batchId": "7",
            "spark.job.tags": f"{SESSION}-execution-root-id-3,{SESSION}",
            "spark.sql.execution.root.id": "3",
            "spark.sql.execution.id": "9",
        }.get
    )
    assert foreach.in_foreach_batch
    assert (foreach.query_id, foreach.batch_id, foreach.execution) == ("q-1", 7, "9")
    assert foreach.marker() == f"{SESSION}-root-3"
    plain: dict[str, str] = {"spark.job.tags": SESSION, "spark.sql.execution.id": "4"}
    batch = SparkCall.from_properties(plain.get)
    assert not batch.in_foreach_batch
    assert batch.marker() == SESSION
    nothing: dict[str, str] = {}
    assert SparkCall.from_properties(nothing.get).marker() is None


def test_ordinals_count_writes_and_a_failed_write_hands_its_ordinal_to_the_retry(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path, "run-1", "p.d.t")
    committed: set[int] = set()
    registry = ledger.registry(None, SESSION)
    assert registry.ordinal("5", committed.__contains__) == 0
    assert registry.ordinal("5", committed.__contains__) == 0  # another task of write 5
    # write 5 failed before its commit: the next write of the call is its retry
    assert registry.ordinal("8", committed.__contains__) == 0
    committed.add(0)
    assert registry.ordinal("8", committed.__contains__) == 0  # its own, once committed
    assert registry.ordinal("11", committed.__contains__) == 1
    # a new session (a re-run) counts from 0 again
    assert ledger.registry(None, "spark-session-other").ordinal("5", committed.__contains__) == 0


def test_each_write_has_records_of_its_own_and_the_old_layout_is_still_read(
    tmp_path: Path,
) -> None:
    first = Ledger.of(tmp_path, WriteIdentity("batch", "run-1", "p.d.t", None, "0"))
    second = Ledger.of(tmp_path, WriteIdentity("batch", "run-1", "p.d.t", None, "1"))
    other = Ledger.of(tmp_path, WriteIdentity("batch", "run-1", "p.d.other", None, "0"))
    first.write_intent(record(None))
    assert second.batch(None) is None
    assert other.batch(None) is None
    assert [(r.table, r.write) for r in scope_records(tmp_path, "run-1")] == [("p.d.t", "0")]

    # Before write identities: <root>/<query>/batch-<id>.json, one table per query.
    write_replacing(
        tmp_path / "q-old" / "batch-4.json",
        {k: v for k, v in record(4).__dict__.items() if k not in ("write",)} | {"streams": []},
    )
    streaming = Ledger(tmp_path, "q-old", "p.d.t")
    legacy = streaming.batch(4)
    assert legacy is not None
    assert legacy.batch_id == 4
    assert [r.batch_id for r in streaming.batches()] == [4]
    assert Ledger(tmp_path, "q-old", "p.d.other").batch(4) is None
    assert scopes(tmp_path) == ["q-old", "run-1"]


def test_a_task_that_cannot_see_the_drivers_ledger_refuses_to_write(tmp_path: Path) -> None:
    driver, executor = tmp_path / "driver", tmp_path / "executor"
    probe = leave_probe(driver)
    check_probe(driver, probe, "partition 0")
    with pytest.raises(LedgerNotSharedError, match="partition 3 cannot see the ledger") as no:
        check_probe(executor, probe, "partition 3")
    assert "storage the driver and every executor mount" in str(no.value)
