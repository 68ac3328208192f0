"""The control plane's tables (SQLModel): what it knows about runs, from their events.

``Event`` keeps every event as received (unique by its deterministic id); ``Run``,
``Attempt``, ``Batch`` and ``Stream`` are the state those events add up to, kept up to
date in the same transaction that stores them (:mod:`onceover_backend.services.ingest`);
``WriteRollup`` counts append requests per minute for the rate charts, ``HourRollup``
per hour for the overview, ``CommitHour`` the batches first committed in each hour;
``Reconciliation`` keeps every check of expected against actual rows; ``Launch`` every
job process the control plane started to resume a run, ``RedriveLaunch`` every re-drive
of a run's set-aside rows. ``AlertRule``, ``Alert`` and
``AlertTransition`` are the alerting rules, the state of each thing a rule watches and
its history; ``WebhookEndpoint``, ``WebhookDelivery`` and ``DeliveryAttempt`` where
alerts are sent and every try at sending them. ``AuditLog``
records every mutating call and ``ApiToken`` the tokens created with
``onceover token create`` (hashes only).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from onceover_backend.core.types import BigIntegerPK, UTCDateTime

_NAME = 200
_TABLE = 1100


def utcnow() -> datetime:
    return datetime.now(UTC)


def _count(description: str | None = None) -> Any:
    """A counter of rows, bytes or offsets: 64-bit, since billing tables outgrow 2**31."""
    return Field(default=0, sa_type=BigInteger, description=description)


def _maybe_count(description: str | None = None) -> Any:
    return Field(default=None, sa_type=BigInteger, description=description)


def _when(*, index: bool = False, nullable: bool = True) -> Any:
    return Field(default=None, sa_type=UTCDateTime, index=index, nullable=nullable)


class Run(SQLModel, table=True):
    """One logical load: the same run id across every launch (attempt) of a job."""

    # The runs list filters by one of these and answers newest first: with the start
    # time beside each, a page is read in order from the index, where an index of the
    # filter alone had every matching run read and sorted (docs/journal/profiling.md, "The runs
    # list, filtered"). Each still serves its column alone.
    __table_args__ = (
        Index("ix_run_status_started_at", "status", "started_at"),
        Index("ix_run_table_id_started_at", "table_id", "started_at"),
        Index("ix_run_job_started_at", "job", "started_at"),
    )

    run_id: str = Field(primary_key=True, max_length=_NAME)
    job: str | None = Field(default=None, max_length=_NAME)
    table_id: str = Field(max_length=_TABLE)
    mode: str | None = Field(default=None, max_length=20)
    spec: dict[str, Any] | None = Field(
        default=None, sa_type=JSON, description="the first spec the run reported (pinned)"
    )
    spec_approved_digest: str | None = Field(default=None, max_length=64)
    spec_approved_by: str | None = Field(default=None, max_length=_NAME)
    spec_approved_at: datetime | None = _when()
    spec_proposed: dict[str, Any] | None = Field(
        default=None, sa_type=JSON, description="a later, different spec, until decided"
    )
    spec_proposed_at: datetime | None = _when()
    spec_proposed_by: str | None = Field(
        default=None, max_length=_NAME, description="the attempt that reported it"
    )
    status: str = Field(max_length=20)
    current_attempt_id: str | None = Field(default=None, max_length=_NAME)
    started_at: datetime = Field(sa_type=UTCDateTime, index=True)
    finished_at: datetime | None = _when()
    last_event_at: datetime | None = _when()
    last_heartbeat_at: datetime | None = _when()
    rows_expected: int = _count()
    rows_committed: int = _count()
    batches_committed: int = 0
    rows_reported: int | None = _maybe_count("rows the job's own ledger counts as committed")
    key_column: str | None = Field(
        default=None, max_length=300, description="the column identifying a row, if named"
    )
    rows_dead_lettered: int = _count(
        "rows committed batches set aside in a dead-letter table, each batch once"
    )
    dead_letter_table: str | None = Field(
        default=None, max_length=_TABLE, description="the dead-letter table last named"
    )
    rejected_requests: int = Field(
        default=0, description="rows_rejected events: requests BigQuery refused for bad rows"
    )
    # Kept on the run, as the rollups add up, rather than summed from them when read:
    # the lists then read no rollup (summing a table's over its history grew with it),
    # and a run's counts outlive its rollups' retention, as its other totals do.
    already_exists_requests: int = _count("append requests answered ALREADY_EXISTS")
    out_of_range_requests: int = _count("append requests answered OUT_OF_RANGE")
    throttled_requests: int = _count(
        "append requests BigQuery's throughput quota refused (RESOURCE_EXHAUSTED)"
    )
    throttled_at: datetime | None = _when()
    arrow_refused_at: datetime | None = _when()
    arrow_refused: str | None = Field(
        default=None, max_length=4000,
        description="BigQuery's refusal of the run's Arrow rows (its rows then went as proto)",
    )  # fmt: skip
    rejections: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_type=JSON,
        description="the latest rows BigQuery refused (at most 20, newest first)",
    )
    error: str | None = Field(default=None, sa_type=Text)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)


class Attempt(SQLModel, table=True):
    """One launch of a run (a ``run_started`` event and what followed it), or a resume
    the control plane launched (``resuming`` until its job reports)."""

    __table_args__ = (
        UniqueConstraint("run_id", "attempt_id"),
        UniqueConstraint("run_id", "number", name="uq_attempt_run_id_number"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.run_id", max_length=_NAME, index=True)
    attempt_id: str = Field(max_length=_NAME)
    number: int = Field(description="1, 2, ... in the order the run's attempts became known")
    status: str = Field(max_length=20)
    started: bool = Field(default=False, description="its run_started event has arrived")
    started_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = _when()
    last_heartbeat_at: datetime | None = _when()
    last_event_at: datetime | None = _when()
    spec: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    rows_reported: int | None = _maybe_count()
    error: str | None = Field(default=None, sa_type=Text)


class Launch(SQLModel, table=True):
    """A job process the control plane started to resume a run: the attempt it runs,
    who asked, the plan and command, and how it ended.

    ``live`` is true from the launch until the process is seen to exit. At most one
    live launch per run, enforced by a partial unique index, so two backend replicas
    answering two resume calls at once cannot both start a job on one checkpoint.
    """

    __table_args__ = (
        Index(
            "uq_launch_live_run",
            "run_id",
            unique=True,
            sqlite_where=text("live"),
            postgresql_where=text("live"),
        ),
        UniqueConstraint("run_id", "attempt_number"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.run_id", max_length=_NAME, index=True)
    attempt_id: str = Field(max_length=_NAME)
    attempt_number: int
    idempotency_key: str | None = Field(default=None, max_length=_NAME, unique=True)
    live: bool = True
    trigger: str = Field(max_length=20, description="api, or auto (the job's auto-resume)")
    actor: str = Field(max_length=_NAME)
    approved_by: str | None = Field(
        default=None, max_length=_NAME, description="whose approval of the spec it rests on"
    )
    spec_digest: str | None = Field(default=None, max_length=64)
    requested_at: datetime = Field(sa_type=UTCDateTime)
    command: list[str] = Field(
        default_factory=list, sa_type=JSON, description="as shown: secrets redacted"
    )
    cwd: str | None = Field(default=None, sa_type=Text)
    log_path: str = Field(sa_type=Text)
    host: str = Field(max_length=_NAME, description="the backend host that started it")
    pid: int | None = None
    exit_code: int | None = None
    ended_at: datetime | None = _when()
    plan: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    answer: dict[str, Any] = Field(
        default_factory=dict, sa_type=JSON, description="the 202 body, replayed for its key"
    )


class RedriveLaunch(SQLModel, table=True):
    """A re-drive job the control plane started for a run's set-aside rows: who asked,
    the command, its log, and how it ended.

    The re-drive's own identity (``<run>:redrive-<n>``) is chosen by the job from the
    run's ledger, and its events arrive as that run's; this row is what the control plane
    knows before (and if) they do. At most one live re-drive launch per run, by a partial
    unique index, so two replicas answering two calls at once cannot both start one.
    """

    __table_args__ = (
        Index(
            "uq_redrivelaunch_live_run",
            "run_id",
            unique=True,
            sqlite_where=text("live"),
            postgresql_where=text("live"),
        ),
        UniqueConstraint("run_id", "number"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.run_id", max_length=_NAME, index=True)
    number: int = Field(description="1, 2, ... per run: the launch's, not the re-drive's")
    live: bool = True
    actor: str = Field(max_length=_NAME)
    requested_at: datetime = Field(sa_type=UTCDateTime)
    plan_digest: str = Field(max_length=64, description="the plan the operator confirmed")
    dead_letter_table: str = Field(max_length=_TABLE)
    ledger: str = Field(sa_type=Text)
    command: list[str] = Field(
        default_factory=list, sa_type=JSON, description="as shown: secrets redacted"
    )
    log_path: str = Field(sa_type=Text)
    host: str = Field(max_length=_NAME, description="the backend host that started it")
    pid: int | None = None
    exit_code: int | None = None
    ended_at: datetime | None = _when()


class Batch(SQLModel, table=True):
    """One micro-batch (or batch write) of a run into one table."""

    __table_args__ = (UniqueConstraint("run_id", "table_id", "query_id", "batch_key"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.run_id", max_length=_NAME, index=True)
    table_id: str = Field(max_length=_TABLE)
    query_id: str = Field(max_length=_NAME)
    batch_id: int | None = None
    batch_key: str = Field(
        max_length=180,
        description="batch_id ('-' for a batch write), then '/' and the write if one is named",
    )
    write: str | None = Field(
        default=None, max_length=140, description="which of the call's writes to the table"
    )
    key_column: str | None = Field(
        default=None, max_length=300, description="the key the write named, if any"
    )
    mode: str = Field(max_length=20)
    state: str = Field(max_length=20)
    expected_rows: int | None = _maybe_count()
    rows: int | None = _maybe_count()
    streams: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    resolved: bool = Field(default=False, description="found committed on replay")
    stamped: bool = Field(default=False, description="its rows carry the run and batch ids")
    replays: int = Field(default=0, description="replays skipped as duplicates")
    rows_rewritten: int = _count("rows replays wrote on orphaned streams")
    dead_lettered_rows: int = _count("rows set aside in the dead-letter table, counted once")
    dead_letter_table: str | None = Field(default=None, max_length=_TABLE)
    dead_letter_streams: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    upserts: int | None = _maybe_count("CDC writes: the batch's UPSERT rows")
    deletes: int | None = _maybe_count("CDC writes: the batch's DELETE rows")
    abort_reason: str | None = Field(default=None, sa_type=Text)
    commit_ms: float | None = None
    intent_at: datetime | None = _when()
    committed_at: datetime | None = _when()
    aborted_at: datetime | None = _when()
    skipped_at: datetime | None = _when()
    # The receipt, as the first commit reported it (a later report only fills a gap).
    commit_time: datetime | None = _when()
    source_offsets: list[str] | None = Field(
        default=None, sa_type=JSON, description="streaming: one offset per source (JSON text)"
    )
    key_checksum: int | None = _maybe_count("onceover.key_checksum of the batch's keys")
    key_buckets: list[list[Any]] | None = Field(
        default=None,
        sa_type=JSON,
        description="the key tally: [bucket, rows, checksum, key sum text] per non-empty bucket",
    )
    # A mode("overwrite") write's swap, as its latest event says (overwrite_swap_started,
    # overwrite_swapped); null for any other write, and for one whose swap nobody heard of.
    swap_state: str | None = Field(default=None, max_length=20, description="started or swapped")
    swap_job_id: str | None = Field(default=None, max_length=1024)
    swap_attempt: int | None = None
    swap_staging: str | None = Field(default=None, max_length=_TABLE)
    swap_scope: str | None = Field(default=None, max_length=300)
    swap_staged_rows: int | None = _maybe_count("rows the swap inserts: every row staged")
    swap_rows_replaced: int | None = _maybe_count("the table's rows in the scope before it")
    swap_partitions: list[str] | None = Field(
        default=None, sa_type=JSON, description="partition ids replaced (the first 100)"
    )
    swap_partition_count: int | None = None
    swap_started_at: datetime | None = _when()
    swapped_at: datetime | None = _when()


class StreamCounters(SQLModel):
    """What a stream's append answers add up to, as the ``stream`` table's columns
    (:class:`Stream`). The one list of them: ingest's fast path adds them up by these
    names (:data:`STREAM_COUNTERS`)."""

    appends: int = 0
    rows: int = _count()
    bytes: int = _count()
    already_exists: int = 0
    out_of_range: int = 0
    errors: int = 0


STREAM_COUNTERS: tuple[str, ...] = tuple(StreamCounters.model_fields)
"""The counters' names, in their order."""


