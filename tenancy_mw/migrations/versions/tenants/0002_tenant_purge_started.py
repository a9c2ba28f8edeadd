"""Tenant registry: tenancy_tenants.purge_started, when a purge began removing a deleted tenant.

A purge marks a tenant before it has the service delete the tenant's
resources and removes the row after: a purge stopped in between is
resumed by the next run, and a restore of a marked tenant is refused.

Revision ID: tenants_0002
Revises: tenants_0001
Create Date: 2026-12-01
"""

from alembic import op

from tenancy_mw.core.sql import sa

revision = "tenants_0002"
down_revision = "tenants_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenancy_tenants", sa.Column("purge_started", sa.DateTime(), nullable=True))


def downgrade() -> None:
    # SQLite drops a column by copying the table: batch mode does that there,
    # and is a plain ALTER TABLE elsewhere.
    with op.batch_alter_table("tenancy_tenants") as batch:
        batch.drop_column("purge_started")
