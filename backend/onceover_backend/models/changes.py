"""What ``/api/changes`` announces: the runs that changed."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel

from onceover_backend.models.runs import RunStatus


class RunChangePublic(BaseModel):
    run_id: str
    status: RunStatus
    rows_committed: int
    updated_at: AwareDatetime


class RunChangesPublic(BaseModel):
    """The data of a ``runs`` event on ``/api/changes``."""

    runs: list[RunChangePublic]