class Stream(StreamCounters, table=True):
    """One BigQuery write stream (or a table's ``_default`` stream) as a run used it."""

    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.run_id", max_length=_NAME, index=True)
    name: str = Field(max_length=_NAME)
    stream_type: str = Field(max_length=20)
    table_id: str = Field(max_length=_TABLE)
    query_id: str = Field(max_length=_NAME)
    batch_id: int | None = None
    write: str | None = Field(default=None, max_length=140)
    partition: int
    task_attempt: int
    state: str = Field(max_length=20)
    next_offset: int | None = _maybe_count()
    row_count: int | None = _maybe_count("as finalized")
    last_error: str | None = Field(default=None, sa_type=Text)
    last_error_at: datetime | None = _when()
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class Event(SQLModel, table=True):
    """An event exactly as received; ``id`` is its deterministic id, ``seq`` arrival order.

    Indexed only by what reads it: the id (each event stored once) and ``seq``
    (retention deletes the oldest). Every other index was a write per event stored,
    and nothing read by it (migration 0010, docs/journal/profiling.md)."""

    seq: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    id: str = Field(max_length=32, unique=True)
    type: str = Field(max_length=40)
    run_id: str = Field(max_length=_NAME)
    table_id: str = Field(max_length=_TABLE)
    time: datetime = Field(sa_type=UTCDateTime)
    received_at: datetime = Field(sa_type=UTCDateTime)
    body: dict[str, Any] = Field(sa_type=JSON)


