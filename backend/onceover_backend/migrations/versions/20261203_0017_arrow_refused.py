"""when BigQuery first refused a run's Arrow rows (they then went as proto), and what it said

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Runs stored before sent Arrow or proto as asked: never refused.
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("arrow_refused_at", sa.DateTime(timezone=True)))
        batch_op.add_column(
            sa.Column("arrow_refused", sqlmodel.sql.sqltypes.AutoString(length=4000))
        )


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("arrow_refused")
        batch_op.drop_column("arrow_refused_at")
