"""reconciliation by receipt: each batch's key tally (rows, checksum and key sum per
key-hash bucket, as its first commit reported it), and how each check was made and
how many BigQuery queries it ran

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batches stored before carried no tally, and checks before made no count of their
    # queries: null, and such a run is checked by counts as before.
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_buckets", sa.JSON()))
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("method", sqlmodel.sql.sqltypes.AutoString(length=20)))
        batch_op.add_column(sa.Column("queries", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        for name in ("queries", "method"):
            batch_op.drop_column(name)
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.drop_column("key_buckets")
