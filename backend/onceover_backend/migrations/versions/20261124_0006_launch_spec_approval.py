"""launch spec approval: a run's pinned spec, its approval, a proposed spec; launches
name the approval they rest on

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 21:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Specs stored before stay pinned but unapproved: nothing launches them (auto-resume
    # included) until an operator approves each (docs/guides/security.md).
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("spec_approved_digest", sqlmodel.sql.sqltypes.AutoString(length=64))
        )
        batch_op.add_column(
            sa.Column("spec_approved_by", sqlmodel.sql.sqltypes.AutoString(length=200))
        )
        batch_op.add_column(sa.Column("spec_approved_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("spec_proposed", sa.JSON()))
        batch_op.add_column(sa.Column("spec_proposed_at", sa.DateTime(timezone=True)))
        batch_op.add_column(
            sa.Column("spec_proposed_by", sqlmodel.sql.sqltypes.AutoString(length=200))
        )
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("approved_by", sqlmodel.sql.sqltypes.AutoString(length=200)))
        batch_op.add_column(sa.Column("spec_digest", sqlmodel.sql.sqltypes.AutoString(length=64)))


def downgrade() -> None:
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.drop_column("spec_digest")
        batch_op.drop_column("approved_by")
    with op.batch_alter_table("run", schema=None) as batch_op:
        for name in ("spec_proposed_by", "spec_proposed_at", "spec_proposed",
                     "spec_approved_at", "spec_approved_by", "spec_approved_digest"):  # fmt: skip
            batch_op.drop_column(name)
