"""tags: the tag table (resource id, tag) and its per-resource lock table

Revision ID: 7d3c1a9e4b20
Revises:
Create Date: 2026-11-22
"""

from alembic import op

from tenancy_mw.core.sql import ExactString, sa, table_options

revision = "7d3c1a9e4b20"
down_revision = None
branch_labels = ("tags",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenancy_mw_tags",
        sa.Column("resource_id", ExactString(255), nullable=False),
        sa.Column("tag", ExactString(60), nullable=False),
        sa.PrimaryKeyConstraint("resource_id", "tag"),
        **table_options(),
    )
    op.create_index("ix_tenancy_mw_tags_tag_resource", "tenancy_mw_tags", ["tag", "resource_id"])
    op.create_table(
        "tenancy_mw_tag_locks",
        sa.Column("resource_id", ExactString(255), nullable=False),
        sa.PrimaryKeyConstraint("resource_id"),
        **table_options(),
    )


def downgrade() -> None:
    op.drop_table("tenancy_mw_tag_locks")
    op.drop_index("ix_tenancy_mw_tags_tag_resource", table_name="tenancy_mw_tags")
    op.drop_table("tenancy_mw_tags")
