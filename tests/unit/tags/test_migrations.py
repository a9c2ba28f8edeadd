"""The ``tags`` migration component on SQLite, PostgreSQL and MariaDB: up, down, and equal to the runtime tables."""

from __future__ import annotations

import os
import subprocess
import sys

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tenancy_mw import migrations
from tenancy_mw.core import sql
from tenancy_mw.tags.sql import TAG_LOCKS, TAGS

MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")


def table_names(url):
    engine = sql.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_matches_the_runtime_tables_and_downgrade_drops_them(sql_url):
    result = subprocess.run([MANAGE, "db", "upgrade", "--url", sql_url, "--component", "tags"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert {"tenancy_mw_tags", "tenancy_mw_tag_locks"} <= table_names(sql_url)
    assert "tags" in migrations.current(sql_url)

    engine = sql.create_engine(sql_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, TAGS.metadata)
        # Only tables of other components (and the version table) may differ.
        ours = [d for d in diff if _table_of(d) in (TAGS.name, TAG_LOCKS.name)]
        assert ours == []
        if sql.is_mysql(engine.dialect):
            with engine.connect() as conn:
                collations = dict(conn.execute(sa.text(
                    "SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'tenancy_mw_tags'")).all())
            assert set(collations.values()) <= sql.EXACT_COLLATIONS, collations
        # Exact comparison through the migrated table: 'Foo' and 'foo' are two tags.
        with engine.begin() as conn:
            conn.execute(TAGS.insert(), [{"resource_id": "r", "tag": t} for t in ("foo", "Foo", "foo ")])
            assert conn.execute(sa.select(sa.func.count()).select_from(TAGS).where(TAGS.c.tag == "foo")).scalar() == 1
    finally:
        engine.dispose()

    migrations.downgrade(sql_url, "tags")
    assert not {"tenancy_mw_tags", "tenancy_mw_tag_locks"} & table_names(sql_url)


def _table_of(diff_entry):
    entry = diff_entry[0] if isinstance(diff_entry, list) else diff_entry
    for part in entry[1:]:
        name = getattr(part, "name", None)
        table = getattr(part, "table", None)
        if table is not None:
            return table.name
        if isinstance(part, sa.Table):
            return name
        if isinstance(part, str) and part.startswith("tenancy_mw_"):
            return part
    return None
