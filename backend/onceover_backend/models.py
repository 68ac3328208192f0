"""API models of the control plane (request and response bodies)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from onceover.events import Mode, StreamType
from onceover.identifiers import COLUMN_NAME_RE

HealthStatus = Literal["ok", "error"]


# -- query and path parameters ------------------------------------------------------
# Each of these values reached the database and was a 500 there (found by
# tests/backend/test_schemathesis.py); validators narrow what is accepted to a 422
# without changing the OpenAPI schema.


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (0x00), which PostgreSQL text cannot hold")
    return value


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 and the like
        raise ValueError("out of range once converted to UTC") from None


Text = Annotated[str, AfterValidator(_no_nul)]
"""A string parameter compared with stored text."""
UTCTime = Annotated[AwareDatetime, AfterValidator(_in_utc)]
"""A time parameter: with a zone (stored times are UTC; a naive one is ambiguous), in UTC."""


class ErrorPublic(BaseModel):
    """An error answer: a message, or FastAPI's list of ``{loc, msg, type}``."""

    detail: Any


class DependencyHealth(BaseModel):
    """Whether one dependency answered, how fast, and what it is."""

    status: HealthStatus
    target: str = Field(description="What was checked (database URL without password, endpoint)")
    latency_ms: float = Field(description="Time the check took")
    error: str | None = Field(default=None, description="Why the check failed, when it did")
    age_s: float = Field(
        default=0.0,
        description="Seconds since the check ended: answers are shared for ONCEOVER_HEALTH_CACHE_S",
    )


class HealthPublic(BaseModel):
    """``GET /api/health``: ``status`` is ``ok`` only when every dependency is ``ok``."""

    status: Literal["ok", "degraded"]
    version: str
    database: DependencyHealth
    bigquery: DependencyHealth
    unauthenticated_requests: int = Field(
        default=0,
        description="Calls with a body this process refused for want of a valid token since "
        "it started (not audited: anyone can make them)",
    )


# -- events -------------------------------------------------------------------------


class IngestResultPublic(BaseModel):
    """``POST /api/events``: how many events were new and how many were already stored."""

    received: int
    stored: int
    duplicates: int = Field(description="events whose id was already stored (or repeated)")
    run_ids: list[str] = Field(description="runs the new events belong to")


# -- runs ---------------------------------------------------------------------------

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


# -- metrics ------------------------------------------------------------------------


class WriteErrorsStep(BaseModel):
    start: AwareDatetime
    requests: int
    rows_ok: int = Field(0, description="rows appended with OK in this step")
    counts: dict[str, int] = Field(description="requests by response code (OK, ALREADY_EXISTS ...)")


class WriteErrorsPublic(BaseModel):
    """Append requests by response code, per step, with totals and rates."""

    run_id: str | None
    table: str | None
    since: AwareDatetime
    until: AwareDatetime
    step_s: int
    series: list[WriteErrorsStep]
    totals: dict[str, int] = Field(description="requests by response code over the range")
    requests: int
    rows: dict[str, int] = Field(description="rows by response code over the range")
    rates: dict[str, float] = Field(description="share of requests per code, 0..1")


# -- tables and the signed-in principal -------------------------------------------


class TablePublic(BaseModel):
    """A BigQuery table as the control plane knows it: totals over every run into it."""

    table: str = Field(description="project.dataset.table")
    runs: int
    runs_by_status: dict[str, int]
    rows_committed: int = Field(description="rows of committed batches over every run")
    batches_committed: int
    already_exists: int = Field(
        description="append requests answered ALREADY_EXISTS over every run, as each run counts "
        "them (kept with the run, past the rollups' retention)"
    )
    out_of_range: int = Field(
        description="append requests answered OUT_OF_RANGE over every run, as each run counts them"
    )
    rows_dead_lettered: int = Field(
        description="rows committed batches set aside in dead-letter tables, over every run"
    )
    rejected_requests: int = Field(description="rows_rejected events over every run")
    first_started_at: AwareDatetime
    last_started_at: AwareDatetime
    key_column: str | None = Field(description="the key column of the latest run naming one")
    reconciliation: VerdictPublic | None = Field(description="the table's latest check, if any")


