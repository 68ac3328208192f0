"""Ledger retention without Spark (``onceover_jobs.sink.ledger.retention``): old committed batches
pruned in step with Spark's logs, intents kept, totals unchanged, every interrupted prune
readable and finished by the next, a reset checkpoint still told from a pruned ledger.

Every test of the ledger's behaviour runs on every store (a disk, the S3 and the Cloud
Storage stand-ins: the ``ledger_root`` fixture), its files planted and inspected through
the store; the few about a disk only say why.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs import load_files
from onceover_jobs.sink.errors import CheckpointResetError, SinkOptionError
from onceover_jobs.sink.ledger import retention as ledger_retention
from onceover_jobs.sink.ledger.offsets_log import check_not_reset, fingerprint
from onceover_jobs.sink.ledger.records import Ledger, PartitionProgress
from onceover_jobs.sink.ledger.retention import how_many_to_keep, prune
from onceover_jobs.sink.ledger.writes import write_replacing

from onceover.bigquery import BigQueryConfig
from onceover.checkpoint_layout import ledger_root as ledger_in
from onceover.ledger_files import (
    BatchRecord,
    ScopeTotals,
    StreamCommit,
    Totals,
    read_summary,
    scope_totals,
    summary_key,
)
from onceover.ledger_store import LedgerStore, Sync, is_object_store, join, open_store, under
from tests.helpers.writeapi import create_table, streaming_job

TABLE = "p.d.t"
CALL = "spark-session-1-root-1"


class CrashError(Exception):
    """A prune stopped here, as by a crash of its driver."""


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # Durability is not what these tests check, and hundreds of fsyncs cost seconds.
    monkeypatch.setattr("os.fsync", lambda fd: None)


def rows_of(batch_id: int) -> int:
    return batch_id + 1  # every batch its own count, so a lost or double one shows


def intent(
    ledger: Ledger, batch_id: int, checkpoint: str | None = None, *, extras: bool = True
) -> BatchRecord:
    record = BatchRecord(
        query_id="q", batch_id=batch_id, table=TABLE, mode="committed", state="intent",
        streams=(StreamCommit(f"s{batch_id}", rows_of(batch_id), 10, 0, 0),),
        expected_rows=rows_of(batch_id), intent_at="2026-11-24T00:00:00Z",
        source_offsets=None if checkpoint is None else fingerprint(checkpoint, batch_id),
    )  # fmt: skip
    if extras:  # what a committed-mode batch leaves besides its record: progress, a registry
        ledger.claim_partition(batch_id, 0, PartitionProgress(stream=f"s{batch_id}"))
        ledger.registry(batch_id, CALL).ordinal("exec-1", lambda k: False)
    assert ledger.write_intent(record)
    return record


def commit(
    ledger: Ledger, batch_id: int, checkpoint: str | None = None, *, extras: bool = True
) -> BatchRecord:
    record = intent(ledger, batch_id, checkpoint, extras=extras)
    return ledger.mark_committed(record, at="2026-11-24T00:00:01Z", commit_time=None)


def total(batch_ids: range | list[int]) -> Totals:
    return Totals(len(batch_ids), sum(rows_of(b) for b in batch_ids))


def record_ids(ledger: Ledger) -> list[int | None]:
    return [r.batch_id for r in ledger.batches()]


def numbered(ledger: Ledger, folder: str) -> list[int]:
    """The batch ids of a ledger's per-batch folders: ``partitions`` under the write
    target's folder, ``calls`` under the table's."""
    base = ledger.table_directory if folder == "calls" else ledger.directory
    return sorted(int(name) for name in ledger.store.list(join(base, folder)).folders)


def copy_tree(source: str, target: str) -> None:
    """Every file under ``source`` to ``target`` (paths or URLs), as ``shutil.copytree``."""
    origin, copy = open_store(source), open_store(target)
    for key, _ in origin.walk(""):
        found = origin.read(key)
        assert found is not None, key
        copy.put(key, found.data, sync=Sync.NONE)


@dataclass(frozen=True)
class Scale:
    """How many batches a test runs on one store. On a disk, Spark's own numbers (its
    ``minBatchesToRetain`` keeps 100); on the stand-ins, where every step is a request to
    a server, fewer in the same shape: many prunes, a cadence, every kind of step of a
    prune interrupted, and a batch Spark's logs keep that the ledger pruned."""

    batches: int
    """Batches committed, each pruned at once, keeping ``keep``."""
    keep: int
    cadence_batches: int
    """Batches committed at the default cadence, keeping ``cadence_keep``."""
    cadence_keep: int
    crash_batches: int
    """The ledger a prune of is interrupted at each step, keeping ``crash_keep``."""
    crash_keep: int
    query_batches: int
    """The pruned query: batches it ran, keeping ``query_keep`` (Spark's logs too)."""
    query_keep: int

    @classmethod
    def of(cls, root: str) -> Scale:
        if is_object_store(root):
            return cls(25, 10, 30, 5, 4, 2, 30, 20)
        return cls(250, 100, 60, 20, 8, 3, 150, 100)

    @property
    def crash_steps(self) -> list[str]:
        """The steps of the interrupted prune, in order."""
        return [
            "write_replacing",  # the summary
            # each batch pruned: its partitions' folder, its call's, its record
            *["delete_tree", "delete_tree", "delete"] * (self.crash_batches - self.crash_keep),
            "settle",  # the folder made durable (a disk's fsync)
        ]


