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


@pytest.mark.parametrize("reset", ["emptied", "behind", "rewritten"])
def test_a_reset_checkpoint_is_named_with_its_fix(ledger_root: str, reset: str) -> None:
    checkpoint = ledger_root
    ledger = Ledger(ledger_in(checkpoint), "q", "p.d.t")
    for batch in (0, 1):
        _entry(checkpoint, batch, f'{{"batch": {batch}}}')
        _committed(ledger, checkpoint, batch)
    for batch in (0, 1):
        open_store(checkpoint).delete(f"offsets/{batch}")
    if reset == "behind":
        _entry(checkpoint, 0, '{"batch": 0, "new": true}')
    if reset == "rewritten":
        _entry(checkpoint, 0, '{"batch": 0, "new": true}')
        _entry(checkpoint, 1, '{"batch": 1, "new": true}')
    with pytest.raises(CheckpointResetError, match="was reset") as refused:
        check_not_reset(ledger, checkpoint)
    message = str(refused.value)
    assert f"the checkpoint {checkpoint} was reset" in message
    assert f"the ledger ({ledger.where})" in message
    assert "batches up to 1 of query q" in message
    assert "new checkpointLocation" in message
