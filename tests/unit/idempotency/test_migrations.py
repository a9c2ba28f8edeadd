"""The sql store's table: its migration on SQLite, PostgreSQL and MariaDB, and the purge verb."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from tenancy_mw import migrations
from tenancy_mw.idempotency.sql_store import TABLE_NAME, SqlStore, metadata, records

MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")


def describe(engine: sa.Engine, table: str) -> dict:
    """What a user would compare between two builds of a table: columns, key, indexes, collations."""
    inspector = sa.inspect(engine)
    columns = {
        column["name"]: (
            type(column["type"]).__name__,
            getattr(column["type"], "length", None),
            column["nullable"],
            getattr(column["type"], "collation", None),
        )
        for column in inspector.get_columns(table)
    }
    indexes = sorted((index["name"], tuple(index["column_names"]), bool(index["unique"]))
                     for index in inspector.get_indexes(table))
    return {
        "columns": columns,
        "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
        "indexes": indexes,
    }


def test_upgrade_matches_the_runtime_table_and_downgrade_drops_it(sql_url, make_database):
    migrations.upgrade(sql_url, ["idempotency"])
    assert "idempotency" in migrations.current(sql_url)
    migrated = sa.create_engine(sql_url)
    backend = migrated.dialect.name
    built_url = make_database(backend if backend != "mysql" else "mariadb")
    built = sa.create_engine(built_url)
    metadata.create_all(built)
    try:
        assert describe(migrated, TABLE_NAME) == describe(built, TABLE_NAME)
        if backend in ("mysql", "mariadb"):
            columns = {c["name"]: c for c in sa.inspect(migrated).get_columns(TABLE_NAME)}
            # LONGBLOB: a stored response may be over BLOB's 64 KiB.
            assert type(columns["value"]["type"]).__name__ == "LONGBLOB"
        migrations.downgrade(sql_url, "idempotency")
        assert not sa.inspect(migrated).has_table(TABLE_NAME)
        assert "idempotency" not in migrations.current(sql_url)
    finally:
        migrated.dispose()
        built.dispose()


def test_store_round_trip_and_purge_command(sql_url):
    migrations.upgrade(sql_url, ["idempotency"])
    store = SqlStore(sql_url, purge_interval=0)
    try:
        big = bytes(range(256)) * 1024  # 256 KiB, every byte value: over BLOB's 64 KiB
        claim = store.claim("tmw-idem:live", b"lease", 60)
        assert store.complete("tmw-idem:live", claim.handle, big, 3600)
        assert store.read("tmw-idem:live") == big
        expired = store.claim("tmw-idem:old", b"lease", 1)
        assert expired.claimed
        # A duplicate claim answers with the stored value (the database's duplicate-key error).
        assert store.claim("tmw-idem:live", b"other", 60).value == big
        time.sleep(1.1)
        result = subprocess.run([MANAGE, "idempotency", "purge", "--url", sql_url],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "purged 1 expired idempotency record"
        assert store.read("tmw-idem:live") == big
        with store.engine.connect() as conn:
            keys = [row[0] for row in conn.execute(sa.select(records.c.key))]
        assert keys == ["tmw-idem:live"]
    finally:
        store.close()


@pytest.fixture
def clocked_store(sql_url):
    """(store, now): a SqlStore on each backend whose clock is ``now[0]``, set by the test."""
    migrations.upgrade(sql_url, ["idempotency"])
    now = [1_000_000.0]
    store = SqlStore(sql_url, purge_interval=0, clock=lambda: now[0])
    yield store, now
    store.close()


def test_expired_lease_is_taken_over_once(clocked_store):
    """Two requests find one expired lease: only one takes it over (compare-and-swap on the owner)."""
    store, now = clocked_store
    first = store.claim("tmw-idem:k", b"lease-a", 10)
    now[0] += 11
    taken = store.claim("tmw-idem:k", b"lease-b", 10)
    assert taken.claimed
    assert taken.handle != first.handle
    assert not store.claim("tmw-idem:k", b"lease-c", 10).claimed
    # The first owner, late, changes nothing.
    assert not store.complete("tmw-idem:k", first.handle, b"late", 100)
    assert not store.release("tmw-idem:k", first.handle)
    assert store.read("tmw-idem:k") == b"lease-b"


def test_opportunistic_purge(clocked_store):
    store, now = clocked_store
    store.claim("tmw-idem:gone", b"lease", 5)
    now[0] += 10
    store.purge_interval = 60
    store._next_purge = 0  # due now
    store.claim("tmw-idem:new", b"lease", 5)
    with store.engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(records)).scalar()
    assert count == 1


def test_purge_without_the_table_says_how_to_create_it(tmp_path):
    result = subprocess.run([MANAGE, "idempotency", "purge", "--url", "sqlite:///%s/x.sqlite" % tmp_path],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "db upgrade" in result.stderr
    assert "--component idempotency" in result.stderr
    assert "Traceback" not in result.stderr
