"""batches first committed per run, table and UTC hour, for the overview's last commit,
rows today and rows set aside (it summed every batch stored, each call); filled from the
batches stored before. The hourly rollups' index on the hour covers what the overview
reads of them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "commithour",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("table_id", sqlmodel.sql.sqltypes.AutoString(length=1100), nullable=False),
        sa.Column("batches", sa.BigInteger(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("dead_lettered_rows", sa.BigInteger(), nullable=False),
        sa.Column("last_commit_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "hour", "table_id"),
    )
    # The hour a commit falls in, in UTC: PostgreSQL keeps a zone; SQLite keeps UTC text
    # as SQLAlchemy writes it (2026-11-28 14:00:00.000000).
    if op.get_bind().dialect.name == "postgresql":
        hour = "date_trunc('hour', committed_at, 'UTC')"
    else:
        hour = "strftime('%Y-%m-%d %H:00:00.000000', committed_at)"
    op.execute(
        f"INSERT INTO commithour (run_id, hour, table_id, batches, rows, dead_lettered_rows, "
        f"last_commit_at) "
        f"SELECT run_id, {hour}, table_id, COUNT(*), SUM(COALESCE(rows, 0)), "
        f"SUM(dead_lettered_rows), MAX(committed_at) FROM batch "
        f"WHERE committed_at IS NOT NULL GROUP BY run_id, {hour}, table_id"
    )

    op.create_index(
        "ix_hourrollup_hour_table_id_code_requests",
        "hourrollup",
        ["hour", "table_id", "code", "requests"],
        unique=False,
    )
    op.drop_index("ix_hourrollup_hour", table_name="hourrollup")


def downgrade() -> None:
    op.create_index("ix_hourrollup_hour", "hourrollup", ["hour"], unique=False)
    op.drop_index("ix_hourrollup_hour_table_id_code_requests", table_name="hourrollup")
    op.drop_table("commithour")
