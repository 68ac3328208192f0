"""an overwrite's reconciliation: whether the scope it replaced was what was counted, and
the partitions (by their ids) that scope was

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Checks stored before were of appends (no sink before this overwrote).
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("overwrite", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("replaced_partitions", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_column("replaced_partitions")
        batch_op.drop_column("overwrite")
