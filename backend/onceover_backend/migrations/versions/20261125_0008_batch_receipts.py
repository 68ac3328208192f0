"""batch receipts: when BigQuery made a batch's rows visible, the source offsets it
read (streaming) and the checksum of its keys, as its first commit reported them

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batches stored before carried no receipt: null, as the API shows it.
    with op.batch_alter_table("batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("commit_time", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("source_offsets", sa.JSON()))
        batch_op.add_column(sa.Column("key_checksum", sa.BigInteger()))


def downgrade() -> None:
    with op.batch_alter_table("batch", schema=None) as batch_op:
        for name in ("key_checksum", "source_offsets", "commit_time"):
            batch_op.drop_column(name)
