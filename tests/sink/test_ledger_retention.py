"""Ledger retention without Spark (``onceover_jobs.sink.ledger.retention``): old committed batches
pruned in step with Spark's logs, intents kept, totals unchanged, every interrupted prune
readable and finished by the next, a reset checkpoint still told from a pruned ledger."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs import load_files
from onceover_jobs.sink.errors import CheckpointResetError, SinkOptionError
from onceover_jobs.sink.ledger import retention as ledger_retention
from onceover_jobs.sink.ledger.offsets_log import check_not_reset, fingerprint
from onceover_jobs.sink.ledger.records import Ledger, PartitionProgress
from onceover_jobs.sink.ledger.retention import how_many_to_keep, prune

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import (
    BatchRecord,
    ScopeTotals,
    StreamCommit,
    Totals,
    read_summary,
    scope_totals,
)
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
    ledger: Ledger, batch_id: int, checkpoint: Path | None = None, *, extras: bool = True
) -> BatchRecord:
    record = BatchRecord(
        query_id="q", batch_id=batch_id, table=TABLE, mode="committed", state="intent",
        streams=(StreamCommit(f"s{batch_id}", rows_of(batch_id), 10, 0, 0),),
        expected_rows=rows_of(batch_id), intent_at="2026-11-24T00:00:00Z",
        source_offsets=None if checkpoint is None else fingerprint(str(checkpoint), batch_id),
    )  # fmt: skip
    if extras:  # what a committed-mode batch leaves besides its record: progress, a registry
        ledger.claim_partition(batch_id, 0, PartitionProgress(stream=f"s{batch_id}"))
        ledger.registry(batch_id, CALL).ordinal("exec-1", lambda k: False)
    assert ledger.write_intent(record)
    return record


def commit(
    ledger: Ledger, batch_id: int, checkpoint: Path | None = None, *, extras: bool = True
) -> BatchRecord:
    record = intent(ledger, batch_id, checkpoint, extras=extras)
    return ledger.mark_committed(record, at="2026-11-24T00:00:01Z", commit_time=None)


def total(batch_ids: range | list[int]) -> Totals:
    return Totals(len(batch_ids), sum(rows_of(b) for b in batch_ids))


def record_ids(ledger: Ledger) -> list[int | None]:
    return [r.batch_id for r in ledger.batches()]


def numbered_dirs(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir()) if directory.is_dir() else []


def test_after_250_batches_only_the_last_100_remain_and_the_totals_count_all(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path, "q", TABLE)
    for batch_id in range(250):
        commit(ledger, batch_id)
        prune(ledger, newest_batch=batch_id, keep=100, every=1)
    assert record_ids(ledger) == list(range(150, 250))
    assert numbered_dirs(ledger.directory / "partitions") == list(range(150, 250))
    assert numbered_dirs(ledger.table_directory / "calls") == list(range(150, 250))
    assert scope_totals(tmp_path, "q") == total(range(250))
    summary = read_summary(ledger.directory)
    assert summary is not None
    assert (summary.batches, summary.through, summary.highest) == (150, 150, 149)
    assert summary.rows == total(range(150)).rows

    # At the default cadence a prune works once per ten batches due: never fewer than
    # `keep` records kept, never more than `keep + every - 1`.
    other = Ledger(tmp_path, "q2", TABLE)
    kept: list[int] = []
    for batch_id in range(60):
        commit(other, batch_id)
        prune(other, newest_batch=batch_id, keep=20)
        kept.append(len(record_ids(other)))
    assert max(kept) == 20 + ledger_retention.PRUNE_EVERY - 1
    assert min(kept[20:]) == 20
    assert scope_totals(tmp_path, "q2") == total(range(60))


def test_intents_and_the_batch_write_record_are_never_pruned(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "q", TABLE)
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
    assert numbered_dirs(ledger.directory / "partitions") == [5, *range(21, 31)]
    assert numbered_dirs(ledger.table_directory / "calls") == [5, *range(21, 31)]
    committed = [b for b in range(31) if b != 5]
    assert scope_totals(tmp_path, "q") == total(committed) + Totals(1, whole.expected_rows)

    # Settled later: counted from its record at once, pruned at the next step.
    ledger.mark_committed(unsettled, at="2026-11-24T00:00:02Z", commit_time=None)
    assert scope_totals(tmp_path, "q") == total(range(31)) + Totals(1, 1000)
    commit(ledger, 31)
    result = prune(ledger, newest_batch=31, keep=10, every=1)
    assert result.pruned == (5, 21)
    assert result.held == ()
    assert record_ids(ledger) == [None, *range(22, 32)]
    assert scope_totals(tmp_path, "q") == total(range(32)) + Totals(1, 1000)


def test_nothing_at_or_above_the_cutoff_is_touched_and_a_prune_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path, "q", TABLE)
    for batch_id in range(50):
        commit(ledger, batch_id)
    listings: list[Path] = []
    lowest = ledger_retention._lowest_batch

    def counted(directory: Path) -> int | None:
        listings.append(directory)
        return lowest(directory)

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
    assert scope_totals(tmp_path, "q") == total(range(50))
    # Too few batches due: nothing is read or written.
    before = (ledger.directory / "pruned.json").stat().st_mtime_ns
    assert prune(ledger, newest_batch=52, keep=10, every=5).pruned == ()
    assert (ledger.directory / "pruned.json").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="at least 1"):
        prune(ledger, newest_batch=52, keep=0)


def test_a_foreach_batch_calls_registry_stays_while_another_write_of_the_batch_is_unsettled(
    tmp_path: Path,
) -> None:
    first, second = Ledger(tmp_path, "q", TABLE, "0"), Ledger(tmp_path, "q", TABLE, "1")
    for batch_id in range(20):
        commit(first, batch_id)
        if batch_id == 3:
            intent(second, batch_id)
        elif batch_id % 2 == 0:
            commit(second, batch_id)  # the second write only in some calls
    prune(first, newest_batch=19, keep=5, every=1)
    assert numbered_dirs(first.table_directory / "calls") == [3, *range(15, 20)]
    assert record_ids(first) == list(range(15, 20))
    assert record_ids(second) == [b for b in range(20) if b % 2 == 0 or b == 3]
    second_rows = total([b for b in range(20) if b % 2 == 0])
    assert scope_totals(tmp_path, "q") == total(range(20)) + second_rows
    prune(second, newest_batch=18, keep=5, every=1)
    assert record_ids(second) == [3, 14, 16, 18]
    assert scope_totals(tmp_path, "q") == total(range(20)) + second_rows


def _crashing(
    after: int, calls: list[str], name: str, real: Callable[..., object]
) -> Callable[..., object]:
    def step(*args: object, **kwargs: object) -> object:
        calls.append(name)
        if len(calls) == after:
            raise CrashError(f"{name} #{after}")
        return real(*args, **kwargs)

    return step


def test_a_prune_interrupted_at_any_step_reads_correctly_and_the_next_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "pristine"
    pristine = Ledger(checkpoint / "onceover", "q", TABLE)
    for batch_id in range(8):
        _entry(checkpoint, batch_id)
        commit(pristine, batch_id, checkpoint)
    _entry(checkpoint, 8)
    steps = 1 + 3 * 5 + 1  # the summary; partitions, calls, record of each; the sync
    for crash_at in range(1, steps + 1):
        work = tmp_path / f"crash-{crash_at}"
        shutil.copytree(checkpoint, work)
        ledger = Ledger(work / "onceover", "q", TABLE)
        calls: list[str] = []
        with monkeypatch.context() as patched:
            for name in ("write_replacing", "_remove_tree", "_remove_file", "_fsync_directory"):
                real = getattr(ledger_retention, name)
                patched.setattr(ledger_retention, name, _crashing(crash_at, calls, name, real))
            with pytest.raises(CrashError):
                prune(ledger, newest_batch=7, keep=3, every=1)
        assert len(calls) == crash_at

        # Whatever the crash left is a ledger every reader handles, counted once.
        assert scope_totals(work / "onceover", "q") == total(range(8)), crash_at
        assert ScopeTotals(work / "onceover", "q").read() == total(range(8))
        assert all(r.committed for r in ledger.batches())
        assert set(range(5, 8)) <= set(record_ids(ledger))
        check_not_reset(ledger, str(work))
        assert load_files.uncommitted_batches(work, "q") == []

        result = prune(ledger, newest_batch=7, keep=3, every=1)
        # Stopped before its summary: nothing happened, the repeat does it all; after it,
        # the repeat only finishes the removal and counts nothing again.
        assert result.pruned == (tuple(range(5)) if crash_at == 1 else ())
        assert record_ids(ledger) == list(range(5, 8)), crash_at
        assert numbered_dirs(ledger.directory / "partitions") == list(range(5, 8))
        assert numbered_dirs(ledger.table_directory / "calls") == list(range(5, 8))
        summary = read_summary(ledger.directory)
        assert summary is not None
        assert (summary.batches, summary.rows) == (5, total(range(5)).rows)
        assert scope_totals(work / "onceover", "q") == total(range(8))
        shutil.rmtree(work)


def test_the_next_prune_finishes_an_interrupted_one_before_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path, "q", TABLE)
    for batch_id in range(30):
        commit(ledger, batch_id)
    calls: list[str] = []
    with monkeypatch.context() as patched:
        patched.setattr(
            ledger_retention,
            "_remove_file",
            _crashing(3, calls, "_remove_file", ledger_retention._remove_file),
        )
        with pytest.raises(CrashError):
            prune(ledger, newest_batch=29, keep=10, every=1)
    assert record_ids(ledger)[:1] == [2]  # batches 0 and 1 went, 2 on did not
    commit(ledger, 30)
    result = prune(ledger, newest_batch=30, keep=10, every=1)
    assert result.resumed == tuple(range(20))
    assert result.pruned == (20,)
    assert record_ids(ledger) == list(range(21, 31))
    assert scope_totals(tmp_path, "q") == total(range(31))


def _entry(checkpoint: Path, batch_id: int, text: str = "") -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(f'v1\n{{"batch": {batch_id}}}{text}\n')
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    if batch_id > 0:
        (checkpoint / "commits" / str(batch_id - 1)).write_text("v1\n{}\n")


def _spark_purge(checkpoint: Path, below: int) -> None:
    """What Spark does with minBatchesToRetain: entries below ``below`` go."""
    for log in ("offsets", "commits"):
        for path in (checkpoint / log).iterdir():
            if int(path.name) < below:
                path.unlink()


@pytest.fixture(scope="module")
def pruned_query_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A query that ran batches 0 to 149, the ledger and Spark's logs both kept to 100."""
    checkpoint = tmp_path_factory.mktemp("pruned-query")
    ledger = Ledger(checkpoint / "onceover", "q", TABLE)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("os.fsync", lambda fd: None)
        for batch_id in range(150):
            _entry(checkpoint, batch_id)
            commit(ledger, batch_id, checkpoint, extras=False)
            prune(ledger, newest_batch=batch_id, keep=100)
    (checkpoint / "commits" / "149").write_text("v1\n{}\n")
    # Spark purges as it plans batch n (149 the last): entries below n - 100 go.
    _spark_purge(checkpoint, 149 - 100)
    return checkpoint


