"""single sign-on: sign-ins under way, sessions, the person in the audit log

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 15:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ssologin",
        sa.Column("state_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("nonce", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("code_verifier", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("next_path", sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state_hash"),
    )
    with op.batch_alter_table("ssologin", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ssologin_created_at"), ["created_at"], unique=False)
    op.create_table(
        "ssosession",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("csrf_token", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("subject", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("email", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("ssosession", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ssosession_expires_at"), ["expires_at"], unique=False)
    with op.batch_alter_table("auditlog", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("subject", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("auditlog", schema=None) as batch_op:
        batch_op.drop_column("subject")
    with op.batch_alter_table("ssosession", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ssosession_expires_at"))
    op.drop_table("ssosession")
    with op.batch_alter_table("ssologin", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ssologin_created_at"))
    op.drop_table("ssologin")
