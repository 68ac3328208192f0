"""events keep only the indexes something reads by: the id (each event stored once)
and the arrival order (retention); the type and (run, time) indexes go, each a write
per event stored that nothing read

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 12:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_event_type", table_name="event")
    op.drop_index("ix_event_run_id_time", table_name="event")


def downgrade() -> None:
    op.create_index("ix_event_run_id_time", "event", ["run_id", "time"], unique=False)
    op.create_index("ix_event_type", "event", ["type"], unique=False)
