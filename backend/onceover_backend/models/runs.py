"""Runs as listed and shown: their attempts, launches, batches, streams and specs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from onceover.events import Mode, StreamType
from onceover_backend.models.redrive import RunRedrivesPublic

RunStatus = Literal["running", "succeeded", "failed", "stalled", "resuming"]


class VerdictPublic(BaseModel):
    """The latest reconciliation's verdict, in short."""

    id: int
    status: Literal["ok", "mismatch", "error"]
    checked_at: AwareDatetime


class RunPublic(BaseModel):
    """A run as listed: its state and totals."""

    run_id: str
    job: str | None
    table: str
    mode: Mode | None = Field(
        description="the sink's write mode; null until an event of the run names it"
    )
    status: RunStatus
    started_at: AwareDatetime
    finished_at: AwareDatetime | None
    last_event_at: AwareDatetime | None
    last_heartbeat_at: AwareDatetime | None
    rows_expected: int = Field(description="rows of batches intended or committed")
    rows_committed: int = Field(description="rows of committed batches, each batch once")
    batches_committed: int
    rows_reported: int | None = Field(description="rows the job's own ledger reports committed")
    key_column: str | None = Field(description="the column identifying a row, if named")
    error: str | None
    updated_at: AwareDatetime = Field(description="last change, a reconciliation of it included")
    already_exists: int = Field(0, description="append requests answered ALREADY_EXISTS")
    out_of_range: int = Field(0, description="append requests answered OUT_OF_RANGE")
    throttled: int = Field(
        0,
        description="append requests BigQuery's throughput quota refused (RESOURCE_EXHAUSTED); "
        "the sink waits for the quota to refill (retry.throttle_s) and sends them again",
    )
    throttled_at: AwareDatetime | None = Field(
        None, description="when a stream of the run was last throttled by the quota"
    )
    arrow_refused_at: AwareDatetime | None = Field(
        None,
        description="when BigQuery first refused the run's Arrow rows: from then on they "
        "went as proto rows (nothing of the refused request was written)",
    )
    arrow_refused: str | None = Field(None, description="BigQuery's refusal, as it said it")
    rows_dead_lettered: int = Field(
        0,
        description="rows BigQuery refused that committed batches set aside in the "
        "dead-letter table, each batch once (not in rows_committed)",
    )
    dead_letter_table: str | None = Field(
        None, description="the dead-letter table the run's events last named, if any"
    )
    rejected_requests: int = Field(
        0,
        description="rows_rejected events: requests BigQuery refused for bad rows (a retried "
        "task reports its rows again, so this can exceed the batches' count)",
    )
    reconciliation: VerdictPublic | None = Field(
        None, description="the run's latest reconciliation, if any"
    )


class RunsPublic(BaseModel):
    data: list[RunPublic]
    count: int = Field(description="runs matching the filters, before paging")


AttemptStatus = Literal["resuming", "running", "succeeded", "failed", "stalled", "refused"]
"""``refused``: a second driver turned away while another still ran the run; it wrote
nothing, and the run's status is the other attempt's."""


class RunSpecPublic(BaseModel):
    """The run's launch spec as its job reported it, and whether an operator approved it.

    Nothing is launched from a spec no operator approved; a later, different spec the
    job reports waits as ``proposed`` until an operator approves or rejects it."""

    spec: dict[str, Any] | None = Field(description="the pinned spec (secrets redacted)")
    digest: str | None = Field(description="what an approval names (sha256, without cwd)")
    approved_by: str | None
    approved_at: AwareDatetime | None
    proposed: dict[str, Any] | None = Field(
        description="a different spec a later attempt reported (secrets redacted)"
    )
    proposed_digest: str | None
    proposed_at: AwareDatetime | None
    proposed_by_attempt: str | None


class SpecDecisionCreate(BaseModel):
    """``POST /api/runs/{run_id}/spec``: an operator's decision on one of the run's specs."""

    model_config = ConfigDict(extra="forbid")

    digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="the spec's digest, as shown")
    decision: Literal["approve", "reject"] = Field(
        description="approve: launches may use it (a proposed spec is pinned); reject: "
        "drop the proposal, or withdraw the pinned spec's approval"
    )


class LaunchPublic(BaseModel):
    """How the control plane launched an attempt (a resume)."""

    trigger: Literal["api", "auto"]
    actor: str = Field(description="who asked (the token's name; onceover for auto-resume)")
    approved_by: str | None = Field(description="whose approval of the spec it rests on")
    spec_digest: str | None
    requested_at: AwareDatetime
    command: list[str] = Field(description="secrets redacted")
    host: str = Field(description="the backend host that started the process (and has its log)")
    pid: int | None
    live: bool = Field(description="the process has not been seen to exit")
    exit_code: int | None
    ended_at: AwareDatetime | None