class TablesPublic(BaseModel):
    data: list[TablePublic] = Field(description="most recently loaded first")
    count: int


# -- the overview -------------------------------------------------------------------

Freshness = Literal["fresh", "stale"]


class AttentionRunPublic(BaseModel):
    """A run someone has to look at: it failed, or the stall sweep found it silent."""

    run_id: str
    job: str | None
    table: str
    status: Literal["failed", "stalled"]
    since: AwareDatetime = Field(
        description="failed: when it ended; stalled: when it was last heard from"
    )
    reason: str = Field(description="the error's first line, or how long it has been silent")
    link: str = Field(description="the dashboard path of the run")


class FiringAlertPublic(BaseModel):
    """An alert firing now, with the rule that made it."""

    id: int
    rule_id: int
    rule: str = Field(description="the rule's name")
    severity: str = Field(description="critical, warning or info")
    run_id: str | None
    table: str | None
    summary: str
    since: AwareDatetime | None = Field(description="firing since")
    link: str = Field(description="the alerts page, showing this rule's firing alerts")
    subject_link: str = Field(description="the dashboard path of what it watches")


class OverviewHourPublic(BaseModel):
    """Append requests of one hour (UTC), for a sparkline."""

    start: AwareDatetime
    requests: int = Field(description="append requests of any response code")
    already_exists: int
    out_of_range: int


class OverviewVerdictPublic(VerdictPublic):
    """The newest reconciliation, of a run or of a whole table."""

    scope: Literal["run", "table"]
    run_id: str | None
    table: str
    link: str = Field(description="the run's page (run checks) or the table's page")


class OverviewTablePublic(BaseModel):
    """One table at a glance."""

    table: str = Field(description="project.dataset.table")
    last_commit_at: AwareDatetime | None = Field(
        description="the newest batch commit into it; null: nothing committed yet"
    )
    freshness: Freshness = Field(
        description="stale: the last commit is older than stale_after_s, or there is none"
    )
    rows_committed_today: int = Field(description="rows of batches committed since 00:00 UTC")
    requests: int = Field(description="append requests in the 24 hourly buckets")
    already_exists: int = Field(description="of which ALREADY_EXISTS (deduplication at work)")
    out_of_range: int = Field(description="of which OUT_OF_RANGE (a gap in the offsets)")
    hours: list[OverviewHourPublic] = Field(description="24 hours, oldest first")
    rows_dead_lettered: int = Field(
        description="rows batches committed in the 24 hours set aside in a dead-letter table"
    )
    reconciliation: OverviewVerdictPublic | None = Field(
        description="the newest check touching the table (of a run into it, or of it whole)"
    )
    link: str = Field(description="the dashboard path of the table")


class OverviewTotalsPublic(BaseModel):
    """The same figures over every table."""

    rows_committed_today: int
    requests: int
    already_exists: int
    out_of_range: int
    hours: list[OverviewHourPublic]
    rows_dead_lettered: int


class OverviewPublic(BaseModel):
    """``GET /api/overview``: what needs attention now, and every table at a glance."""

    generated_at: AwareDatetime
    today_since: AwareDatetime = Field(description="00:00 UTC today: 'today' is the UTC day")
    window_since: AwareDatetime = Field(
        description="the start of the first of 24 hourly buckets (the last holds now)"
    )
    stale_after_s: float = Field(
        description="a table is stale when its last commit is older than this: the "
        "ONCEOVER_STALE_AFTER_S setting (no alert rule kind watches freshness)"
    )
    runs: list[AttentionRunPublic] = Field(description="failed and stalled runs, newest first")
    runs_count: int = Field(description="every failed or stalled run, beyond those listed")
    alerts: list[FiringAlertPublic] = Field(description="firing alerts, newest first")
    alerts_count: int
    tables: list[OverviewTablePublic] = Field(
        description="stale tables first, then the most recently committed"
    )
    tables_count: int
    totals: OverviewTotalsPublic
    reconciliation: OverviewVerdictPublic | None = Field(
        description="the newest reconciliation of all"
    )


