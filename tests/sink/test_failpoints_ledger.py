"""Failpoint specifications, and the ledger's atomic, forward-only records and driver claims
on every store (a disk and the S3 and Cloud Storage stand-ins: the ``ledger_root`` fixture)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.api_core.exceptions import ServiceUnavailable
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.driver import owner_of
from onceover_jobs.sink.errors import (
    ConcurrentDriverError,
    LedgerError,
    PartitionTakenError,
    SinkOptionError,
)
from onceover_jobs.sink.ledger.leases import claim_driver, renew_driver
from onceover_jobs.sink.ledger.records import Ledger, PartitionProgress

from onceover.ledger_files import BatchRecord, StreamCommit
from onceover.ledger_store import join, open_store
from tests.helpers.waiting import wait_until

Arm = Callable[..., None]


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Arm]:
    def arm(spec: str, seed: str = "7") -> None:
        monkeypatch.setenv(failpoints.ENV, spec)
        monkeypatch.setenv(failpoints.SEED_ENV, seed)
        failpoints.reset()

    yield arm
    monkeypatch.delenv(failpoints.ENV, raising=False)
    failpoints.reset()


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("append.bfore=crash", "unknown failpoint 'append.bfore'"),
        ("append.before=explode", "action must be crash, error or drop"),
        ("commit.before=drop", "commit.before has no response to drop"),
        ("append.before=error@0", "@n counts from 1"),
        ("append.before=error%1.5", "%p must be between 0 and 1"),
        ("append.before", "is not name=action"),
    ],
)
def test_a_bad_specification_names_the_part_at_fault(spec: str, named: str) -> None:
    with pytest.raises(SinkOptionError, match="ONCEOVER_FAILPOINTS") as raised:
        failpoints.parse(spec)
    assert named in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_nth_hit_fires_once(armed: Arm) -> None:
    armed("append.response=drop@3")
    fired = [failpoints.hit("append.response") for _ in range(6)]
    assert fired == [False, False, True, False, False, False]
    assert not failpoints.hit("append.before")


def test_error_raises_unavailable(armed: Arm) -> None:
    armed("commit.before=error@1")
    with pytest.raises(ServiceUnavailable, match=r"commit\.before"):
        failpoints.hit("commit.before")
    assert not failpoints.hit("commit.before")


def test_probability_is_seeded_and_replays(armed: Arm) -> None:
    armed("append.response=drop%0.3", seed="42")
    first = [failpoints.hit("append.response") for _ in range(200)]
    armed("append.response=drop%0.3", seed="42")
    again = [failpoints.hit("append.response") for _ in range(200)]
    armed("append.response=drop%0.3", seed="43")
    other = [failpoints.hit("append.response") for _ in range(200)]
    assert first == again
    assert first != other
    assert 30 < sum(first) < 90


def test_hits_are_shared_across_processes_with_a_state_dir(
    armed: Arm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(failpoints.STATE_ENV, str(tmp_path))
    armed("append.before=drop@2")
    assert not failpoints.hit("append.before")
    failpoints.reset()  # as a new process would: no memory of its own
    assert failpoints.hit("append.before")


_COUNT_FOREVER = """
import sys
from pathlib import Path
from typing import Any
from onceover_jobs.sink.failpoints import _count_in_file
while True:
    _count_in_file(Path(sys.argv[1]))
