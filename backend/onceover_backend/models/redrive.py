"""Re-drives of a run's set-aside rows: the plan, the launch's answer, and what the run
page shows of them (its re-drive runs' counts and the control plane's launches)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

RedriveRunStatus = Literal["running", "succeeded", "failed", "stalled", "resuming"]


class RedriveRunPublic(BaseModel):
    """One re-drive of the run, as its own events (run ``<run>:redrive-<n>``) tell it."""

    run_id: str
    number: int = Field(description="n in <run>:redrive-<n>, the job's own numbering")
    status: RedriveRunStatus
    rows_landed: int = Field(description="rows its committed writes put in their tables")
    rows_set_aside_again: int = Field(
        description="rows BigQuery refused again, set aside under its run id, new reason"
    )
    started_at: AwareDatetime
    finished_at: AwareDatetime | None


class RedriveLaunchPublic(BaseModel):
    """A re-drive job the control plane started (its end is known before its events)."""

    number: int = Field(description="1, 2, ...: the control plane's launches of re-drives")
    actor: str = Field(description="who asked (the token's name)")
    requested_at: AwareDatetime
    dead_letter_table: str
    ledger: str
    command: list[str] = Field(description="secrets redacted")
    log_path: str = Field(description="the launch's output, on the backend host that started it")
    host: str
    pid: int | None
    live: bool = Field(description="the process has not been seen to exit")
    exit_code: int | None
    ended_at: AwareDatetime | None


class RunRedrivesPublic(BaseModel):
    """The run's set-aside rows, accounted for: re-driven (landed) or still set aside."""

    rows_set_aside: int = Field(description="rows the run's committed batches set aside")
    rows_redriven: int = Field(
        description="of those, rows its re-drives landed (their committed rows, each once)"
    )
    rows_still_set_aside: int = Field(
        description="rows_set_aside - rows_redriven: set aside under the run's id or, refused "
        "again, under a re-drive's"
    )
    runs: list[RedriveRunPublic] = Field(description="its re-drive runs, oldest first")
    launches: list[RedriveLaunchPublic] = Field(
        description="the control plane's launches of re-drives of it, newest first (at most 5)"
    )
    unavailable: str | None = Field(
        description="why this control plane cannot re-drive the run; null: it can (an "
        "operator's POST /api/runs/{run_id}/redrive, once the run set rows aside)"
    )


class RedrivePlanPublic(BaseModel):
    """What a re-drive of the run would do now (``dry_run=true``): nothing is launched."""

    run_id: str
    dead_letter_tables: list[str] = Field(
        description="the dead-letter tables the run's (and its re-drives') batches set rows "
        "aside in"
    )
    dead_letter_table: str = Field(description="the one the re-drive reads")
    rows_set_aside: int
    rows_redriven: int
    rows_to_send: int = Field(
        description="rows still set aside, by the events so far: what the job will look for "
        "(it decides from the dead-letter table and the ledger, each row once)"
    )
    ledger: str = Field(
        description="where the re-drive keeps its records: the run's own ledger (its spec's "
        "ledger, else its checkpoint's), the one every re-drive of the run shares"
    )
    key: str | None = Field(description="the column rows refused again are named by")
    module: str
    command: list[str] = Field(description="what runs (secrets redacted)")
    cwd: str = Field(description="the backend's directory the job runs in")
    log_path: str = Field(description="where its output goes")
    launch: int = Field(description="the number the launch gets")
    digest: str = Field(
        description="what a launch confirms (approve_plan): sha256 of the command; a plan "
        "that changed since (new events) is refused"
    )
    warnings: list[str]


class RedriveAcceptedPublic(BaseModel):
    """``202``: the re-drive job is started; its events arrive as run <run>:redrive-<n>."""

    run_id: str
    launch: int
    status: Literal["launched"]
    requested_at: AwareDatetime
    actor: str
    pid: int
    log_path: str
    plan: RedrivePlanPublic