class PrincipalPublic(BaseModel):
    """``GET /api/session``: who the token is and what it may do."""

    name: str
    role: str
    may: list[str] = Field(description="the roles this token's role includes")


# -- audit --------------------------------------------------------------------------


class AuditEntryPublic(BaseModel):
    id: int
    time: AwareDatetime
    actor: str
    role: str | None
    action: str
    method: str
    path: str
    target: str | None
    request_id: str
    status_code: int
    outcome: str


class AuditLogPublic(BaseModel):
    data: list[AuditEntryPublic]
    count: int


# -- reconciliation -----------------------------------------------------------------

ReconciliationStatus = Literal["ok", "mismatch", "error"]


class DuplicateKeyPublic(BaseModel):
    """A key found more than once in the table."""

    key: str = Field(description="the key as text (INT64 keys past 2**53 keep every digit)")
    count: int = Field(description="rows holding it in the whole table")
    batch_id: int | None = Field(
        default=None, description="the run's batch holding it (stamped runs)"
    )
    run_id: str | None = Field(
        default=None, description="the stamped run holding it (table checks)"
    )


class ReceiptKeyPublic(BaseModel):
    """A key a receipt check found duplicated, missing or unexpected in one batch."""

    key: str | None = Field(
        description="the key as text; null for a STRING key known only by its hash"
    )
    key_hash: str = Field(
        description="the first 10 hex digits of MD5(CAST(key AS STRING)): its checksum term "
        "and its bucket (SUBSTR(TO_HEX(MD5(CAST(key AS STRING))), 1, 10) finds it)"
    )
    copies: int = Field(
        description="rows holding it: duplicated, in the whole table; missing, 0; "
        "unexpected, in the batch"
    )


class UnresolvedBucketPublic(BaseModel):
    """A key-hash bucket of a batch whose difference no single key explains: two keys
    missing, a key missing and another unexpected, or rows with a NULL key."""

    bucket: int | None = Field(description="the bucket; null: the rows whose key is NULL")
    expected_rows: int = Field(description="rows of the bucket in the batch's receipt")
    actual_rows: int = Field(description="rows found, extra copies of duplicated keys left out")


class BatchReconciliationPublic(BaseModel):
    """One batch of a stamped run: what the control plane recorded against BigQuery."""

    batch_id: int | None = Field(description="None for a batch write")
    status: Literal["ok", "mismatch"]
    expected_rows: int = Field(description="rows of the batch's commit (0: never committed)")
    actual_rows: int = Field(description="rows stamped with this run and batch")
    distinct_keys: int | None
    duplicate_keys: int = Field(description="keys of the batch found more than once")
    duplicate_rows: int
    expected_checksum: int | None = Field(
        default=None, description="checked by receipt: the key checksum of its receipt"
    )
    actual_checksum: int | None = Field(
        default=None, description="checked by receipt: the same sum over the rows found"
    )
    keys_duplicated: list[ReceiptKeyPublic] = Field(
        default=[], description="checked by receipt: its keys held more than once"
    )
    keys_missing: list[ReceiptKeyPublic] = Field(
        default=[],
        description="checked by receipt: keys of its receipt absent from the table, INT64 "
        "keys by value, STRING keys by hash",
    )
    keys_unexpected: list[ReceiptKeyPublic] = Field(
        default=[], description="checked by receipt: keys stamped with it its receipt lacks"
    )
    unresolved_buckets: list[UnresolvedBucketPublic] = Field(
        default=[], description="checked by receipt: differences no single key explains"
    )


class RunReconciliationPublic(BaseModel):
    """One run's rows within a table check (stamped runs; ``run_id`` None: unstamped rows)."""

    run_id: str | None
    status: Literal["ok", "mismatch"]
    expected_rows: int
    actual_rows: int
    distinct_keys: int | None
    duplicate_keys: int
    duplicate_rows: int