@pytest.fixture
def pruned_query(pruned_query_template: Path, tmp_path: Path) -> tuple[Ledger, Path]:
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(pruned_query_template, checkpoint)
    return Ledger(checkpoint / "onceover", "q", TABLE), checkpoint


def test_a_pruned_ledger_is_not_taken_for_a_reset_checkpoint(
    pruned_query: tuple[Ledger, Path],
) -> None:
    ledger, checkpoint = pruned_query
    assert record_ids(ledger) == list(range(50, 150))
    check_not_reset(ledger, str(checkpoint))
    # Spark's commits log keeps batch 49, which the ledger pruned: not "uncommitted".
    assert (checkpoint / "commits" / "49").exists()
    assert load_files.uncommitted_batches(checkpoint, "q") == []
    _entry(checkpoint, 150)
    (checkpoint / "commits" / "150").write_text("v1\n{}\n")  # done in Spark, not in the ledger
    assert load_files.uncommitted_batches(checkpoint, "q") == [150]


@pytest.mark.parametrize("reset", ["emptied", "behind", "rewritten"])
def test_a_reset_checkpoint_is_still_refused_after_pruning(
    pruned_query: tuple[Ledger, Path], reset: str
) -> None:
    ledger, checkpoint = pruned_query
    shutil.rmtree(checkpoint / "offsets")
    shutil.rmtree(checkpoint / "commits")
    if reset == "behind":
        for batch_id in range(3):
            _entry(checkpoint, batch_id, ', "new": true')
    if reset == "rewritten":  # a new query got as far, from other data
        for batch_id in range(50, 152):
            _entry(checkpoint, batch_id, ', "new": true')
    with pytest.raises(CheckpointResetError, match="was reset") as refused:
        check_not_reset(ledger, str(checkpoint))
    assert "batches up to 149 of query q" in str(refused.value)