class Crash:
    """Stops a prune, as a crash of its driver would, at its ``at``-th step: a call of a
    function it wraps (of those named ``only``, when given). What a step does within is
    the step, not more of them: a store's ``delete_tree`` deleting each object of a tree
    is one step, as a disk's one ``rmtree`` is."""

    def __init__(self, at: int, only: str | None = None) -> None:
        self.at = at
        self.only = only
        self.calls: list[str] = []
        self._within = False

    def wrap(self, name: str, real: Callable[..., object]) -> Callable[..., object]:
        def step(*args: object, **kwargs: object) -> object:
            if self._within:
                return real(*args, **kwargs)
            self.calls.append(name)
            counted = sum(1 for c in self.calls if self.only in (None, c))
            if self.only in (None, name) and counted == self.at:
                raise CrashError(f"{name} #{self.at}")
            self._within = True
            try:
                return real(*args, **kwargs)
            finally:
                self._within = False

        return step

    def arm(self, patched: pytest.MonkeyPatch, store: LedgerStore) -> None:
        """Wrap every step of a prune: its summary's write, then, batch by batch, the
        removal of its partitions' and its call's folders and of its record, then the
        store's settling of the folder."""
        wrapped = self.wrap("write_replacing", write_replacing)
        patched.setattr(ledger_retention, "write_replacing", wrapped)
        for name in ("delete_tree", "delete", "settle"):
            patched.setattr(store, name, self.wrap(name, getattr(store, name)))


def test_after_many_batches_only_the_newest_remain_and_the_totals_count_all(
    ledger_root: str,
) -> None:
    # 250 batches keeping 100 on a disk, 25 keeping 10 on the stand-ins (Scale).
    scale = Scale.of(ledger_root)
    n, keep = scale.batches, scale.keep
    ledger = Ledger(ledger_root, "q", TABLE)
    for batch_id in range(n):
        commit(ledger, batch_id)
        prune(ledger, newest_batch=batch_id, keep=keep, every=1)
    assert record_ids(ledger) == list(range(n - keep, n))
    assert numbered(ledger, "partitions") == list(range(n - keep, n))
    assert numbered(ledger, "calls") == list(range(n - keep, n))
    assert scope_totals(ledger_root, "q") == total(range(n))
    summary = read_summary(ledger.store, ledger.directory)
    assert summary is not None
    assert (summary.batches, summary.through, summary.highest) == (n - keep, n - keep, n - keep - 1)
    assert summary.rows == total(range(n - keep)).rows

    # At the default cadence a prune works once per ten batches due: never fewer than
    # `keep` records kept, never more than `keep + every - 1`.
    other = Ledger(ledger_root, "q2", TABLE)
    n, keep = scale.cadence_batches, scale.cadence_keep
    kept: list[int] = []
    for batch_id in range(n):
        commit(other, batch_id)
        prune(other, newest_batch=batch_id, keep=keep)
        kept.append(len(record_ids(other)))
    assert max(kept) == keep + ledger_retention.PRUNE_EVERY - 1
    assert min(kept[keep:]) == keep
    assert scope_totals(ledger_root, "q2") == total(range(n))


