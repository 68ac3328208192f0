"""re-drive launches; a run check's rows re-driven

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 11:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "redrivelaunch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("live", sa.Boolean(), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("plan_digest", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column(
            "dead_letter_table", sqlmodel.sql.sqltypes.AutoString(length=1100), nullable=False
        ),
        sa.Column("ledger", sa.Text(), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("log_path", sa.Text(), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.run_id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "number"),
    )
    with op.batch_alter_table("redrivelaunch", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_redrivelaunch_run_id"), ["run_id"], unique=False)
        # One live re-drive per run: what keeps two replicas from both launching one.
        batch_op.create_index(
            "uq_redrivelaunch_live_run",
            ["run_id"],
            unique=True,
            sqlite_where=sa.text("live"),
            postgresql_where=sa.text("live"),
        )
    # Checks stored before: nothing was re-driven then (null: not said).
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rows_redriven", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_column("rows_redriven")
    with op.batch_alter_table("redrivelaunch", schema=None) as batch_op:
        batch_op.drop_index("uq_redrivelaunch_live_run")
        batch_op.drop_index(batch_op.f("ix_redrivelaunch_run_id"))
    op.drop_table("redrivelaunch")
