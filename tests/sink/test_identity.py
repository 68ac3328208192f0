"""Write identities without Spark: local properties read, ordinals counted (and agreed on
by racing tasks), records filed under their write, the old layout still read, the
shared-ledger probe; every ledger test on every store (the ``ledger_root`` fixture)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from onceover_jobs.sink.errors import LedgerNotSharedError
from onceover_jobs.sink.ledger import leases
from onceover_jobs.sink.ledger.identity import OrdinalRegistry, SparkCall, WriteIdentity
from onceover_jobs.sink.ledger.leases import SHARED_PROBES, check_probe, leave_probe
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_replacing

from onceover.ledger_files import BatchRecord, read_payload, scope_records, scopes
from onceover.ledger_store import join, open_store, under

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
    ledger_root: str,
) -> None:
    ledger = Ledger(ledger_root, "run-1", "p.d.t")
    committed: set[int] = set()
    registry = ledger.registry(None, SESSION)
    assert registry.ordinal("5", committed.__contains__) == 0
    assert registry.ordinal("5", committed.__contains__) == 0  # another task of write 5
    # write 5 failed before its commit: the next write of the call is its retry
    assert registry.ordinal("8", committed.__contains__) == 0
    committed.add(0)
    assert registry.ordinal("8", committed.__contains__) == 0  # its own, once committed
    assert registry.ordinal("11", committed.__contains__) == 1
    assert _registered(registry) == {0: "8", 1: "11"}
    # a new session (a re-run) counts from 0 again
    assert ledger.registry(None, "spark-session-other").ordinal("5", committed.__contains__) == 0


def _registered(registry: OrdinalRegistry) -> dict[int, str]:
    """Each ordinal's execution, as the registry holds them."""
    found: dict[int, str] = {}
    for name in registry.store.list(registry.directory).files:
        payload = read_payload(registry.store, join(registry.directory, name))
        assert payload is not None
        found[int(name.removesuffix(".json"))] = str(payload["execution"])
    return found


TASKS = 4
"""Tasks of one write racing to register it (a write's partitions start at once)."""


@pytest.mark.parametrize(
    ("before", "expected"),
    [({}, 0), ({"5": True}, 1), ({"5": False}, 0)],
    ids=["first-write", "after-a-committed-write", "retrying-a-failed-write"],
)
def test_racing_tasks_of_one_write_agree_on_one_ordinal(
    ledger_root: str,
    monkeypatch: pytest.MonkeyPatch,
    before: dict[str, bool],
    expected: int,
) -> None:
    """Every task reads the registry before any writes it (held at a barrier), so all of
    them write the same ordinal at once: one create (or, taking over a failed write's
    ordinal, one replace) takes, and the others' are refused by the store and read back
    as theirs (the same execution's bytes), so all agree on one, registered once."""
    registry = Ledger(ledger_root, "run-1", "p.d.t").registry(None, SESSION)
    committed = {k for k, (_, done) in enumerate(before.items()) if done}
    for execution in before:
        registry.ordinal(execution, committed.__contains__)
    all_read = threading.Barrier(TASKS, timeout=30)
    first_reads: set[str] = set()
    scan: Callable[[OrdinalRegistry, str], tuple[int, bool] | None] = OrdinalRegistry._last_or_own

    def scan_then_wait(self: OrdinalRegistry, execution: str) -> tuple[int, bool] | None:
        found = scan(self, execution)
        me = threading.current_thread().name
        if me not in first_reads:
            first_reads.add(me)
            all_read.wait()  # no task writes before every task has looked
        return found

    monkeypatch.setattr(OrdinalRegistry, "_last_or_own", scan_then_wait)
    ordinals: dict[str, int | BaseException] = {}

    def task(name: str) -> None:
        try:
            ordinals[name] = registry.ordinal("9", committed.__contains__)
        except BaseException as exc:  # recorded for the assertions below
            ordinals[name] = exc

    tasks = [
        threading.Thread(target=task, args=(f"task-{n}",), name=f"task-{n}") for n in range(TASKS)
    ]
    for thread in tasks:
        thread.start()
    for thread in tasks:
        thread.join(60)
    assert ordinals == {f"task-{n}": expected for n in range(TASKS)}
    kept = {k: e for k, e in enumerate(before) if k != expected}
    assert _registered(registry) == {**kept, expected: "9"}