def test_intents_and_the_batch_write_record_are_never_pruned(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "q", TABLE)
    unsettled = None
    for batch_id in range(31):
        if batch_id == 5:
            unsettled = intent(ledger, batch_id)  # a commit that never finished
        else:
            commit(ledger, batch_id)
    assert unsettled is not None
    write = BatchRecord(
        query_id="q", batch_id=None, table=TABLE, mode="pending", state="intent",
        streams=(), expected_rows=1000, intent_at="2026-11-24T00:00:00Z",
    )  # fmt: skip
    whole = ledger.mark_committed(write, at="2026-11-24T00:00:01Z", commit_time=None)
    result = prune(ledger, newest_batch=30, keep=10, every=1)
    assert result.cutoff == 21
    assert result.held == (5,)
    assert 5 not in result.pruned
    assert record_ids(ledger) == [None, 5, *range(21, 31)]
    assert numbered(ledger, "partitions") == [5, *range(21, 31)]
    assert numbered(ledger, "calls") == [5, *range(21, 31)]
    committed = [b for b in range(31) if b != 5]
    assert scope_totals(ledger_root, "q") == total(committed) + Totals(1, whole.expected_rows)

    # Settled later: counted from its record at once, pruned at the next step.
    ledger.mark_committed(unsettled, at="2026-11-24T00:00:02Z", commit_time=None)
    assert scope_totals(ledger_root, "q") == total(range(31)) + Totals(1, 1000)
    commit(ledger, 31)
    result = prune(ledger, newest_batch=31, keep=10, every=1)
    assert result.pruned == (5, 21)
    assert result.held == ()
    assert record_ids(ledger) == [None, *range(22, 32)]
    assert scope_totals(ledger_root, "q") == total(range(32)) + Totals(1, 1000)


def test_nothing_at_or_above_the_cutoff_is_touched_and_a_prune_is_bounded(
    ledger_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_root, "q", TABLE)
    for batch_id in range(50):
        commit(ledger, batch_id)
    listings: list[Ledger] = []
    lowest = ledger_retention._lowest_batch

    def counted(listed: Ledger) -> int | None:
        listings.append(listed)
        return lowest(listed)

    monkeypatch.setattr(ledger_retention, "_lowest_batch", counted)
    # A ledger from before retention: pruned max_step batch ids at a time.
    assert prune(ledger, newest_batch=49, keep=10, every=1, max_step=15).pruned == tuple(range(15))
    assert prune(ledger, newest_batch=49, keep=10, every=1, max_step=15).pruned == tuple(
        range(15, 30)
    )
    assert prune(ledger, newest_batch=49, keep=10, every=1, max_step=15).pruned == tuple(
        range(30, 40)
    )
    assert prune(ledger, newest_batch=49, keep=10, every=1, max_step=15).pruned == ()
    assert len(listings) == 1  # the directory is listed once, before the first summary
    assert record_ids(ledger) == list(range(40, 50))
    assert scope_totals(ledger_root, "q") == total(range(50))
    # Too few batches due: nothing is read or written.
    before = ledger.store.read(summary_key(ledger.directory))
    assert before is not None
    assert prune(ledger, newest_batch=52, keep=10, every=5).pruned == ()
    assert ledger.store.read(summary_key(ledger.directory)) == before
    with pytest.raises(ValueError, match="at least 1"):
        prune(ledger, newest_batch=52, keep=0)


def test_a_foreach_batch_calls_registry_stays_while_another_write_of_the_batch_is_unsettled(
    ledger_root: str,
) -> None:
    first, second = Ledger(ledger_root, "q", TABLE, "0"), Ledger(ledger_root, "q", TABLE, "1")
    for batch_id in range(20):
        commit(first, batch_id)
        if batch_id == 3:
            intent(second, batch_id)
        elif batch_id % 2 == 0:
            commit(second, batch_id)  # the second write only in some calls
    prune(first, newest_batch=19, keep=5, every=1)
    assert numbered(first, "calls") == [3, *range(15, 20)]
    assert record_ids(first) == list(range(15, 20))
    assert record_ids(second) == [b for b in range(20) if b % 2 == 0 or b == 3]
    second_rows = total([b for b in range(20) if b % 2 == 0])
    assert scope_totals(ledger_root, "q") == total(range(20)) + second_rows
    prune(second, newest_batch=18, keep=5, every=1)
    assert record_ids(second) == [3, 14, 16, 18]
    assert scope_totals(ledger_root, "q") == total(range(20)) + second_rows


