"""Resuming a run: its pending intents, the plan, the launch accepted and its log."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from onceover.events import Mode
from onceover_backend.models.runs import RunSpecPublic, RunStatus


class PendingIntentPublic(BaseModel):
    """A batch the ledger holds as intended but not known committed: the resumed job
    settles it before going on. Pending mode asks BigQuery whether its streams were
    committed and records or redoes it; buffered mode flushes its streams to the batch's
    end again (some may have been flushed already); committed and default modes record
    it, their rows being visible as appended."""

    query_id: str
    batch_id: int | None = Field(description="None for a batch write")
    table: str = Field(description="the table the intended write goes to")
    write: str | None = Field(
        description="which of the call's (or run's) writes to the table; null for the "
        "streaming sink"
    )
    mode: Mode
    expected_rows: int
    streams: list[str]
    intent_at: str
    in_bigquery: Literal["committed", "not_committed", "streams_gone", "partly", "unknown"] = Field(
        description="what BigQuery holds of it: committed (in BigQuery, not in the "
        "checkpoint; pending mode proves it with commit_time), not_committed, "
        "streams_gone (BigQuery no longer knows its streams), partly (some streams "
        "committed: a person must look), unknown (BigQuery cannot say, or could not "
        "be asked)"
    )
    commit_time: str | None = Field(
        description="BigQuery's commit time of its streams: the proof it holds the batch"
    )
    resume_will: str = Field(description="what a resume does with it, and why")


class PendingSwapPublic(BaseModel):
    """A ``mode("overwrite")`` write whose rows the ledger holds committed to its staging
    table, with how far its swap got (its swap record) and what a resume does about it."""

    query_id: str
    batch_id: int | None = Field(description="None for a batch write")
    table: str = Field(description="the table the overwrite replaces rows of")
    write: str | None
    staging_table: str
    step: Literal["staged", "swap_asked", "swapped"] = Field(
        description="staged (no swap recorded: the table holds its old rows), swap_asked "
        "(the swap's job recorded and asked for; it ran once or not at all), swapped"
    )
    staged_rows: int
    job_id: str | None = Field(description="the swap's BigQuery job, once recorded")
    resume_will: str = Field(description="what a resume does with it, and why")


class RunIntentsPublic(BaseModel):
    """The batches a run's checkpoint holds as intended but not confirmed, each with what
    BigQuery says of it: the run page shows a batch committed in BigQuery but not in the
    checkpoint, with BigQuery's commit time as the proof, before anyone resumes."""

    run_id: str
    pending_intents: list[PendingIntentPublic]
    overwrites: list[PendingSwapPublic] = Field(
        default_factory=list,
        description="the ledger's overwrites staged in full, each with the step its swap "
        "reached and what a resume does with it",
    )
    unavailable: str | None = Field(
        description="why the checkpoint could not be read (no launch spec naming it, or "
        "the path is not readable here); pending_intents and overwrites are then empty"
    )


class ResumePlanPublic(BaseModel):
    """What a resume would do, read from the run's spec and its checkpoint."""

    run_id: str
    status: RunStatus = Field(description="the run's status now")
    attempt: int = Field(description="the number the new attempt gets")
    checkpoint: str | None
    ledger: str
    queries: list[str] = Field(description="streaming query ids the ledger holds batches of")
    last_committed_batch: int | None = Field(description="highest batch the ledger committed")
    committed_batches: int
    committed_rows: int
    pending_intents: list[PendingIntentPublic]
    overwrites: list[PendingSwapPublic] = Field(
        description="the ledger's committed overwrites, each with the step its swap reached"
    )
    spark_last_planned_batch: int | None = Field(
        description="highest batch in Spark's offset log (replayed first if not in its commit log)"
    )
    spark_last_finished_batch: int | None = Field(description="highest batch in the commit log")
    module: str
    command: list[str] = Field(
        description="the argument list that runs (never through a shell; secrets redacted)"
    )
    cwd: str | None = Field(description="the directory it runs in (the backend's own)")
    spec: RunSpecPublic = Field(
        description="the spec it launches and who approved it; to resume an unapproved "
        "spec, pass its digest as approve_spec"
    )
    log_path: str = Field(description="where the attempt's output will go")
    warnings: list[str]


class ResumeAcceptedPublic(BaseModel):
    """``202``: the attempt is launched; the run is ``resuming`` until its job reports."""

    run_id: str
    attempt: int
    attempt_id: str
    status: Literal["resuming"]
    requested_at: AwareDatetime
    idempotency_key: str | None
    approved_by: str = Field(description="whose approval of the spec the launch rests on")
    log_url: str = Field(description="the attempt's log: GET this path")
    plan: ResumePlanPublic


class AttemptLogPublic(BaseModel):
    """The end of an attempt's log."""

    run_id: str
    attempt: int
    path: str
    host: str
    live: bool = Field(description="the process is still running; the log may grow")
    size_bytes: int
    lines: list[str] = Field(description="the last lines, oldest first")
    truncated: bool = Field(description="the log holds more before these lines")
