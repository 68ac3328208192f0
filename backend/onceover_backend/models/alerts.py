"""Alert rules, the alerts they raise and their notifications."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, Field

from onceover_backend.models.params import Text

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
