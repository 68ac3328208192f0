"""BigQuery tables as the control plane knows them: totals over every run into each."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field

from onceover_backend.models.overview import OverviewTablePublic


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
    figures: OverviewTablePublic = Field(
        description="the table as the overview shows it (the same definition): last commit "
        "and freshness, rows committed today, the 24 hours' retry codes, rows set aside and "
        "the newest check touching it, run-scoped or table-scoped"
    )


class TablesPublic(BaseModel):
    data: list[TablePublic] = Field(description="most recently loaded first")
    count: int
