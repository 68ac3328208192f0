"""a run's appends refused by BigQuery's throughput quota (RESOURCE_EXHAUSTED), and when
a stream of it was last throttled

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 18:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Runs stored before counted no throttling: 0, never.
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("throttled_requests", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("throttled_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("throttled_at")
        batch_op.drop_column("throttled_requests")
