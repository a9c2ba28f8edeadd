"""Read the tenant registry's tables directly, to check what a call left behind."""

from __future__ import annotations

import sqlalchemy as sa

from tenancy_mw.tenants.registry import moves_table, tenants_table


def registry_snapshot(url: str) -> tuple[list[tuple], list[tuple]]:
    """Every tenant row and every move row of the registry at *url*, in a stable order."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tenants = [tuple(row) for row in conn.execute(sa.select(tenants_table).order_by(tenants_table.c.id))]
            moves = [tuple(row)[1:] for row in conn.execute(sa.select(moves_table).order_by(moves_table.c.id))]
    finally:
        engine.dispose()
    return tenants, moves
