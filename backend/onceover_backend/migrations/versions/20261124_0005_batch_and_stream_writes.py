"""batch and stream writes: one batch row per write, each batch with its key

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 14:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # batch_key grows to "<batch>/<write>"; rows stored before keep their keys, which
    # is what the events without a write (every sink before this) still map to.
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.alter_column(
            "batch_key",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=40),
            type_=sqlmodel.sql.sqltypes.AutoString(length=180),
            existing_nullable=False,
        )
        batch_op.add_column(
            sa.Column("write", sqlmodel.sql.sqltypes.AutoString(length=140), nullable=True)
        )
        # A run may write several tables, each with a key of its own (reconciliation).
        batch_op.add_column(
            sa.Column("key_column", sqlmodel.sql.sqltypes.AutoString(length=300), nullable=True)
        )
    with op.batch_alter_table("stream", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("write", sqlmodel.sql.sqltypes.AutoString(length=140), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("stream", schema=None) as batch_op:
        batch_op.drop_column("write")
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.drop_column("key_column")
        batch_op.drop_column("write")
        batch_op.alter_column(
            "batch_key",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=180),
            type_=sqlmodel.sql.sqltypes.AutoString(length=40),
            existing_nullable=False,
        )
