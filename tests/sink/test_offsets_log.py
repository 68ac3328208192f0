"""A reset checkpoint told from a replay by Spark's offsets log
(``onceover_jobs.sink.ledger.offsets_log``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from onceover_jobs.sink.errors import CheckpointResetError
from onceover_jobs.sink.ledger.offsets_log import check_not_reset, fingerprint, latest_batch
from onceover_jobs.sink.ledger.records import Ledger

from onceover.ledger_files import BatchRecord


def _entry(checkpoint: Path, batch_id: int, text: str) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(f"v1\n{text}\n")


def _committed(ledger: Ledger, checkpoint: Path, batch_id: int) -> None:
    record = BatchRecord(
        query_id=ledger.query_id, batch_id=batch_id, table="p.d.t", mode="pending",
        state="intent", streams=(), expected_rows=0, intent_at="2026-11-24T00:00:00Z",
        source_offsets=fingerprint(str(checkpoint), batch_id),
    )  # fmt: skip
    ledger.write_intent(record)
    ledger.mark_committed(record, at="2026-11-24T00:00:01Z", commit_time=None)


def test_a_checkpoint_that_accounts_for_every_batch_passes(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "onceover", "q", "p.d.t")
    check_not_reset(ledger, str(tmp_path))  # nothing recorded yet
    for batch in (0, 1):
        _entry(tmp_path, batch, f'{{"batch": {batch}}}')
        _committed(ledger, tmp_path, batch)
    _entry(tmp_path, 2, '{"batch": 2}')  # the next batch, logged before it runs
    (tmp_path / "offsets" / ".2.crc").write_text("")
    assert latest_batch(str(tmp_path)) == 2
    check_not_reset(ledger, str(tmp_path))
    (tmp_path / "offsets" / "0").unlink()  # Spark keeps only its last entries
    check_not_reset(ledger, str(tmp_path))


@pytest.mark.parametrize("reset", ["emptied", "behind", "rewritten"])
def test_a_reset_checkpoint_is_named_with_its_fix(tmp_path: Path, reset: str) -> None:
    ledger = Ledger(tmp_path / "onceover", "q", "p.d.t")
    for batch in (0, 1):
        _entry(tmp_path, batch, f'{{"batch": {batch}}}')
        _committed(ledger, tmp_path, batch)
    for batch in (0, 1):
        (tmp_path / "offsets" / str(batch)).unlink()
    if reset == "behind":
        _entry(tmp_path, 0, '{"batch": 0, "new": true}')
    if reset == "rewritten":
        _entry(tmp_path, 0, '{"batch": 0, "new": true}')
        _entry(tmp_path, 1, '{"batch": 1, "new": true}')
    with pytest.raises(CheckpointResetError, match="was reset") as refused:
        check_not_reset(ledger, str(tmp_path))
    assert "batches up to 1 of query q" in str(refused.value)
    assert "new checkpointLocation" in str(refused.value)
