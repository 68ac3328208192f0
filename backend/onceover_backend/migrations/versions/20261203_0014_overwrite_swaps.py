"""an overwrite's swap on its batch: the transaction's job, its step, what it replaced
(rows in the scope, rows inserted, the partitions by their ids)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "swap_state",
    "swap_job_id",
    "swap_attempt",
    "swap_staging",
    "swap_scope",
    "swap_staged_rows",
    "swap_rows_replaced",
    "swap_partitions",
    "swap_partition_count",
    "swap_started_at",
    "swapped_at",
)


def upgrade() -> None:
    # Batches stored before were appends (no sink before this overwrote): null, no swap.
    text = sqlmodel.sql.sqltypes.AutoString
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("swap_state", text(length=20)))
        batch_op.add_column(sa.Column("swap_job_id", text(length=1024)))
        batch_op.add_column(sa.Column("swap_attempt", sa.Integer()))
        batch_op.add_column(sa.Column("swap_staging", text(length=1100)))
        batch_op.add_column(sa.Column("swap_scope", text(length=300)))
        batch_op.add_column(sa.Column("swap_staged_rows", sa.BigInteger()))
        batch_op.add_column(sa.Column("swap_rows_replaced", sa.BigInteger()))
        batch_op.add_column(sa.Column("swap_partitions", sa.JSON()))
        batch_op.add_column(sa.Column("swap_partition_count", sa.Integer()))
        batch_op.add_column(sa.Column("swap_started_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("swapped_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("batch", schema=None) as batch_op:
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