class AttemptPublic(BaseModel):
    """One launch of the run."""

    attempt_id: str
    number: int = Field(description="1, 2, ... (the attempt's log is .../attempts/{number}/log)")
    status: AttemptStatus
    started: bool = Field(description="its run_started event has arrived")
    started_at: AwareDatetime
    finished_at: AwareDatetime | None
    last_heartbeat_at: AwareDatetime | None
    last_event_at: AwareDatetime | None
    rows_reported: int | None
    error: str | None
    spec: dict[str, Any] | None = Field(description="what it reported (secrets redacted)")
    launch: LaunchPublic | None = Field(
        default=None, description="set when the control plane launched this attempt"
    )


class BatchStreamPublic(BaseModel):
    stream: str
    rows: int
    bytes: int = 0
    partition: int | None = None
    attempt: int | None = None


class RejectionPublic(BaseModel):
    """A row BigQuery refused, as the task that sent it named it (``rows_rejected``)."""

    time: AwareDatetime = Field(description="when the task reported it (its latest report)")
    table: str
    query_id: str
    batch_id: int | None
    write: str | None
    partition: int
    attempt: int = Field(description="the task attempt that reported it")
    stream: str
    offset: int = Field(description="the row's offset in its partition (0 = first row)")
    key: str | None = Field(description="the write's key column's value, as text")
    column: str | None = Field(description="the column BigQuery named")
    reason: str
    dead_letter_table: str | None = Field(
        description="where it was set aside; null: there was none, and the task failed"
    )


OverwriteStep = Literal["staging", "staged", "swap_asked", "swapped"]


class OverwritePublic(BaseModel):
    """A ``mode("overwrite")`` write: its rows committed to a staging table exactly once,
    then swapped in by one transaction (a BigQuery job whose id the ledger fixed) that
    deletes the table's rows in the scope and inserts the staged ones."""

    step: OverwriteStep = Field(
        description="how far it got (where it stopped, if its run did not finish): staging "
        "(the batch is not committed: rows on their way to the staging table), staged "
        "(committed there, no swap heard of: the table holds its old rows), swap_asked (the "
        "swap's job recorded and asked for, not heard done: it ran once or not at all), "
        "swapped (the table's rows replaced)"
    )
    staging_table: str | None = Field(description="where the rows were staged")
    scope: str | None = Field(
        description="what the swap replaces, in words; null before its swap was heard of"
    )
    job_id: str | None = Field(description="the BigQuery job of the swap's transaction")
    attempt: int | None = Field(description="0, then 1, ... after a swap job that failed")
    rows_inserted: int | None = Field(description="the rows the swap inserts: every row staged")
    rows_replaced: int | None = Field(
        description="the table's rows in the scope, counted as the swap's first attempt began"
    )
    partitions: list[str] | None = Field(
        description="the partitions touched, by BigQuery's partition ids (20261102, "
        "__NULL__, __UNPARTITIONED__; the first 100); null: the whole table"
    )
    partition_count: int | None = Field(description="all the partitions touched")
    swap_started_at: AwareDatetime | None
    swapped_at: AwareDatetime | None


class BatchPublic(BaseModel):
    """One batch in the commit history."""

    table: str
    query_id: str
    batch_id: int | None
    write: str | None = Field(
        description="which of the foreachBatch call's (or batch run's) writes to the table: "
        "'0', '1', ... or 'id-<write_id>'; null for the streaming sink"
    )
    mode: Mode
    state: Literal["intent", "committed", "skipped_duplicate", "aborted"]
    expected_rows: int | None
    rows: int | None
    streams: list[BatchStreamPublic]
    resolved: bool = Field(description="committed by an earlier attempt, found on replay")
    stamped: bool = Field(description="its rows carry _onceover_run_id and _onceover_batch_id")
    replays: int = Field(description="times a replay of it was skipped as a duplicate")
    rows_rewritten: int
    dead_lettered_rows: int = Field(
        description="rows BigQuery refused, set aside in the dead-letter table (not in rows)"
    )
    dead_letter_table: str | None
    upserts: int | None = Field(
        default=None, description="CDC writes: the batch's UPSERT rows; null for appends"
    )
    deletes: int | None = Field(
        default=None, description="CDC writes: the batch's DELETE rows; null for appends"
    )
    dead_letter_streams: list[BatchStreamPublic] = Field(
        description="the PENDING streams on the dead-letter table committed with the batch"
    )
    abort_reason: str | None
    commit_ms: float | None
    intent_at: AwareDatetime | None
    committed_at: AwareDatetime | None
    aborted_at: AwareDatetime | None
    skipped_at: AwareDatetime | None
    commit_time: AwareDatetime | None = Field(
        description="when the rows became the table's, as the first commit reported it: "
        "pending, BigQuery's commit time (BatchCommitWriteStreams); buffered, when the "
        "driver's last FlushRows returned; committed, when the driver recorded the batch "
        "committed (rows were visible as they were appended). Null for a batch not "
        "committed or a commit that did not say; committed_at is its event's time"
    )
    source_offsets: list[str] | None = Field(
        description="streaming: the batch's entry in Spark's offsets log, one offset per "
        "source as Spark wrote it (JSON text); null for batch and foreachBatch writes"
    )
    key_checksum: int | None = Field(
        description="stamped writes with an INT64 or STRING key: the sum over the batch's "
        "rows of the first 32 bits of MD5(CAST(key AS STRING)) (onceover.key_checksum); "
        "one aggregate query over the batch's rows in BigQuery gives the same number"
    )
    key_bucket_count: int | None = Field(
        default=None,
        description="with key_checksum: the non-empty buckets of the batch's key tally "
        "(rows, checksum and INT64 key sum per key-hash bucket, onceover.key_checksum), "
        "which reconciliation compares bucket by bucket; null for a batch without one",
    )
    overwrite: OverwritePublic | None = Field(
        default=None, description="a mode('overwrite') write's swap; null for an append"
    )

    @model_validator(mode="before")
    @classmethod
    def _count_key_buckets(cls, data: Any) -> Any:
        """The stored tally (``key_buckets``) is shown as its bucket count."""
        if isinstance(data, dict) and data.get("key_buckets") is not None:
            data = {**data, "key_bucket_count": len(data["key_buckets"])}
        return data