def test_each_write_has_records_of_its_own_and_the_old_layout_is_still_read(
    ledger_root: str,
) -> None:
    first = Ledger.of(ledger_root, WriteIdentity("batch", "run-1", "p.d.t", None, "0"))
    second = Ledger.of(ledger_root, WriteIdentity("batch", "run-1", "p.d.t", None, "1"))
    other = Ledger.of(ledger_root, WriteIdentity("batch", "run-1", "p.d.other", None, "0"))
    first.write_intent(record(None))
    assert second.batch(None) is None
    assert other.batch(None) is None
    assert [(r.table, r.write) for r in scope_records(ledger_root, "run-1")] == [("p.d.t", "0")]

    # Before write identities: <root>/<query>/batch-<id>.json, one table per query.
    write_replacing(
        first.store,
        "q-old/batch-4.json",
        {k: v for k, v in record(4).__dict__.items() if k not in ("write",)} | {"streams": []},
    )
    streaming = Ledger(ledger_root, "q-old", "p.d.t")
    legacy = streaming.batch(4)
    assert legacy is not None
    assert legacy.batch_id == 4
    assert [r.batch_id for r in streaming.batches()] == [4]
    assert Ledger(ledger_root, "q-old", "p.d.other").batch(4) is None
    assert scopes(ledger_root) == ["q-old", "run-1"]


def test_a_task_that_cannot_see_the_drivers_ledger_refuses_to_write(ledger_root: str) -> None:
    driver, executor = under(ledger_root, "driver"), under(ledger_root, "executor")
    probe = leave_probe(driver)
    check_probe(driver, probe, "partition 0")
    with pytest.raises(LedgerNotSharedError, match="partition 3 cannot see the ledger") as no:
        check_probe(executor, probe, "partition 3")
    message = str(no.value)
    assert f"the ledger the driver writes at {executor}" in message
    assert f"the driver's probe .shared/{probe} is not there" in message
    assert "a disk the driver and every executor mount at the same path" in message
    assert "nothing was written" in message


def _probes(root: str) -> list[str]:
    return sorted(open_store(root).list(SHARED_PROBES).files)


def test_one_probe_serves_a_drivers_writes_and_old_ones_are_removed(
    ledger_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query on a 1-second trigger asks for a probe every micro-batch: it is left once
    and looked up after (a read, not a write), and the first a driver process leaves
    removes those left more than a week ago."""
    store = open_store(ledger_root)
    now = 1_800_000_000
    monkeypatch.setattr("onceover_jobs.sink.ledger.leases.time.time", lambda: float(now))
    week = leases.PROBE_KEEP_S
    stale, recent = f"{now - week - 60}-{'a' * 32}", f"{now - week + 3600}-{'b' * 32}"
    for name in (stale, recent, "c" * 32):  # a name from before probes were dated: kept
        store.put(join(SHARED_PROBES, name), b"{}")

    first = leave_probe(ledger_root)
    assert _probes(ledger_root) == sorted([first, recent, "c" * 32])
    before = {kind: n for kind, (n, _) in store.requests.snapshot().items()}
    assert [leave_probe(ledger_root) for _ in range(3)] == [first] * 3
    after = {kind: n for kind, (n, _) in store.requests.snapshot().items()}
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {"head": 3}
    check_probe(ledger_root, first, "partition 0")

    store.delete(join(SHARED_PROBES, first))  # removed by hand: a new one, not a failure
    second = leave_probe(ledger_root)
    assert second != first
    now += leases.PROBE_REFRESH_S  # a day on: a new one, the old one kept a week for
    third = leave_probe(ledger_root)  # writes that still carry it
    assert third != second
    assert _probes(ledger_root) == sorted([second, third, recent, "c" * 32])
