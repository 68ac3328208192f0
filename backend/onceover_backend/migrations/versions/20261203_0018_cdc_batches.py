"""a change data capture batch's upserts and deletes

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batches stored before were appends: null, as a plain append's are.
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("upserts", sa.BigInteger()))
        batch_op.add_column(sa.Column("deletes", sa.BigInteger()))


def downgrade() -> None:
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.drop_column("deletes")
        batch_op.drop_column("upserts")
