"""Claiming a streaming query's checkpoint before ``start()`` (onceover_jobs.sink.claim).

Spark's side, a second driver refused before it plans a micro-batch while the first goes
on, is in tests/jobs/test_load_variants.py; here, what is claimed in the name of which
driver, and what is refused, with a session that names its JVM's pid."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from onceover_jobs.sink.claim import claim_checkpoint
from onceover_jobs.sink.driver import owner_of
from onceover_jobs.sink.errors import ConcurrentDriverError

from onceover.checkpoint_layout import ledger_root


def session_of(pid: int) -> SimpleNamespace:
    """A classic session as far as claim_checkpoint reads one: its driver JVM's pid."""
    handle = SimpleNamespace(current=lambda: SimpleNamespace(pid=lambda: pid))
    jvm = SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(ProcessHandle=handle)))
    return SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm))


def test_a_new_checkpoint_has_no_query_to_claim_yet(tmp_path: Path) -> None:
    claim_checkpoint(session_of(os.getpid()), str(tmp_path))
    assert not Path(ledger_root(tmp_path)).exists()  # the sink claims it at its first micro-batch


def test_the_claim_names_the_driver_jvm_and_refuses_another_while_it_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "q-1"}))
    claim_checkpoint(session_of(os.getpid()), f"file://{tmp_path}")
    claim = json.loads((Path(ledger_root(tmp_path)) / "q-1" / "driver.json").read_text())
    assert claim["owner"] == owner_of(os.getpid())
    claim_checkpoint(session_of(os.getpid()), str(tmp_path))  # the same driver again: fine
    with pytest.raises(ConcurrentDriverError, match="another driver that still runs") as no:
        claim_checkpoint(session_of(os.getppid()), str(tmp_path))
    assert owner_of(os.getpid()) in str(no.value)


def test_a_session_without_a_driver_jvm_here_is_refused_saying_so(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "q-1"}))
    with pytest.raises(TypeError, match="needs a classic SparkSession"):
        claim_checkpoint(SimpleNamespace(), str(tmp_path))
    assert not Path(ledger_root(tmp_path)).exists()


def test_a_checkpoint_no_store_serves_is_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="checkpointLocation"):
        claim_checkpoint(session_of(os.getpid()), "hdfs://namenode/ckpt")
