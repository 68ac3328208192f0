"""Why a failed run stopped: its error classified, with the batch it last reported.

The error a run reports is what its Python driver saw last, which is often a symptom:
when the driver's JVM dies (killed, out of memory, preempted) the Python side only sees
its Py4J connection refused. So the error is read for what it says about the driver
(:func:`classify`), and the batch the run last reported (its streams, its intent, its
commit) says where it stopped. The one home of this reading: the run's page and the
overview's "Why" both show :func:`causes_of`'s answer.

Each cause is one of :data:`CAUSES`, looked for in that order; the first that matches
wins (a task's error may mention anything, so it is asked before the driver's own).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from sqlalchemy import func
from sqlmodel import Session, col, select

from onceover_backend.models import RunCausePublic
from onceover_backend.models.runs import BatchStage, CauseKind
from onceover_backend.tables import Attempt, Batch, Run, Stream

MAX_SHOWN = 300
"""Characters of the error the headline quotes; the whole error is beside it."""


@dataclass(frozen=True)
class LastBatch:
    """The batch a run reported last, and how far it got."""

    batch: str  # "0", "1", ... or "write"
    stage: BatchStage

    def where(self) -> str:
        """Where the run stopped, as the headline says it."""
        name = "its batch write" if self.batch == "write" else f"batch {self.batch}"
        return {
            "writing": f"at {name} (its streams written, its commit not reported)",
            "intent": f"during the commit of {name} (intended, not confirmed)",
            "committed": f"after {name} committed",
            "skipped_duplicate": f"after {name} (a replay, skipped as already committed)",
            "aborted": f"after {name} was aborted",
        }[self.stage]


_DRIVER_GONE = re.compile(
    r"ConnectionRefusedError|Py4JNetworkError|Answer from Java side is empty"
    r"|Error while (?:sending|receiving)|BrokenPipeError|ConnectionResetError"
    r"|SparkContext (?:was|has been) shut down|Java gateway process exited"
)
_TASK_FAILED = re.compile(
    r"Task \S+ in stage \S+ failed (?P<times>\d+) times?, most recent failure:(?P<rest>.*)",
    re.S,
)
_REFUSED = re.compile(r"ConcurrentDriverError|another driver (?:still )?runs")
_COMMIT_REFUSED = re.compile(
    r"CommitRejectedError|StreamsUncommittableError|StreamsGoneError|BatchCommitWriteStreams"
)
_BAD_OPTION = re.compile(
    r"SinkOptionError|ConfigurationError|LineageConfigError|CommitLimitError"
    r"|\b(?:invalid|unknown) option\b|\boption '?[\w.]+'? (?:is|must)\b"
)
# The line a Python or Java error names itself on: "pkg.SomeError: message".
_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w$]+\.)*\w*(?:Error|Exception|Exit)\b.*$")
_NOT_THE_CAUSE = ("org.apache.spark.api.python.PythonException", "Traceback")


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:MAX_SHOWN] + ("…" if len(line) > MAX_SHOWN else "")


def _innermost(text: str) -> str:
    """The last exception line of a traceback or a Spark task failure (Python puts the
    raised error last; Java's frames after its message are skipped)."""
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if _EXCEPTION_LINE.match(ln) and not ln.strip().startswith(_NOT_THE_CAUSE)
    ]
    return _first_line(lines[-1] if lines else text)