class ReconciliationPublic(BaseModel):
    """Expected rows (committed batches the control plane recorded) against BigQuery.

    ``ok`` means every count agrees: rows = distinct keys = expected, no key twice in
    the table, every batch (or run) agreeing. ``mismatch`` names what differs; ``error``
    means BigQuery could not answer (``error`` says why) and nothing was compared.
    """

    id: int
    scope: Literal["run", "table"]
    run_id: str | None
    table: str
    key: str | None = Field(description="the key column compared; None: rows counted only")
    stamped: bool = Field(description="the run's rows were counted in place by their stamps")
    status: ReconciliationStatus
    expected_rows: int | None
    actual_rows: int | None
    distinct_keys: int | None
    rows_without_key: int | None = Field(description="rows whose key is NULL")
    duplicate_key_count: int | None = Field(description="keys found more than once")
    duplicate_rows: int | None = Field(description="copies of those keys beyond the first")
    duplicate_keys: list[DuplicateKeyPublic] = Field(
        description="up to 20 duplicated keys, most copies first"
    )
    missing_rows: int | None = Field(description="expected rows whose key is absent")
    extra_rows: int | None = Field(description="rows beyond the expected: copies and unknown keys")
    rows_set_aside: int | None = Field(
        None,
        description="rows the committed batches set aside in a dead-letter table: expected, "
        "never missing (not in expected_rows)",
    )
    dead_letter_table: str | None = Field(
        None, description="the dead-letter table the batches named, if any"
    )
    rows_in_dead_letter_table: int | None = Field(
        None,
        description="the run's (or table's runs') rows found in the dead-letter table "
        "(run_id = the run); a count other than the rows set aside there is a mismatch",
    )
    batches: list[BatchReconciliationPublic] = Field(description="per batch (stamped runs)")
    runs: list[RunReconciliationPublic] = Field(description="per run (table checks)")
    mismatched_batches: list[int | None] = Field(description="batch ids that differ")
    method: Literal["receipts", "counts"] | None = Field(
        default=None,
        description="receipts: each batch's rows and key checksum against its receipt, a "
        "differing batch's keys found by key-hash bucket (stamped runs whose batches carry "
        "a key tally); counts: rows, distinct keys and duplicates counted; null before 0009",
    )
    queries: int | None = Field(
        default=None, description="BigQuery queries the check ran (null before 0009)"
    )
    warnings: list[str]
    error: str | None
    trigger: Literal["api", "run_succeeded"]
    actor: str
    checked_at: AwareDatetime
    duration_ms: float


class ReconciliationsPublic(BaseModel):
    data: list[ReconciliationPublic]
    count: int


class TableReconcileRequest(BaseModel):
    """``POST /api/tables/{table}/reconcile``: the key column, if not the runs' own."""

    key: Annotated[str, Field(pattern=COLUMN_NAME_RE.pattern)] | None = Field(
        default=None,
        description="column identifying a row; default: the key of the table's latest run",
    )


# -- changes ------------------------------------------------------------------------


class RunChangePublic(BaseModel):
    run_id: str
    status: RunStatus
    rows_committed: int
    updated_at: AwareDatetime


class RunChangesPublic(BaseModel):
    """The data of a ``runs`` event on ``/api/changes``."""

    runs: list[RunChangePublic]


# -- resume -------------------------------------------------------------------------


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