class WriteRollup(SQLModel, table=True):
    """Append requests of one minute by (run, table, stream type, response code)."""

    __table_args__ = (
        UniqueConstraint("run_id", "minute", "table_id", "stream_type", "code"),
        Index("ix_writerollup_table_id_minute", "table_id", "minute"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    run_id: str = Field(max_length=_NAME)
    minute: datetime = Field(sa_type=UTCDateTime)
    table_id: str = Field(max_length=_TABLE)
    stream_type: str = Field(max_length=20)
    code: str = Field(max_length=40)
    requests: int = _count()
    rows: int = _count()
    bytes: int = _count()


class HourRollup(SQLModel, table=True):
    """Append requests of one UTC hour by (run, table, response code): the overview's 24
    hours, read from about a sixtieth of the rows the per-minute rollups hold. Keyed by
    run as those are, so concurrent ingests of one table's runs never wait on one row."""

    __table_args__ = (
        UniqueConstraint("run_id", "hour", "table_id", "code"),
        # Every column the overview reads, in its order: its 24 hours are read from the
        # index alone, without a visit to each row (docs/journal/profiling.md).
        Index("ix_hourrollup_hour_table_id_code_requests", "hour", "table_id", "code", "requests"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    run_id: str = Field(max_length=_NAME)
    hour: datetime = Field(sa_type=UTCDateTime)
    table_id: str = Field(max_length=_TABLE)
    code: str = Field(max_length=40)
    requests: int = _count()


class CommitHour(SQLModel, table=True):
    """The batches of one run into one table first committed in one UTC hour: how many,
    their rows and rows set aside, and the latest of their commits. The overview's
    freshness, rows today and rows set aside, read from a row a run and hour rather than
    from every batch stored (docs/journal/profiling.md, "Commits by the hour"). Kept by
    :mod:`onceover_backend.services.ingest.commit_hours` in the ingest transaction; keyed by run
    as the other rollups are, so concurrent ingests of one table's runs never wait on
    one row. No index on the hour: the overview reads every row (a table's last commit
    may be older than its day), and nothing prunes them."""

    __table_args__ = (UniqueConstraint("run_id", "hour", "table_id"),)

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    run_id: str = Field(max_length=_NAME)
    hour: datetime = Field(sa_type=UTCDateTime)
    table_id: str = Field(max_length=_TABLE)
    batches: int = _count()
    rows: int = _count()
    dead_lettered_rows: int = _count()
    last_commit_at: datetime | None = _when()


class Reconciliation(SQLModel, table=True):
    """One check of expected against actual rows in BigQuery, for a run or a table.

    Written once, whole, when the check ends (``status`` ``ok``, ``mismatch`` or
    ``error``); never updated. The per-batch (run) or per-run (table) breakdown and the
    duplicate-key samples are JSON lists in the shape the API returns them.
    """

    __table_args__ = (
        Index("ix_reconciliation_run_id_checked_at", "run_id", "checked_at"),
        Index("ix_reconciliation_table_id_checked_at", "table_id", "checked_at"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    scope: str = Field(max_length=10, description="run or table")
    run_id: str | None = Field(default=None, max_length=_NAME)
    table_id: str = Field(max_length=_TABLE)
    key_column: str | None = Field(default=None, max_length=300)
    stamped: bool = False
    status: str = Field(max_length=20)
    expected_rows: int | None = _maybe_count()
    actual_rows: int | None = _maybe_count()
    distinct_keys: int | None = _maybe_count()
    rows_without_key: int | None = _maybe_count()
    duplicate_key_count: int | None = _maybe_count()
    duplicate_rows: int | None = _maybe_count("copies beyond the first of duplicated keys")
    missing_rows: int | None = _maybe_count()
    extra_rows: int | None = _maybe_count()
    rows_set_aside: int | None = _maybe_count("rows the batches set aside (dead-lettered)")
    dead_letter_table: str | None = Field(default=None, max_length=_TABLE)
    rows_in_dead_letter_table: int | None = _maybe_count("the run's rows found there")
    rows_redriven: int | None = _maybe_count("of those set aside, rows re-driven since")
    overwrite: bool = Field(
        default=False, description="an overwrite's run: the scope it replaced was counted"
    )
    replaced_partitions: list[str] | None = Field(
        default=None, sa_type=JSON, description="the partitions counted (null: every one)"
    )
    duplicate_keys: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    batches: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    runs: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    warnings: list[str] = Field(default_factory=list, sa_type=JSON)
    method: str | None = Field(
        default=None, max_length=20, description="receipts, or counts (null: before 0009)"
    )
    queries: int | None = Field(default=None, description="BigQuery queries the check ran")
    compared_with: str | None = Field(
        default=None, max_length=_TABLE, description="a CDC check: the source's state, a table"
    )
    keys_differing: int | None = _maybe_count("a CDC check against a source: rows that differ")
    error: str | None = Field(default=None, sa_type=Text)
    trigger: str = Field(max_length=20, description="api, or run_succeeded")
    actor: str = Field(max_length=_NAME)
    checked_at: datetime = Field(sa_type=UTCDateTime)
    duration_ms: float


class AuditLog(SQLModel, table=True):
    """One mutating call: who, what, on what, and how it ended."""

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    time: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    actor: str = Field(max_length=_NAME, index=True)
    subject: str | None = Field(
        default=None, max_length=_NAME, description="a person's subject at the identity provider"
    )
    role: str | None = Field(default=None, max_length=20)
    action: str = Field(max_length=100, index=True)
    method: str = Field(max_length=10)
    path: str = Field(max_length=2000)
    target: str | None = Field(default=None, sa_type=Text)
    request_id: str = Field(max_length=100)
    status_code: int
    outcome: str = Field(sa_type=Text)


class SsoLogin(SQLModel, table=True):
    """A sign-in under way: what the callback must find (``state``) and check (the nonce,
    the PKCE verifier). Used once, and worthless after ``SIGN_IN_WITHIN``."""

    state_hash: str = Field(primary_key=True, max_length=64)
    nonce: str = Field(max_length=100)
    code_verifier: str = Field(max_length=200)
    next_path: str = Field(default="/", max_length=2000)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)


class SsoSession(SQLModel, table=True):
    """A person signed in through the identity provider: the dashboard's cookie holds
    the session's secret, only its SHA-256 is kept. Ends at ``expires_at`` or sign-out."""

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(max_length=64, unique=True)
    csrf_token: str = Field(max_length=100)
    subject: str = Field(max_length=_NAME)
    email: str | None = Field(default=None, max_length=_NAME)
    role: str = Field(max_length=20)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
    ended_at: datetime | None = _when()


class ApiToken(SQLModel, table=True):
    """A bearer token created with ``onceover token create``; only its SHA-256 is kept."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=_NAME, unique=True)
    role: str = Field(max_length=20)
    token_hash: str = Field(max_length=64, unique=True)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    revoked_at: datetime | None = _when()


class AlertRule(SQLModel, table=True):
    """A condition over the stored data that wakes someone (see
    onceover_backend.services.alerts.rules).

    Deleting a rule sets ``deleted_at``: its alerts resolve and their history stays.
    """

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=_NAME)
    kind: str = Field(max_length=40)
    scope: str = Field(max_length=10, description="all, job or table")
    scope_value: str | None = Field(default=None, max_length=_TABLE)
    severity: str = Field(max_length=20)
    params: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    for_s: float = Field(default=0.0, description="true this long before it fires")
    repeat_interval_s: float = Field(default=0.0, description="re-notify while firing; 0: never")
    enabled: bool = True
    description: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    deleted_at: datetime | None = _when()


class Alert(SQLModel, table=True):
    """What one rule says about one thing it watches (a run, a table): ``pending`` while
    the condition waits out the rule's ``for``, ``firing``, ``resolved``, or
    ``inactive`` (it cleared before it fired; nobody was told). One row per fingerprint."""

    __table_args__ = (Index("ix_alert_state_rule_id", "state", "rule_id"),)

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    rule_id: int = Field(foreign_key="alertrule.id", index=True)
    fingerprint: str = Field(max_length=16, unique=True)
    labels: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    run_id: str | None = Field(default=None, max_length=_NAME, index=True)
    table_id: str | None = Field(default=None, max_length=_TABLE)
    state: str = Field(max_length=20)
    value: float | None = None
    summary: str = Field(default="", sa_type=Text)
    pending_since: datetime | None = _when()
    started_at: datetime | None = _when()
    ended_at: datetime | None = _when()
    last_notified_at: datetime | None = _when()
    evaluated_at: datetime = Field(sa_type=UTCDateTime)
    transitions: int = Field(default=0, description="notifications so far (firing, resolved)")


class AlertTransition(SQLModel, table=True):
    """One notification-worthy change of an alert: it fired, fired again (a repeat),
    or resolved. Deliveries are made from these, one per endpoint."""

    __table_args__ = (UniqueConstraint("alert_id", "number"),)

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    alert_id: int = Field(sa_type=BigInteger, foreign_key="alert.id", index=True)
    number: int = Field(description="1, 2, ... per alert")
    status: str = Field(max_length=20, description="firing or resolved")
    repeat: bool = False
    at: datetime = Field(sa_type=UTCDateTime, index=True)
    value: float | None = None
    summary: str = Field(default="", sa_type=Text)


class WebhookEndpoint(SQLModel, table=True):
    """Where alerts are delivered, signed with ``secret`` (Standard Webhooks).

    The secret is kept as given (signing needs it); the API shows it once.
    """

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=_NAME)
    url: str = Field(sa_type=Text)
    secret: str = Field(max_length=200)
    format: str = Field(default="standard", max_length=20, description="standard or slack")
    enabled: bool = True
    disabled_reason: str | None = Field(default=None, sa_type=Text)
    rule_ids: list[int] = Field(default_factory=list, sa_type=JSON)
    severities: list[str] = Field(default_factory=list, sa_type=JSON)
    send_resolved: bool = True
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    deleted_at: datetime | None = _when()


class WebhookDelivery(SQLModel, table=True):
    """One message to one endpoint (an alert transition, a test, a redelivery) and where
    its sending stands. The body is fixed when it is made; every try signs it anew.

    ``dedupe_key`` makes a transition's delivery to an endpoint exist once, however many
    evaluators saw the transition.
    """

    __table_args__ = (
        Index("ix_webhookdelivery_status_next_attempt_at", "status", "next_attempt_at"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    endpoint_id: int = Field(foreign_key="webhookendpoint.id", index=True)
    message_id: str = Field(max_length=100, description="the webhook-id header")
    dedupe_key: str = Field(max_length=200, unique=True)
    kind: str = Field(max_length=20, description="alert, test or redelivery")
    transition_id: int | None = Field(
        default=None, sa_type=BigInteger, foreign_key="alerttransition.id", index=True
    )
    redelivery_of: int | None = Field(default=None, sa_type=BigInteger)
    event_status: str = Field(max_length=20, description="firing or resolved")
    body: str = Field(sa_type=Text)
    status: str = Field(max_length=20, description="pending, sending, succeeded or failed")
    attempts: int = 0
    next_attempt_at: datetime | None = _when()
    lease_until: datetime | None = _when()
    created_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = _when()
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, sa_type=Text)


class DeliveryAttempt(SQLModel, table=True):
    """One HTTP request of a delivery: what came back, how long it took, or why it failed."""

    __table_args__ = (UniqueConstraint("delivery_id", "number"),)

    id: int | None = Field(default=None, sa_column=Column(BigIntegerPK, primary_key=True))
    delivery_id: int = Field(sa_type=BigInteger, foreign_key="webhookdelivery.id", index=True)
    number: int
    started_at: datetime = Field(sa_type=UTCDateTime)
    status_code: int | None = None
    latency_ms: float
    error: str | None = Field(default=None, sa_type=Text)
    retry_after_s: float | None = Field(default=None, description="what the receiver asked for")
    response: str | None = Field(default=None, sa_type=Text, description="its first 1,000 chars")
