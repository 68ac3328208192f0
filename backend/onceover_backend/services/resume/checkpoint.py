"""What a run's checkpoint holds, read where its spec says it is, before a resume.

The ledger is the sink's durable record of intents and commits, read here through the
contract (:mod:`onceover.ledger_files`) as the sink reads it; Spark's own offset and
commit logs say which batch it will replay first.
Both are plain files under the checkpoint directory, on a local or shared filesystem
this backend must be able to read. Anything that keeps them from being read is a
:class:`~onceover_backend.errors.UnresumableError` naming the path: a resume that
cannot see its checkpoint is never launched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from onceover.checkpoint_layout import ledger_root as checkpoint_ledger
from onceover.errors import LedgerError
from onceover.events import JobSpec
from onceover.ledger_files import BatchRecord, Totals, scope_records, scope_totals, scopes
from onceover_backend.errors import UnresumableError

RUN_ID_FILE = "run_id"
"""The run id a job keeps beside its ledger (``onceover_jobs.load_files``)."""


@dataclass(frozen=True)
class CheckpointState:
    checkpoint: Path | None
    ledger: Path
    queries: list[str] = field(default_factory=list)
    committed: list[BatchRecord] = field(default_factory=list)
    intents: list[BatchRecord] = field(default_factory=list)
    spark_last_planned_batch: int | None = None
    spark_last_finished_batch: int | None = None
    warnings: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    """Committed batches and rows of every query, with those the ledger pruned
    (``committed`` holds only the records it keeps: onceover.ledger_files.ScopeTotals)."""

    @property
    def last_committed_batch(self) -> int | None:
        numbered = [b.batch_id for b in self.committed if b.batch_id is not None]
        return max(numbered) if numbered else None


def _readable_directory(path: Path, what: str) -> None:
    if not path.exists():
        raise UnresumableError(
            f"the {what} {path} does not exist on this backend's host; a resume needs the "
            "checkpoint where the run's job wrote it (a shared filesystem for a cluster)"
        )
    if not path.is_dir():
        raise UnresumableError(f"the {what} {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UnresumableError(f"the {what} {path} is not readable by this backend")


def _highest_batch(directory: Path) -> int | None:
    """The highest batch id in one of Spark's logs (``offsets``, ``commits``)."""
    if not directory.is_dir():
        return None
    try:
        numbers = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]
    except OSError as exc:
        raise UnresumableError(f"cannot list {directory}: {exc}") from exc
    return max(numbers) if numbers else None


def read_checkpoint(spec: JobSpec, run_id: str) -> CheckpointState:
    """The ledger and Spark logs of ``spec``'s checkpoint, checked to belong to ``run_id``."""
    checkpoint = Path(spec.checkpoint) if spec.checkpoint else None
    if spec.ledger:
        ledger_root = Path(spec.ledger)
    elif checkpoint is not None:
        ledger_root = checkpoint_ledger(checkpoint)
    else:
        raise UnresumableError(
            "the run's spec names no checkpoint or ledger, so nothing says where to resume from"
        )
    for path in (checkpoint, ledger_root):
        if path is not None and not path.is_absolute():
            raise UnresumableError(f"the checkpoint path {path} in the spec is not absolute")
    if checkpoint is not None:
        _readable_directory(checkpoint, "checkpoint")
    warnings: list[str] = []
    if not ledger_root.exists():
        # The job failed before its sink recorded anything: nothing to resolve.
        warnings.append(f"the ledger {ledger_root} does not exist yet: no batch was recorded")
        return CheckpointState(
            checkpoint,
            ledger_root,
            spark_last_planned_batch=_spark_log(checkpoint, "offsets"),
            spark_last_finished_batch=_spark_log(checkpoint, "commits"),
            warnings=warnings,
        )
    _readable_directory(ledger_root, "ledger")
    _check_owner(ledger_root, run_id)
    queries: list[str] = []
    committed: list[BatchRecord] = []
    intents: list[BatchRecord] = []
    totals = Totals()
    try:
        for scope in scopes(ledger_root):
            records = scope_records(ledger_root, scope)
            if records:
                queries.append(records[0].query_id)
            committed += [r for r in records if r.committed]
            intents += [r for r in records if not r.committed]
            totals += scope_totals(ledger_root, scope)
    except LedgerError as exc:
        raise UnresumableError(str(exc)) from exc
    except OSError as exc:
        raise UnresumableError(f"cannot read the ledger {ledger_root}: {exc}") from exc
    return CheckpointState(
        checkpoint,
        ledger_root,
        queries,
        committed,
        intents,
        _spark_log(checkpoint, "offsets"),
        _spark_log(checkpoint, "commits"),
        warnings,
        totals,
    )


def _spark_log(checkpoint: Path | None, name: str) -> int | None:
    return None if checkpoint is None else _highest_batch(checkpoint / name)


def _check_owner(ledger_root: Path, run_id: str) -> None:
    """A checkpoint another run wrote is refused: resuming it would load its data again
    under this run's name."""
    path = ledger_root / RUN_ID_FILE
    try:
        owner = path.read_text().strip() if path.is_file() else None
    except OSError as exc:
        raise UnresumableError(f"cannot read {path}: {exc}") from exc
    if owner and owner != run_id:
        raise UnresumableError(
            f"the checkpoint belongs to run {owner!r} ({path}), not to run {run_id!r}"
        )