def classify(
    error: str | None, *, refused: bool = False, last: LastBatch | None = None
) -> RunCausePublic:
    """The cause of a failed run from its ``error``, whether its latest attempt was
    ``refused`` by another driver, and the batch it reported ``last``: the headline is
    what happened, where (the batch), then the error's own line when it adds to it."""
    text = (error or "").strip()
    kind: CauseKind
    detail: str | None = None
    if refused or _REFUSED.search(text):
        return RunCausePublic(
            kind="refused",
            headline="Refused: another driver still runs this query or run id; this one "
            "wrote nothing, and the other goes on",
            batch=None,
            batch_stage=None,
            error=error,
        )
    if task := _TASK_FAILED.search(text):
        kind, times = "task_failed", int(task["times"])
        lead = f"A Spark task failed {times} time{'s' if times != 1 else ''}"
        detail = _innermost(task["rest"])
    elif _COMMIT_REFUSED.search(text):
        kind, lead, detail = "commit_refused", "BigQuery refused the commit", _innermost(text)
    elif _BAD_OPTION.search(text):
        kind, lead, detail = "bad_option", "A write option or setting is wrong", _innermost(text)
    elif _DRIVER_GONE.search(text):
        kind, lead = "driver_died", "The Spark driver died (its JVM exited)"
    else:
        kind, lead = "error", "The job failed"
        detail = _first_line(text) if text else "it reported no error"
    where = last.where() if last else "before reporting any batch"
    return RunCausePublic(
        kind=kind,
        headline=f"{lead} {where}" + (f": {detail}" if detail else ""),
        batch=last.batch if last else None,
        batch_stage=last.stage if last else None,
        error=error,
    )


def causes_of(session: Session, runs: Sequence[Run]) -> dict[str, RunCausePublic]:
    """The cause of each failed run of ``runs`` (3 queries, however many runs)."""
    failed = [run for run in runs if run.status == "failed"]
    if not failed:
        return {}
    ids = [run.run_id for run in failed]
    last = _last_batches(session, ids)
    refused = _refused(session, ids)
    return {
        run.run_id: classify(run.error, refused=run.run_id in refused, last=last.get(run.run_id))
        for run in failed
    }


def _refused(session: Session, ids: list[str]) -> set[str]:
    """Runs whose newest attempt another driver turned away (1 query)."""
    newest: dict[str, str] = {}
    for run_id, status in session.exec(
        select(Attempt.run_id, Attempt.status)
        .where(col(Attempt.run_id).in_(ids))
        .order_by(col(Attempt.number))
    ):
        newest[run_id] = status
    return {run_id for run_id, status in newest.items() if status == "refused"}


def _last_batches(session: Session, ids: list[str]) -> dict[str, LastBatch]:
    """Each run's newest batch record, or its newest stream's batch when that came after
    (a driver can die between finalizing a batch's streams and reporting its intent)
    (2 queries)."""
    batches = _newest_per_run(session, Batch, ids)
    streams = _newest_per_run(session, Stream, ids)
    last: dict[str, LastBatch] = {}
    for run_id in ids:
        batch, stream = batches.get(run_id), streams.get(run_id)
        if stream is not None and (batch is None or _after(stream, batch)):
            last[run_id] = LastBatch(_name(stream.batch_id, stream.write), "writing")
        elif batch is not None:
            stage = cast(BatchStage, batch.state)  # the projection stores only these
            last[run_id] = LastBatch(_name(batch.batch_id, batch.write), stage)
    return last


_Row = TypeVar("_Row", Batch, Stream)


def _newest_per_run(session: Session, model: type[_Row], ids: list[str]) -> dict[str, _Row]:
    """Each of ``ids``' newest ``model`` row (the highest id), by run (1 query)."""
    newest = (
        select(model.run_id, func.max(model.id).label("id"))
        .where(col(model.run_id).in_(ids))
        .group_by(col(model.run_id))
        .subquery()
    )
    joined = select(model).join(newest, col(model.id) == newest.c.id)
    return {row.run_id: row for row in session.exec(joined)}


def _after(stream: Stream, batch: Batch) -> bool:
    """The stream belongs to a later batch than the newest batch record."""
    if stream.query_id != batch.query_id:
        return stream.created_at > (batch.intent_at or stream.created_at)
    if stream.batch_id is None or batch.batch_id is None:
        return stream.write != batch.write and stream.created_at > (
            batch.intent_at or stream.created_at
        )
    return stream.batch_id > batch.batch_id


def _name(batch_id: int | None, write: str | None) -> str:
    return str(batch_id) if batch_id is not None else "write"
