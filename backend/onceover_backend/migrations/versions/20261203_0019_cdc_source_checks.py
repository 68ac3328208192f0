"""a change data capture check against the source's state: the table it was compared with,
and the keys whose rows differ

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Checks stored before compared with no source: null.
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("compared_with", sqlmodel.sql.sqltypes.AutoString(length=1100))
        )
        batch_op.add_column(sa.Column("keys_differing", sa.BigInteger()))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_column("keys_differing")
        batch_op.drop_column("compared_with")
