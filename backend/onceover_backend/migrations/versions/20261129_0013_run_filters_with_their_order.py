"""the runs list's filters (status, table, job) indexed with the start time it orders
by, so a page is read from the index in order instead of every matching run sorted

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 03:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FILTERS = ("status", "table_id", "job")


def upgrade() -> None:
    for column in _FILTERS:
        op.create_index(f"ix_run_{column}_started_at", "run", [column, "started_at"])
        op.drop_index(f"ix_run_{column}", table_name="run")


def downgrade() -> None:
    for column in reversed(_FILTERS):
        op.create_index(f"ix_run_{column}", "run", [column])
        op.drop_index(f"ix_run_{column}_started_at", table_name="run")
