"""Alembic's entry point for tenancy_mw's migrations (see :mod:`tenancy_mw.migrations`)."""

from __future__ import annotations

from alembic import context

from tenancy_mw.core import sql
from tenancy_mw.migrations import VERSION_TABLE

config = context.config
url = config.attributes["url"]

if context.is_offline_mode():
    context.configure(url=url, version_table=VERSION_TABLE, literal_binds=True, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    # NullPool: a migration run holds no connection once it is done.
    engine = sql.create_engine(url, poolclass=sql.sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, version_table=VERSION_TABLE, transaction_per_migration=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()
