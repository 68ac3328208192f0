"""A reset checkpoint told from a replay by Spark's offsets log
(``onceover_jobs.sink.ledger.offsets_log``), read wherever the checkpoint is: a disk or a
bucket (the ``ledger_root`` fixture; the ledger inside it, as the streaming sink keeps it)."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import CheckpointResetError
from onceover_jobs.sink.ledger.offsets_log import check_not_reset, fingerprint, latest_batch
from onceover_jobs.sink.ledger.records import Ledger

from onceover.checkpoint_layout import ledger_root as ledger_in
from onceover.ledger_files import BatchRecord
from onceover.ledger_store import open_store


def _entry(checkpoint: str, batch_id: int, text: str) -> None:
    open_store(checkpoint).put(f"offsets/{batch_id}", f"v1\n{text}\n".encode())


def _committed(ledger: Ledger, checkpoint: str, batch_id: int) -> None:
    record = BatchRecord(
        query_id=ledger.query_id, batch_id=batch_id, table="p.d.t", mode="pending",
        state="intent", streams=(), expected_rows=0, intent_at="2026-11-24T00:00:00Z",
        source_offsets=fingerprint(checkpoint, batch_id),
    )  # fmt: skip
    ledger.write_intent(record)
    ledger.mark_committed(record, at="2026-11-24T00:00:01Z", commit_time=None)


def test_a_checkpoint_that_accounts_for_every_batch_passes(ledger_root: str) -> None:
    checkpoint = ledger_root
    ledger = Ledger(ledger_in(checkpoint), "q", "p.d.t")
    check_not_reset(ledger, checkpoint)  # nothing recorded yet
    for batch in (0, 1):
        _entry(checkpoint, batch, f'{{"batch": {batch}}}')
        _committed(ledger, checkpoint, batch)
    _entry(checkpoint, 2, '{"batch": 2}')  # the next batch, logged before it runs
    open_store(checkpoint).put("offsets/.2.crc", b"")
    assert latest_batch(checkpoint) == 2
    check_not_reset(ledger, checkpoint)
    open_store(checkpoint).delete("offsets/0")  # Spark keeps only its last entries
    check_not_reset(ledger, checkpoint)


RESETS = {
    "emptied": {},
    "behind": {0: '{"batch": 0, "new": true}'},
    "rewritten": {0: '{"batch": 0, "new": true}', 1: '{"batch": 1, "new": true}'},
    # Spark's log kept to batch 0, batch 1 planned again anew.
    "rewound": {0: '{"batch": 0}', 1: '{"batch": 1, "new": true}'},
}


@pytest.mark.parametrize("watched", [False, True])
@pytest.mark.parametrize("reset", list(RESETS))
def test_a_reset_checkpoint_is_named_with_its_fix(
    ledger_root: str, reset: str, watched: bool
) -> None:
    """Refused whether this process checked the query's batches before (``watched``: a
    notebook's query stopped, its checkpoint reset, started again in the same Spark
    session, asking the worker that checked its last batch) or never did."""
    checkpoint = ledger_root
    ledger = Ledger(ledger_in(checkpoint), "q", "p.d.t")
    for batch in (0, 1):
        _entry(checkpoint, batch, f'{{"batch": {batch}}}')
        if watched:
            check_not_reset(ledger, checkpoint)
        _committed(ledger, checkpoint, batch)
    for batch in (0, 1):
        open_store(checkpoint).delete(f"offsets/{batch}")
    for batch, text in RESETS[reset].items():
        _entry(checkpoint, batch, text)
    with pytest.raises(CheckpointResetError, match="was reset") as refused:
        check_not_reset(ledger, checkpoint)
    message = str(refused.value)
    assert f"the checkpoint {checkpoint} was reset" in message
    assert f"the ledger ({ledger.where})" in message
    assert "batches up to 1 of query q" in message
    assert "new checkpointLocation" in message


def _requests(*roots: str) -> int:
    """Requests the stores under ``roots`` made so far, of every kind."""
    return sum(n for root in roots for n, _ in open_store(root).requests.snapshot().values())


def test_a_running_query_costs_the_same_few_requests_however_many_batches_are_stored(
    ledger_root: str,
) -> None:
    """Item 6 of the ledger-store work: flat in the batches already stored. A query's
    first check in a process compares the whole ledger; every next batch only itself."""
    costs: dict[int, list[int]] = {}
    for stored in (3, 30):
        checkpoint = f"{ledger_root}/stored-{stored}"
        root = ledger_in(checkpoint)
        ledger = Ledger(root, "q", "p.d.t")
        for batch in range(stored):
            _entry(checkpoint, batch, f'{{"batch": {batch}}}')
            _committed(ledger, checkpoint, batch)
        costs[stored] = []
        for batch in range(stored, stored + 3):
            _entry(checkpoint, batch, f'{{"batch": {batch}}}')  # Spark logs it, then asks
            before = _requests(checkpoint, root)
            check_not_reset(ledger, checkpoint)
            check_not_reset(ledger, checkpoint)  # PySpark asks for the writer twice
            costs[stored].append(_requests(checkpoint, root) - before)
            _committed(ledger, checkpoint, batch)
    first, *steady = costs[30]
    assert steady == costs[3][1:], costs  # the same count at 3 and at 30 stored
    assert max(steady) <= 12, costs
    assert first > 3 * max(steady), costs  # the first compares every record, once
