"""dead letters: rows a batch set aside in its dead-letter table, per batch and run; the
rejections a run's tasks reported; what reconciliation found in the dead-letter table

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Rows stored before set nothing aside (no sink before this had a dead-letter table):
    # the defaults below are what their events say.
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("dead_lettered_rows", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("dead_letter_table", sqlmodel.sql.sqltypes.AutoString(length=1100))
        )
        batch_op.add_column(
            sa.Column("dead_letter_streams", sa.JSON(), nullable=False, server_default="[]")
        )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("rows_dead_lettered", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("dead_letter_table", sqlmodel.sql.sqltypes.AutoString(length=1100))
        )
        batch_op.add_column(
            sa.Column("rejected_requests", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("rejections", sa.JSON(), nullable=False, server_default="[]"))
    # Checks stored before compared no dead-letter table: null, as the API shows it.
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rows_set_aside", sa.BigInteger()))
        batch_op.add_column(
            sa.Column("dead_letter_table", sqlmodel.sql.sqltypes.AutoString(length=1100))
        )
        batch_op.add_column(sa.Column("rows_in_dead_letter_table", sa.BigInteger()))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        for name in ("rows_in_dead_letter_table", "dead_letter_table", "rows_set_aside"):
            batch_op.drop_column(name)
    with op.batch_alter_table("run", schema=None) as batch_op:
        for name in ("rejections", "rejected_requests", "dead_letter_table", "rows_dead_lettered"):
            batch_op.drop_column(name)
    with op.batch_alter_table("batch", schema=None) as batch_op:
        for name in ("dead_letter_streams", "dead_letter_table", "dead_lettered_rows"):
            batch_op.drop_column(name)