def test_a_prune_interrupted_at_any_step_reads_correctly_and_the_next_finishes_it(
    ledger_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 8 batches keeping 3 (17 steps) on a disk, 4 keeping 2 (8 steps) on the stand-ins.
    scale = Scale.of(ledger_root)
    n, keep = scale.crash_batches, scale.crash_keep
    checkpoint = under(ledger_root, "pristine")
    pristine = Ledger(ledger_in(checkpoint), "q", TABLE)
    for batch_id in range(n):
        _entry(checkpoint, batch_id)
        commit(pristine, batch_id, checkpoint)
    _entry(checkpoint, n)
    steps = scale.crash_steps
    for crash_at in range(1, len(steps) + 1):
        work = under(ledger_root, f"crash-{crash_at}")
        copy_tree(checkpoint, work)
        ledger = Ledger(ledger_in(work), "q", TABLE)
        crash = Crash(crash_at)
        with monkeypatch.context() as patched:
            crash.arm(patched, ledger.store)
            with pytest.raises(CrashError):
                prune(ledger, newest_batch=n - 1, keep=keep, every=1)
        assert crash.calls == steps[:crash_at]

        # Whatever the crash left is a ledger every reader handles, counted once.
        assert scope_totals(ledger_in(work), "q") == total(range(n)), crash_at
        assert ScopeTotals(ledger_in(work), "q").read() == total(range(n))
        assert all(r.committed for r in ledger.batches())
        assert set(range(n - keep, n)) <= set(record_ids(ledger))
        check_not_reset(ledger, work)
        if not is_object_store(work):  # the load job keeps its checkpoint on a disk
            assert load_files.uncommitted_batches(Path(work), "q") == []

        result = prune(ledger, newest_batch=n - 1, keep=keep, every=1)
        # Stopped before its summary: nothing happened, the repeat does it all; after it,
        # the repeat only finishes the removal and counts nothing again.
        assert result.pruned == (tuple(range(n - keep)) if crash_at == 1 else ())
        assert record_ids(ledger) == list(range(n - keep, n)), crash_at
        assert numbered(ledger, "partitions") == list(range(n - keep, n))
        assert numbered(ledger, "calls") == list(range(n - keep, n))
        summary = read_summary(ledger.store, ledger.directory)
        assert summary is not None
        assert (summary.batches, summary.rows) == (n - keep, total(range(n - keep)).rows)
        assert scope_totals(ledger_in(work), "q") == total(range(n))


def test_the_next_prune_finishes_an_interrupted_one_before_its_own(
    ledger_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_root, "q", TABLE)
    for batch_id in range(30):
        commit(ledger, batch_id)
    crash = Crash(3, only="delete")  # the third record removed
    with monkeypatch.context() as patched:
        crash.arm(patched, ledger.store)
        with pytest.raises(CrashError):
            prune(ledger, newest_batch=29, keep=10, every=1)
    assert record_ids(ledger)[:1] == [2]  # batches 0 and 1 went, 2 on did not
    commit(ledger, 30)
    result = prune(ledger, newest_batch=30, keep=10, every=1)
    assert result.resumed == tuple(range(20))
    assert result.pruned == (20,)
    assert record_ids(ledger) == list(range(21, 31))
    assert scope_totals(ledger_root, "q") == total(range(31))


def _entry(checkpoint: str, batch_id: int, text: str = "") -> None:
    """Spark's offsets log entry of ``batch_id``, and the commit of the batch before."""
    store = open_store(checkpoint)
    store.put(f"offsets/{batch_id}", f'v1\n{{"batch": {batch_id}}}{text}\n'.encode())
    if batch_id > 0:
        store.put(f"commits/{batch_id - 1}", b"v1\n{}\n")


def _spark_purge(checkpoint: str, below: int) -> None:
    """What Spark does with minBatchesToRetain: entries below ``below`` go."""
    store = open_store(checkpoint)
    for log in ("offsets", "commits"):
        for name in store.list(log).files:
            if int(name) < below:
                store.delete(f"{log}/{name}")


@dataclass(frozen=True)
class PrunedQuery:
    """A query that ran ``batches`` batches, its ledger and Spark's logs both kept to
    ``keep`` (150 and 100 on a disk, 30 and 20 on the stand-ins: :class:`Scale`)."""

    ledger: Ledger
    """Shared by this module's tests on the store, which only read it."""
    checkpoint: str
    """The test's own copy of Spark's logs, which it changes."""
    batches: int
    keep: int


@pytest.fixture(scope="module")
def pruned_queries() -> dict[str, tuple[str, str]]:
    """The query :func:`pruned_query` builds, once a store per module: its ledger root
    and its checkpoint, by the store's kind."""
    return {}


@pytest.fixture
def pruned_query(pruned_queries: dict[str, tuple[str, str]], ledger_root: str) -> PrunedQuery:
    scale = Scale.of(ledger_root)
    n, keep = scale.query_batches, scale.query_keep
    kind = open_store(ledger_root).kind
    if kind not in pruned_queries:
        # Built in the first such test's own folder or bucket, which outlives it.
        built = under(ledger_root, "pruned-query")
        ledger = Ledger(ledger_in(built), "q", TABLE)
        for batch_id in range(n):
            _entry(built, batch_id)
            commit(ledger, batch_id, built, extras=False)
            prune(ledger, newest_batch=batch_id, keep=keep)
        open_store(built).put(f"commits/{n - 1}", b"v1\n{}\n")
        # Spark purges as it plans batch b (n - 1 the last): entries below b - keep go.
        _spark_purge(built, n - 1 - keep)
        pruned_queries[kind] = (ledger_in(built), built)
    ledger_at, built = pruned_queries[kind]
    checkpoint = under(ledger_root, "checkpoint")
    for log in ("offsets", "commits"):
        copy_tree(under(built, log), under(checkpoint, log))
    return PrunedQuery(Ledger(ledger_at, "q", TABLE), checkpoint, n, keep)


def test_a_pruned_ledger_is_not_taken_for_a_reset_checkpoint(pruned_query: PrunedQuery) -> None:
    ledger, checkpoint, n, keep = (
        pruned_query.ledger, pruned_query.checkpoint, pruned_query.batches, pruned_query.keep,
    )  # fmt: skip
    assert record_ids(ledger) == list(range(n - keep, n))
    check_not_reset(ledger, checkpoint)
    # Spark's commits log keeps the newest batch the ledger pruned.
    assert open_store(checkpoint).exists(f"commits/{n - keep - 1}")
    _entry(checkpoint, n)  # the next batch, planned
    check_not_reset(ledger, checkpoint)


@pytest.mark.parametrize("ledger_root", ["posix"], indirect=True)
def test_the_load_job_does_not_take_a_pruned_batch_for_an_uncommitted_one(
    pruned_query: PrunedQuery,
) -> None:
    # A disk only: the load job (onceover_jobs.load_files) keeps its checkpoint, and the
    # ledger in it, on one; it looks there for batches Spark finished and the ledger did not.
    checkpoint = Path(pruned_query.checkpoint)
    n, keep = pruned_query.batches, pruned_query.keep
    shutil.copytree(Path(pruned_query.ledger.store.url), checkpoint / "onceover")
    # Spark's commits log keeps a batch the ledger pruned: not "uncommitted".
    assert (checkpoint / "commits" / str(n - keep - 1)).exists()
    assert load_files.uncommitted_batches(checkpoint, "q") == []
    _entry(str(checkpoint), n)
    (checkpoint / "commits" / str(n)).write_text("v1\n{}\n")  # done in Spark, not in the ledger
    assert load_files.uncommitted_batches(checkpoint, "q") == [n]


@pytest.mark.parametrize("reset", ["emptied", "behind", "rewritten"])
def test_a_reset_checkpoint_is_still_refused_after_pruning(
    pruned_query: PrunedQuery, reset: str
) -> None:
    ledger, checkpoint, n, keep = (
        pruned_query.ledger, pruned_query.checkpoint, pruned_query.batches, pruned_query.keep,
    )  # fmt: skip
    for log in ("offsets", "commits"):
        open_store(checkpoint).delete_tree(log)
    if reset == "behind":
        for batch_id in range(3):
            _entry(checkpoint, batch_id, ', "new": true')
    if reset == "rewritten":  # a new query got as far, from other data
        for batch_id in range(n - keep, n + 2):
            _entry(checkpoint, batch_id, ', "new": true')
    with pytest.raises(CheckpointResetError, match="was reset") as refused:
        check_not_reset(ledger, checkpoint)
    assert f"batches up to {n - 1} of query q" in str(refused.value)


def test_a_reset_is_seen_when_every_record_of_the_ledger_was_pruned(ledger_root: str) -> None:
    checkpoint = ledger_root
    ledger = Ledger(ledger_in(checkpoint), "q", TABLE)
    for batch_id in range(20):
        _entry(checkpoint, batch_id)
        commit(ledger, batch_id, checkpoint)
    prune(ledger, newest_batch=120, keep=100, every=1)  # as seen from a later batch
    assert record_ids(ledger) == []
    _entry(checkpoint, 120)
    check_not_reset(ledger, checkpoint)
    open_store(checkpoint).delete_tree("offsets")
    with pytest.raises(CheckpointResetError, match="batches up to 19 of query q"):
        check_not_reset(ledger, checkpoint)


def test_the_heartbeat_reader_opens_only_what_changed(ledger_root: str) -> None:
    ledger = Ledger(ledger_root, "q", TABLE)
    foreach = Ledger(ledger_root, "q", "p.d.other", "0")
    for batch_id in range(20):
        commit(ledger, batch_id)
    commit(foreach, 0)
    reader = ScopeTotals(ledger_root, "q")
    assert reader.read() == total(range(20)) + total([0])
    assert reader.opened == 21
    assert reader.read() == total(range(20)) + total([0])
    assert reader.opened == 21  # nothing new: nothing opened

    for batch_id in range(20, 25):
        commit(ledger, batch_id)
    unsettled = intent(ledger, 25)
    assert reader.read() == total(range(25)) + total([0])
    assert reader.opened == 21 + 6
    ledger.mark_committed(unsettled, at="2026-11-24T00:00:02Z", commit_time=None)
    assert reader.read() == total(range(26)) + total([0])
    assert reader.opened == 27 + 1  # the record that changed

    prune(ledger, newest_batch=25, keep=10, every=1)
    assert reader.read() == total(range(26)) + total([0])
    assert reader.opened == 28 + 1  # only the summary: pruned records are just forgotten
    assert reader.read() == scope_totals(ledger_root, "q")


def test_the_load_jobs_heartbeat_keeps_one_reader_for_the_run(tmp_path: Path) -> None:
    # A disk only: the load job (onceover_jobs.load_files) keeps its checkpoint on one.
    ledger = Ledger(ledger_in(tmp_path / "ckpt"), "q", TABLE)
    for batch_id in range(20):
        commit(ledger, batch_id)
    prune(ledger, newest_batch=19, keep=10, every=1)
    args = argparse.Namespace(
        checkpoint=tmp_path / "ckpt", ledger=None, monitor_url=None, monitor_token=None
    )
    reporter = load_files.RunReporter(args, [], "run-1")
    assert reporter.totals() == (0, 0)  # no query yet
    reporter.query_id = "q"
    expected = scope_totals(ledger.store, "q")
    assert expected == total(range(20))
    assert reporter.totals() == (expected.rows, expected.batches)
    assert reporter._ledger_totals is not None
    opened = reporter._ledger_totals.opened
    assert reporter.totals() == (expected.rows, expected.batches)
    assert reporter._ledger_totals.opened == opened


def test_the_keep_count_comes_from_the_environment_then_spark_then_100() -> None:
    assert how_many_to_keep(None, environ={}) == 100
    assert how_many_to_keep("", environ={}) == 100
    assert how_many_to_keep("250", environ={}) == 250
    assert how_many_to_keep("250", environ={"ONCEOVER_LEDGER_KEEP_BATCHES": "40"}) == 40
    with pytest.raises(SinkOptionError, match="ONCEOVER_LEDGER_KEEP_BATCHES"):
        how_many_to_keep(None, environ={"ONCEOVER_LEDGER_KEEP_BATCHES": "many"})
    with pytest.raises(SinkOptionError, match=r"minBatchesToRetain.*at least 1"):
        how_many_to_keep("0", environ={})


def test_the_committer_prunes_as_it_commits(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """Wired in: a streaming write keeps ``ledger.keep_batches`` committed batches (and
    at most one prune interval more) however many it commits, and counts them all."""
    from onceover_jobs.sink.protocol.committer import BatchCommitter

    table = create_table(rest, dataset)
    job = streaming_job(bq_config, table, tmp_path, **{"ledger.keep_batches": "5"})
    for batch in range(40):
        assert BatchCommitter(job, batch).commit([]).committed  # nothing to write
    kept = [r.batch_id for r in job.ledger().batches()]
    assert kept[-1] == 39
    assert 5 <= len(kept) <= 5 + ledger_retention.PRUNE_EVERY
    assert scope_totals(job.store, job.query_id).batches == 40
