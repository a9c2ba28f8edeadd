"""idempotency: the sql store's table of claimed tokens and stored responses

Revision ID: 7c1e0d2a9b41
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

from tenancy_mw.core.sql import ExactString, mysql, sa, table_options

revision = "7c1e0d2a9b41"
down_revision = None
branch_labels = ("idempotency",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenancy_mw_idempotency",
        sa.Column("key", ExactString(80), primary_key=True),
        sa.Column("owner", ExactString(32), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb"), nullable=False),
        **table_options(),
    )
    op.create_index(
        "ix_tenancy_mw_idempotency_expires_at", "tenancy_mw_idempotency", ["expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_tenancy_mw_idempotency_expires_at", table_name="tenancy_mw_idempotency")
    op.drop_table("tenancy_mw_idempotency")
