"""a run keeps its ALREADY_EXISTS and OUT_OF_RANGE request counts (the lists summed
them from the per-minute rollups, over a table's whole history, and lost them with the
rollups' retention); append requests per hour per run, table and code for the
overview's 24 hours; both filled from the rollups stored before

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNTS = (("already_exists_requests", "ALREADY_EXISTS"), ("out_of_range_requests", "OUT_OF_RANGE"))


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        for column, _ in _COUNTS:
            batch_op.add_column(
                sa.Column(column, sa.BigInteger(), nullable=False, server_default="0")
            )
    # What the lists showed until now: the rollups still kept (older ones, past their
    # retention, were gone from the lists already).
    for column, code in _COUNTS:
        op.execute(
            f"UPDATE run SET {column} = COALESCE((SELECT SUM(w.requests) FROM writerollup w "
            f"WHERE w.run_id = run.run_id AND w.code = '{code}'), 0)"
        )

    op.create_table(
        "hourrollup",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("table_id", sqlmodel.sql.sqltypes.AutoString(length=1100), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "hour", "table_id", "code"),
    )
    op.create_index("ix_hourrollup_hour", "hourrollup", ["hour"], unique=False)
    # The hour a minute falls in, in UTC: PostgreSQL keeps a zone; SQLite keeps UTC text
    # as SQLAlchemy writes it (2026-11-27 15:00:00.000000).
    if op.get_bind().dialect.name == "postgresql":
        hour = "date_trunc('hour', minute, 'UTC')"
    else:
        hour = "strftime('%Y-%m-%d %H:00:00.000000', minute)"
    op.execute(
        f"INSERT INTO hourrollup (run_id, hour, table_id, code, requests) "
        f"SELECT run_id, {hour}, table_id, code, SUM(requests) FROM writerollup "
        f"GROUP BY run_id, {hour}, table_id, code"
    )


def downgrade() -> None:
    op.drop_index("ix_hourrollup_hour", table_name="hourrollup")
    op.drop_table("hourrollup")
    with op.batch_alter_table("run", schema=None) as batch_op:
        for column, _ in reversed(_COUNTS):
            batch_op.drop_column(column)
