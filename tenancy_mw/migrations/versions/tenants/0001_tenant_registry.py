"""Tenant registry: the tenancy_tenants and tenancy_tenant_moves tables.

Revision ID: tenants_0001
Revises:
Create Date: 2026-11-22
"""

from alembic import op

from tenancy_mw.core.sql import ExactString, mysql, sa, table_options

revision = "tenants_0001"
down_revision = None
branch_labels = ("tenants",)
depends_on = None

# Written out here, not imported from tenancy_mw.tenants.registry: the
# runtime definitions may change later, this migration must not.
TENANT_ID_LENGTH = 255


def upgrade() -> None:
    op.create_table(
        "tenancy_tenants",
        sa.Column("id", ExactString(TENANT_ID_LENGTH), primary_key=True),
        sa.Column("representation", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("deleted", sa.DateTime(), nullable=True),
        **table_options(),
    )
    op.create_index("ix_tenancy_tenants_state_deleted", "tenancy_tenants", ["state", "deleted"])
    op.create_table(
        "tenancy_tenant_moves",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("source_key", sa.String(64), nullable=False),
        sa.Column("source_tenant", ExactString(TENANT_ID_LENGTH), nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
        sa.Column("dest_key", sa.String(64), nullable=False),
        sa.Column("dest_tenant", ExactString(TENANT_ID_LENGTH), nullable=False),
        sa.Column("dest_path", sa.Text, nullable=False),
        sa.Column("moved", sa.DateTime(), nullable=False),
        **table_options(),
    )
    for column in ("source_key", "dest_key", "source_tenant", "dest_tenant"):
        op.create_index("ix_tenancy_tenant_moves_%s" % column, "tenancy_tenant_moves", [column])


def downgrade() -> None:
    op.drop_table("tenancy_tenant_moves")
    op.drop_table("tenancy_tenants")
