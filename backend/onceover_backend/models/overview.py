"""The dashboard's home: what needs attention now, and every table at a glance."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from onceover_backend.models.runs import RunCausePublic, VerdictPublic

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
    reason: str = Field(
        description="failed: its cause's headline; stalled: how long it has been silent"
    )
    cause: RunCausePublic | None = Field(description="a failed run's cause; null when stalled")
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
