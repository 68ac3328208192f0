"""A partition's long-lived stream slot (``onceover_jobs.sink.ledger.slots``) on every
store (a disk, the S3 and Cloud Storage stand-ins: the ``ledger_root`` fixture): taken,
finished and flushed version by version, continued by the next batch only where the
module's rules allow, and two attempts racing for it told apart by the store's
create-if-absent."""

from __future__ import annotations

import threading

import pytest
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.slots import KEPT_VERSIONS, StreamSlot, StreamSlots, continuation

from onceover.ledger_store import join

TABLE = "p.d.t"


def versions(slots: StreamSlots, partition: int) -> list[str]:
    """The slot's version files, as the store lists them."""
    return sorted(slots.store.list(join(slots.directory, str(partition))).files)


def test_a_slot_is_taken_finished_flushed_and_continued_by_the_next_batch(
    ledger_root: str,
) -> None:
    slots = StreamSlots(Ledger(ledger_root, "q", TABLE))
    assert slots.current(0) is None
    assert continuation(None, "0") is None  # no slot: a new stream

    taken = slots.take(0, "s1", "0", base=0)
    assert (taken.stream, taken.batch, taken.base, taken.end, taken.revision) == (
        "s1",
        "0",
        0,
        None,
        0,
    )
    assert slots.current(0) == taken
    # Taken by this batch, no end yet: its retry continues where it began, unless in
    # buffered mode (an earlier attempt may have written there); another batch may not.
    assert continuation(taken, "0") == ("s1", 0)
    assert continuation(taken, "0", after_flush=True) is None
    assert continuation(taken, "1") is None

    slots.finish(0, "s1", "0", end=10)
    finished = slots.current(0)
    assert finished is not None
    assert (finished.end, finished.flushed, finished.revision) == (10, None, 1)
    assert continuation(finished, "1") == ("s1", 10)
    assert continuation(finished, "1", after_flush=True) is None  # not flushed yet
    slots.finish(0, "s1", "0", end=10)  # again (a retried task): nothing new
    slots.finish(0, "s1", "other-batch", end=99)  # not that batch's: nothing
    slots.flushed(0, "s-other", "0", end=99)  # not that stream: nothing
    assert slots.current(0) == finished

    slots.flushed(0, "s1", "0", end=10)
    flushed = slots.current(0)
    assert flushed is not None
    assert (flushed.end, flushed.flushed, flushed.revision) == (10, 10, 2)
    assert continuation(flushed, "1", after_flush=True) == ("s1", 10)

    following = slots.take(0, "s1", "1", base=10)
    assert (following.batch, following.base, following.end, following.revision) == (
        "1",
        10,
        None,
        3,
    )
    assert slots.current(0) == following
    assert len(versions(slots, 0)) == KEPT_VERSIONS  # older versions are removed
    assert versions(slots, 0) == ["v000000002.json", "v000000003.json"]
    assert slots.current(1) is None  # every partition has a slot of its own


@pytest.mark.parametrize(
    ("batches", "agree"),
    [(("1", "1"), True), (("1", "2"), False)],
    ids=["two-attempts-of-one-batch", "two-batches"],
)
def test_two_attempts_racing_for_a_slot_are_told_apart_by_the_store(
    ledger_root: str,
    monkeypatch: pytest.MonkeyPatch,
    batches: tuple[str, str],
    agree: bool,
) -> None:
    """Both attempts read the slot (batch 0's, finished) before either saves its own
    (held at a barrier), each on a stream of its own: the store creates the next version
    for one, and the other reads the winner's slot. An attempt of the same batch goes on
    with it; one of another batch is refused, naming the batch that took it."""
    slots = StreamSlots(Ledger(ledger_root, "q", TABLE))
    slots.take(0, "s0", "0", base=0)
    slots.finish(0, "s0", "0", end=10)
    before = versions(slots, 0)
    both_read = threading.Barrier(2, timeout=30)
    first_reads: set[str] = set()
    current = StreamSlots.current

    def read_then_wait(self: StreamSlots, partition: int) -> StreamSlot | None:
        found = current(self, partition)
        me = threading.current_thread().name
        if me not in first_reads:
            first_reads.add(me)
            both_read.wait()  # neither saves before both have read
        return found

    outcomes: dict[str, StreamSlot | BaseException] = {}

    def attempt(stream: str, batch: str) -> None:
        try:
            outcomes[stream] = slots.take(0, stream, batch, base=10)
        except BaseException as exc:  # recorded for the assertions below
            outcomes[stream] = exc

    attempts = [
        threading.Thread(target=attempt, args=(f"s-{n}", batch), name=f"attempt-{n}")
        for n, batch in enumerate(batches)
    ]
    with monkeypatch.context() as patched:
        patched.setattr(StreamSlots, "current", read_then_wait)
        for thread in attempts:
            thread.start()
        for thread in attempts:
            thread.join(60)

    saved = slots.current(0)
    assert saved is not None
    assert saved.revision == 2  # one version more: one attempt's
    assert versions(slots, 0) == [before[-1], "v000000002.json"]
    taken = [o for o in outcomes.values() if isinstance(o, StreamSlot)]
    refused = [o for o in outcomes.values() if isinstance(o, LedgerError)]
    if agree:
        assert taken == [saved, saved], outcomes  # both go on with the winner's stream
    else:
        assert taken == [saved], outcomes
        assert len(refused) == 1, outcomes
        assert f"moved to batch {saved.batch} while batch" in str(refused[0])
        assert slots.store.where(join(slots.directory, "0")) in str(refused[0])