"""


def test_a_counter_survives_its_process_being_killed_mid_update(tmp_path: Path) -> None:
    # Seen in chaos seed 1: a kill between truncating and rewriting the counter left it
    # empty, the count restarted and an @n failpoint fired a second time. Kill a process
    # that does nothing but count, over and over: the counter must always hold a number
    # that never goes back.
    counter = tmp_path / "append.before.hits"
    last = 0
    for _ in range(25):
        counting = subprocess.Popen(
            [sys.executable, "-c", _COUNT_FOREVER, str(counter)], cwd=Path(__file__).parents[2]
        )
        _counted_past(counter, last + 50, counting)
        counting.send_signal(signal.SIGKILL)
        counting.wait()
        now = counter.read_text()
        assert now.isdigit(), f"killed mid-update, the counter holds {now!r}"
        assert int(now) >= last
        last = int(now)


def _counted_past(counter: Path, target: int, counting: subprocess.Popen[bytes]) -> None:
    def alive() -> None:
        assert counting.poll() is None, "the counting process died on its own"

    wait_until(f"the counter reaching {target}",
               lambda: _read_count(counter) >= target or None, 30, every_s=0.001,
               between=alive)  # fmt: skip


def _read_count(counter: Path) -> int:
    try:
        text = counter.read_text()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else 0


def _record(batch_id: int | None = 3) -> BatchRecord:
    return BatchRecord(
        query_id="q1",
        batch_id=batch_id,
        table="p.d.t",
        mode="pending",
        state="intent",
        streams=(StreamCommit("projects/p/datasets/d/tables/t/streams/s1", 10, 100, 0, 0),),
        expected_rows=10,
        intent_at="2026-11-21T00:00:00+00:00",
    )


def test_a_batch_goes_from_intent_to_committed_and_never_back(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "q1", "p.d.t")
    assert ledger.batch(3) is None
    ledger.write_intent(_record())
    intent = ledger.batch(3)
    assert intent is not None
    assert intent.state == "intent"
    ledger.mark_committed(intent, at="2026-11-21T00:00:01+00:00", commit_time=None)
    reread = Ledger(ledger_root, "q1", "p.d.t").batch(3)
    assert reread is not None
    assert reread.committed
    assert reread.streams == intent.streams
    with pytest.raises(LedgerError, match="already committed"):
        ledger.write_intent(_record())
    assert [b.batch_id for b in ledger.batches()] == [3]
    assert list(ledger.store.list(ledger.directory).files) == ["batch-3.json"]


def test_the_atomic_writes_leave_no_temporary_files_on_a_disk(tmp_path: Path) -> None:
    # A disk only: a write there is a temporary file renamed or linked into place, which
    # the store's listings never show; an object store's put leaves nothing beside it.
    ledger = Ledger(tmp_path, "q1", "p.d.t")
    ledger.write_intent(_record())
    intent = ledger.batch(3)
    assert intent is not None
    ledger.mark_committed(intent, at="2026-11-21T00:00:01+00:00", commit_time=None)
    claimed = ledger.claim_partition(0, 5, PartitionProgress(stream="s", attempt=0))
    ledger.save_partition(0, 5, replace(claimed, acked_rows=1, sent_rows=1))
    ledger.claim_partition(0, 5, PartitionProgress(stream="s-late", attempt=1))  # a lost race
    claim_driver(tmp_path, "q1", "the query on /ckpt")
    assert sorted(p.name for p in (tmp_path / ledger.directory).iterdir()) == [
        "batch-3.json",
        "partitions",
    ]
    assert [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []


def test_a_corrupt_record_is_an_error_not_an_empty_ledger(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "q1", "p.d.t")
    ledger.write_intent(_record())
    ledger.store.put(ledger.batch_key(3), b"{not json")
    with pytest.raises(LedgerError, match="unreadable") as unreadable:
        ledger.batch(3)
    assert ledger.store.where(ledger.batch_key(3)) in str(unreadable.value)


def test_only_the_first_attempt_claims_a_partition(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "q1", "p.d.t")
    first = ledger.claim_partition(0, 5, PartitionProgress(stream="s-first", attempt=0))
    second = ledger.claim_partition(0, 5, PartitionProgress(stream="s-second", attempt=1))
    assert first.stream == second.stream == "s-first"
    saved = ledger.save_partition(
        0, 5, replace(first, acked_rows=7, sent_rows=9, inflight=[[7, 2]])
    )
    assert ledger.partition(0, 5) == saved
    assert saved == PartitionProgress("s-first", 7, 9, inflight=[[7, 2]], revision=1)


def test_progress_is_saved_by_compare_and_swap_so_two_attempts_never_interleave(
    ledger_root: str,
) -> None:
    ledger = Ledger(ledger_root, "q1", "p.d.t")
    claimed = ledger.claim_partition(0, 5, PartitionProgress(stream="s", attempt=0))
    speculative = replace(claimed, attempt=1)  # both attempts read revision 0
    ahead = ledger.save_partition(0, 5, replace(claimed, acked_rows=100, sent_rows=100))
    with pytest.raises(PartitionTakenError, match="another attempt advanced its progress"):
        ledger.save_partition(0, 5, replace(speculative, acked_rows=40, sent_rows=40))
    for rows in (200, 300, 400):  # the winner goes on; old versions are pruned
        ahead = ledger.save_partition(0, 5, replace(ahead, acked_rows=rows, sent_rows=rows))
    assert ledger.partition(0, 5) == ahead
    assert ahead.acked_rows == 400
    kept = ledger.store.list(join(ledger.directory, "partitions", "0", "5"))
    assert sorted(kept.files) == ["v000000003.json", "v000000004.json"]
    # a record of the layout before versions is still read
    legacy = Ledger(ledger_root, "q2", "p.d.t")
    legacy.store.put(
        join(legacy.directory, "partitions", "0", "5.json"),
        b'{"version": 1, "stream": "s-old", "acked_rows": 3}',
    )
    assert legacy.partition(0, 5) == PartitionProgress("s-old", 3)


DRIVER = "q1/driver.json"
"""Where the driver writing scope ``q1`` is recorded, under the ledger's root."""