def test_a_reset_is_seen_when_every_record_of_the_ledger_was_pruned(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "onceover", "q", TABLE)
    for batch_id in range(20):
        _entry(tmp_path, batch_id)
        commit(ledger, batch_id, tmp_path)
    prune(ledger, newest_batch=120, keep=100, every=1)  # as seen from a later batch
    assert record_ids(ledger) == []
    _entry(tmp_path, 120)
    check_not_reset(ledger, str(tmp_path))
    shutil.rmtree(tmp_path / "offsets")
    with pytest.raises(CheckpointResetError, match="batches up to 19 of query q"):
        check_not_reset(ledger, str(tmp_path))


def test_the_heartbeat_reader_opens_only_what_changed(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "q", TABLE)
    foreach = Ledger(tmp_path, "q", "p.d.other", "0")
    for batch_id in range(20):
        commit(ledger, batch_id)
    commit(foreach, 0)
    reader = ScopeTotals(tmp_path, "q")
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
    assert reader.read() == scope_totals(tmp_path, "q")

    # The load job's heartbeat keeps one reader for the run.
    args = argparse.Namespace(
        checkpoint=tmp_path / "ckpt", ledger=None, monitor_url=None, monitor_token=None
    )
    shutil.copytree(tmp_path / "q", tmp_path / "ckpt" / "onceover" / "q")
    reporter = load_files.RunReporter(args, [], "run-1")
    assert reporter.totals() == (0, 0)  # no query yet
    reporter.query_id = "q"
    expected = scope_totals(tmp_path, "q")
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
    assert scope_totals(job.ledger().root, job.query_id).batches == 40
