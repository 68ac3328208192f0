"""Write-request rates by response code."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field


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