def _recorded(root: str) -> dict[str, Any]:
    found = open_store(root).read(DRIVER)
    assert found is not None, f"no claim at {DRIVER}"
    claim: dict[str, Any] = json.loads(found.data)
    return claim


def test_a_second_driver_is_refused_while_the_first_still_runs_on_this_host(
    ledger_root: str,
) -> None:
    store = open_store(ledger_root)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        owner = owner_of(other.pid)
        store.put(DRIVER, json.dumps({"version": 1, "owner": owner}).encode())
        before = store.read(DRIVER)
        with pytest.raises(ConcurrentDriverError, match="another driver that still runs") as no:
            claim_driver(ledger_root, "q1", "the query on /ckpt")
        assert owner in str(no.value)
        assert store.where(DRIVER) in str(no.value)
        assert "Nothing was written" in str(no.value)
        assert store.read(DRIVER) == before
    finally:
        other.kill()
        other.wait()
    claim_driver(ledger_root, "q1", "the query on /ckpt")  # it is gone: this one takes over
    recorded = _recorded(ledger_root)["owner"]
    assert recorded.startswith(f"{socket.gethostname()} pid ")
    assert recorded != owner
    claim_driver(ledger_root, "q1", "the query on /ckpt")  # the same driver again: fine


ELSEWHERE = "other-host.example pid 4242 started 99"
"""A driver on another host, as its claim names it (a host this one cannot look into)."""


def _claim(root: str, owner: str, renewed_s_ago: float | None) -> None:
    claim: dict[str, object] = {"version": 1, "owner": owner}
    if renewed_s_ago is not None:
        claim["renewed_at"] = time.time() - renewed_s_ago
    open_store(root).put(DRIVER, json.dumps(claim).encode())


def test_a_driver_on_another_host_is_refused_while_its_lease_runs(ledger_root: str) -> None:
    _claim(ledger_root, ELSEWHERE, renewed_s_ago=30)
    before = open_store(ledger_root).read(DRIVER)
    with pytest.raises(ConcurrentDriverError, match="held by a driver on another host") as no:
        claim_driver(ledger_root, "q1", "the query on /ckpt", lease_s=120)
    message = str(no.value)
    assert ELSEWHERE in message
    assert "renewed 30 s ago" in message
    assert "driver.lease_s=120 s" in message
    assert re.search(r"start this again after \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", message)
    assert message.endswith("Nothing was written")
    assert open_store(ledger_root).read(DRIVER) == before  # the other's claim stands


@pytest.mark.parametrize(
    ("renewed_s_ago", "lease_s"),
    [(121, 120), (30, 0), (None, 120)],
    ids=["lapsed", "no-lease", "claim-from-before-leases"],
)
def test_a_claim_from_another_host_is_taken_over_once_it_lapses(
    ledger_root: str, renewed_s_ago: float | None, lease_s: float
) -> None:
    _claim(ledger_root, ELSEWHERE, renewed_s_ago)
    claim_driver(ledger_root, "q1", "the query on /ckpt", lease_s=lease_s)
    taken = _recorded(ledger_root)
    assert taken["owner"].startswith(f"{socket.gethostname()} pid ")
    assert time.time() - taken["renewed_at"] < 60


def test_a_driver_taken_over_is_refused_at_its_next_commit(ledger_root: str) -> None:
    renew_driver(ledger_root, "q1", "batch 3")  # nothing claimed (foreachBatch): nothing to do
    assert list(open_store(ledger_root).walk("q1")) == []
    claim_driver(ledger_root, "q1", "the query on /ckpt")
    first = _recorded(ledger_root)["renewed_at"]
    wait_until("the clock to move", lambda: time.time() > first + 0.01 or None, 5)
    renew_driver(ledger_root, "q1", "batch 3")
    assert _recorded(ledger_root)["renewed_at"] > first  # renewed at each commit

    _claim(ledger_root, ELSEWHERE, renewed_s_ago=0)  # this one stalled; another took over
    with pytest.raises(ConcurrentDriverError, match="took over from this one") as no:
        renew_driver(ledger_root, "q1", "batch 3")
    assert ELSEWHERE in str(no.value)
    assert _recorded(ledger_root)["owner"] == ELSEWHERE  # the refused renewal wrote nothing
