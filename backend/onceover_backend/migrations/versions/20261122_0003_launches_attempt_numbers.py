"""launches, attempt numbers

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 12:06:56.904675
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Attempts stored before numbers existed: 1, 2, ... per run in the order they started.
_NUMBER_EXISTING_ATTEMPTS = """
UPDATE attempt SET number = (
    SELECT COUNT(*) FROM attempt AS earlier
    WHERE earlier.run_id = attempt.run_id
      AND (earlier.started_at < attempt.started_at
           OR (earlier.started_at = attempt.started_at
               AND earlier.attempt_id <= attempt.attempt_id))
)
"""


def upgrade() -> None:
    op.create_table(
        "launch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("attempt_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("live", sa.Boolean(), nullable=False),
        sa.Column("trigger", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.run_id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("idempotency_key"),
        sa.UniqueConstraint("run_id", "attempt_number"),
    )
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_launch_run_id"), ["run_id"], unique=False)
        # One live launch per run: what keeps two replicas from both launching.
        batch_op.create_index(
            "uq_launch_live_run",
            ["run_id"],
            unique=True,
            sqlite_where=sa.text("live"),
            postgresql_where=sa.text("live"),
        )

    with op.batch_alter_table("attempt", schema=None) as batch_op:
        batch_op.add_column(sa.Column("number", sa.Integer(), nullable=True))
    op.execute(_NUMBER_EXISTING_ATTEMPTS)
    with op.batch_alter_table("attempt", schema=None) as batch_op:
        batch_op.alter_column("number", existing_type=sa.Integer(), nullable=False)
        batch_op.create_unique_constraint("uq_attempt_run_id_number", ["run_id", "number"])


def downgrade() -> None:
    with op.batch_alter_table("attempt", schema=None) as batch_op:
        batch_op.drop_constraint("uq_attempt_run_id_number", type_="unique")
        batch_op.drop_column("number")

    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_launch_live_run", sqlite_where=sa.text("live"), postgresql_where=sa.text("live")
        )
        batch_op.drop_index(batch_op.f("ix_launch_run_id"))

    op.drop_table("launch")