class BatchReceiptsPublic(BaseModel):
    """Every record of one batch of a run: one per table, query and write, each with the
    receipt its first commit reported."""

    run_id: str
    batch: int | Literal["write"] = Field(
        description="the micro-batch number, or 'write' for a batch write (batch_id null)"
    )
    receipts: list[BatchPublic] = Field(description="ordered by table, query_id, write")


class StreamPublic(BaseModel):
    """One write stream the run used."""

    name: str
    stream_type: StreamType
    table: str
    query_id: str
    batch_id: int | None
    write: str | None = Field(description="as the batch's write; null for the streaming sink")
    partition: int
    task_attempt: int
    state: Literal["created", "appending", "finalized", "committed", "orphaned"]
    next_offset: int | None
    appends: int
    rows: int
    bytes: int
    already_exists: int
    out_of_range: int
    errors: int
    row_count: int | None
    last_error: str | None
    last_error_at: AwareDatetime | None
    created_at: AwareDatetime
    updated_at: AwareDatetime


CauseKind = Literal[
    "driver_died", "task_failed", "refused", "commit_refused", "bad_option", "error"
]
BatchStage = Literal["writing", "intent", "committed", "skipped_duplicate", "aborted"]


class RunCausePublic(BaseModel):
    """Why a failed run stopped, told from its error and what it reported last."""

    kind: CauseKind = Field(
        description="driver_died: the Spark driver's JVM exited (killed, out of memory, "
        "preempted) and its Python side saw the connection go; task_failed: a Spark task "
        "failed every attempt Spark allows; refused: another driver still runs this query "
        "or run id, this one wrote nothing; commit_refused: BigQuery refused a batch's "
        "commit; bad_option: a write option or setting is wrong; error: anything else"
    )
    headline: str = Field(description="one line: the kind, and the batch it stopped at")
    batch: str | None = Field(
        description="the batch the run last reported: its number, or 'write' for a batch "
        "write; null: none"
    )
    batch_stage: BatchStage | None = Field(
        description="how far that batch got: writing (streams written, no commit "
        "reported), intent (its commit intended, not confirmed), committed, "
        "skipped_duplicate, aborted"
    )
    error: str | None = Field(description="the error exactly as the job reported it")


class RunDetailPublic(RunPublic):
    """``GET /api/runs/{run_id}``: the run with its attempts, batches and streams."""

    spec: dict[str, Any] | None = Field(description="the pinned spec (secrets redacted)")
    spec_state: RunSpecPublic
    resume_unavailable: str | None = Field(
        description="why this control plane cannot launch the run again (no launch spec: "
        "a user's own script; a module it does not launch); null: it can, once the run has "
        "failed or stalled"
    )
    current_attempt_id: str | None
    attempts: list[AttemptPublic] = Field(description="oldest first")
    batches: list[BatchPublic] = Field(description="commit history, by query and batch id")
    tables: list[str] = Field(
        description="the tables the run wrote, its own first (each can be reconciled)"
    )
    streams: list[StreamPublic]
    write_requests: dict[str, int] = Field(description="append requests by response code")
    rejections: list[RejectionPublic] = Field(
        description="the latest rows BigQuery refused, at most 20, newest first, each row once"
    )
    cause: RunCausePublic | None = Field(
        description="a failed run's cause, classified; null unless the run failed"
    )
    redrives: RunRedrivesPublic = Field(
        description="its set-aside rows re-driven (landed) and still set aside, from its "
        "re-drive runs' events (<run>:redrive-<n>), and the control plane's launches"
    )