class RunIntentsPublic(BaseModel):
    """The batches a run's checkpoint holds as intended but not confirmed, each with what
    BigQuery says of it: the run page shows a batch committed in BigQuery but not in the
    checkpoint, with BigQuery's commit time as the proof, before anyone resumes."""

    run_id: str
    pending_intents: list[PendingIntentPublic]
    unavailable: str | None = Field(
        description="why the checkpoint could not be read (no launch spec naming it, or "
        "the path is not readable here); pending_intents is then empty"
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


# -- alerts -------------------------------------------------------------------------

AlertKind = Literal[
    "out_of_range",
    "already_exists_rate",
    "error_rate",
    "reconciliation",
    "run_failed",
    "run_stalled",
    "orphan_streams",
    "rows_dead_lettered",
]
Severity = Literal["critical", "warning", "info"]
AlertScope = Literal["all", "job", "table"]
AlertState = Literal["pending", "firing", "resolved", "inactive"]
NotificationStatus = Literal["firing", "resolved"]


class AlertRuleParams(BaseModel):
    """What a kind needs; a parameter the rule's kind does not use is refused (422)."""

    model_config = {"extra": "forbid"}

    window_s: int | None = Field(
        default=None,
        ge=60,
        le=7 * 86400,
        description="rate kinds (out_of_range, already_exists_rate, error_rate) and "
        "rows_dead_lettered: the window looked at, in seconds, rounded to whole minutes "
        "(default 300)",
    )
    threshold: float | None = Field(
        default=None,
        ge=0,
        description="already_exists_rate and error_rate (required): fires above it; "
        "out_of_range, rows_dead_lettered: fires above it (default 0, any)",
    )
    per: Literal["minute", "share"] | None = Field(
        default=None,
        description="already_exists_rate and error_rate: threshold as requests per minute "
        "over the window, or as a share (0..1) of all requests (default minute)",
    )
    codes: list[Annotated[str, Field(pattern=r"^[A-Z_]+$", max_length=40)]] | None = Field(
        default=None,
        description="error_rate: the response codes counted (default: every code but OK, "
        "ALREADY_EXISTS and OUT_OF_RANGE)",
    )
    older_than_s: float | None = Field(
        default=None,
        gt=0,
        description="orphan_streams: uncommitted this long (default 3600)",
    )
    include_succeeded: bool | None = Field(
        default=None,
        description="orphan_streams: count streams of succeeded runs too (default false: "
        "those are failed task attempts' streams, whose rows were written again)",
    )
    duplicates_only: bool | None = Field(
        default=None,
        description="reconciliation: fire only when duplicate keys are found (default: "
        "any mismatch)",
    )
    silent_s: float | None = Field(
        default=None,
        gt=0,
        description="run_stalled: also fire for a running run silent this long (default: "
        "the stall sweep's verdict only)",
    )


class AlertRuleCreate(BaseModel):
    """An alert rule (``POST`` creates, ``PUT`` replaces)."""

    name: Annotated[Text, Field(min_length=1, max_length=200)]
    kind: AlertKind
    scope: AlertScope = Field(default="all", description="what it watches: all runs, or ...")
    scope_value: Annotated[Text, Field(min_length=1, max_length=1100)] | None = Field(
        default=None, description="the job name or project.dataset.table (scope job or table)"
    )
    severity: Severity = "warning"
    params: AlertRuleParams = Field(default_factory=AlertRuleParams)
    for_s: float = Field(
        default=0, ge=0, le=7 * 86400, description="the condition holds this long before it fires"
    )
    repeat_interval_s: float = Field(
        default=4 * 3600,
        ge=0,
        le=30 * 86400,
        description="notify again while firing, this often; 0: never",
    )
    enabled: bool = True
    description: Annotated[Text, Field(max_length=4000)] | None = None


class AlertRulePublic(AlertRuleCreate):
    id: int
    created_at: AwareDatetime
    updated_at: AwareDatetime


class AlertRulesPublic(BaseModel):
    data: list[AlertRulePublic]
    count: int


class AlertTransitionPublic(BaseModel):
    """A notification-worthy change of an alert."""

    id: int
    alert_id: int
    number: int
    status: NotificationStatus
    repeat: bool = Field(description="a firing alert notified again (repeat interval)")
    at: AwareDatetime
    value: float | None
    summary: str
    fingerprint: str
    labels: dict[str, str]


class AlertPublic(BaseModel):
    """What one rule says about one run (or table) now."""

    id: int
    rule_id: int
    fingerprint: str = Field(description="stable for the rule and what it watches")
    labels: dict[str, str]
    run_id: str | None
    table: str | None
    state: AlertState
    value: float | None
    summary: str
    pending_since: AwareDatetime | None
    started_at: AwareDatetime | None = Field(description="firing since")
    ended_at: AwareDatetime | None = Field(description="resolved at")
    last_notified_at: AwareDatetime | None
    evaluated_at: AwareDatetime
    generator_url: str = Field(description="the dashboard page of what it watches")


class AlertsPublic(BaseModel):
    data: list[AlertPublic]
    count: int


class AlertDetailPublic(AlertPublic):
    history: list[AlertTransitionPublic] = Field(description="newest first")


class AlertHistoryPublic(BaseModel):
    data: list[AlertTransitionPublic]
    count: int


# -- webhooks -----------------------------------------------------------------------

WebhookFormat = Literal["standard", "slack"]
DeliveryStatus = Literal["pending", "sending", "succeeded", "failed"]


class WebhookCreate(BaseModel):
    """A webhook endpoint. Its secret is generated (``whsec_...``) and shown once."""

    name: Annotated[Text, Field(min_length=1, max_length=200)]
    url: Annotated[Text, Field(min_length=1, max_length=2000)] = Field(
        description="http or https; link-local and cloud metadata addresses are refused"
    )
    format: WebhookFormat = Field(
        default="standard",
        description="standard: Alertmanager's body, signed (Standard Webhooks); slack: an "
        "incoming-webhook {text}, signed the same way",
    )
    enabled: bool = True
    rule_ids: list[int] = Field(default=[], description="rules delivered; empty: all")
    severities: list[Severity] = Field(default=[], description="severities delivered; empty: all")
    send_resolved: bool = Field(default=True, description="deliver resolved notifications too")


class WebhookUpdate(BaseModel):
    """``PATCH``: the fields given change. ``enabled: true`` re-enables an endpoint a 410
    disabled."""

    name: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    url: Annotated[Text, Field(min_length=1, max_length=2000)] | None = None
    format: WebhookFormat | None = None
    enabled: bool | None = None
    rule_ids: list[int] | None = None
    severities: list[Severity] | None = None
    send_resolved: bool | None = None


class WebhookPublic(BaseModel):
    id: int
    name: str
    url: str = Field(
        description="scheme, host and port; the path and query masked (https://host/…): "
        "the whole URL is in the answer that creates the endpoint only"
    )
    format: WebhookFormat
    enabled: bool
    disabled_reason: str | None = Field(description="why it was disabled (a 410 answer)")
    rule_ids: list[int]
    severities: list[Severity]
    send_resolved: bool
    secret_hint: str = Field(description="the secret's first characters, to tell it apart")
    created_at: AwareDatetime
    updated_at: AwareDatetime


class WebhookCreatedPublic(WebhookPublic):
    """The endpoint with its signing secret: shown this once, keep it."""

    url: str = Field(
        description="whole in the answer that creates the endpoint; masked, as reads show "
        "it, in the one that rotates its secret"
    )
    secret: str


class WebhooksPublic(BaseModel):
    data: list[WebhookPublic]
    count: int


class DeliveryAttemptPublic(BaseModel):
    number: int
    started_at: AwareDatetime
    status_code: int | None = Field(description="None: no answer (see error)")
    latency_ms: float
    error: str | None = Field(
        description="why the try failed: `kind: detail` for an operator; a viewer sees the "
        "kind only (refused, timed out, ConnectError, redirected, HTTP 500)"
    )
    retry_after_s: float | None = Field(description="the receiver's Retry-After, in seconds")
    response: str | None = Field(
        description="the answer's first 1,000 characters; for an operator only (null for a viewer)"
    )


class DeliveryPublic(BaseModel):
    """One message to the endpoint and every try at sending it."""

    id: int
    endpoint_id: int
    message_id: str = Field(description="its webhook-id (the same on every try)")
    kind: Literal["alert", "test", "redelivery"]
    event_status: NotificationStatus
    transition_id: int | None
    redelivery_of: int | None
    status: DeliveryStatus
    attempts: list[DeliveryAttemptPublic]
    next_attempt_at: AwareDatetime | None
    created_at: AwareDatetime
    finished_at: AwareDatetime | None
    last_status_code: int | None
    last_error: str | None = Field(description="the last try's error, shown as `error` is")
    body: str = Field(description="exactly what is sent")


class DeliveriesPublic(BaseModel):
    data: list[DeliveryPublic]
    count: int
