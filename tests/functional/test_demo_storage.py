"""The demo's storage on SQLite, PostgreSQL and MariaDB: real databases, no mocks."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from demo_compute.storage import InvalidName, MarkerNotFound, ServerStore

from tenancy_mw.tenants.ids import InvalidTenantId
from tests.functional.conftest import empty_servers_table, sqlite_url


def test_create_list_show_delete(store):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    server = store.create_server("acme", "web1")
    assert set(server) == {"id", "tenant_id", "name", "created"}
    assert str(uuid.UUID(server["id"])) == server["id"]
    assert server["tenant_id"] == "acme"
    assert server["name"] == "web1"
    assert before <= server["created"] <= datetime.now(timezone.utc) + timedelta(seconds=1)

    assert store.list_servers("acme") == [server]
    assert store.get_server("acme", server["id"]) == server
    assert store.delete_server("acme", server["id"]) is True
    assert store.get_server("acme", server["id"]) is None
    # Remembered as deleted (a move of it answers 410), for its own tenant only.
    assert store.is_deleted("acme", server["id"]) is True
    assert store.is_deleted("Acme", server["id"]) is False
    assert store.list_servers("acme") == []
    assert store.delete_server("acme", server["id"]) is False


def test_list_holds_every_server_of_the_tenant(store):
    made = [store.create_server("acme", "web%d" % i) for i in range(5)]
    assert sorted(s["id"] for s in store.list_servers("acme")) == sorted(s["id"] for s in made)


def test_the_list_is_by_id_and_pages_after_the_marker(store):
    made = [store.create_server("acme", "web%d" % i) for i in range(7)]
    theirs = store.create_server("other", "x")
    ids = sorted(s["id"] for s in made)
    assert [s["id"] for s in store.list_servers("acme")] == ids
    # Page after page, each after the last id of the one before: every server once.
    pages, marker = [], None
    while True:
        page = [s["id"] for s in store.list_servers("acme", marker=marker, limit=3)]
        pages.append(page)
        if len(page) < 3:
            break
        marker = page[-1]
    assert pages == [ids[0:3], ids[3:6], ids[6:]]
    assert store.list_servers("acme", marker=ids[-1]) == []
    assert store.list_servers("acme", limit=0) == []
    # With the caller's condition too: the page is of the servers meeting it.
    not_web3 = store.servers.c.name != "web3"
    kept = [s["id"] for s in made if s["name"] != "web3"]
    listed = [s["id"] for s in store.list_servers("acme", not_web3, marker=ids[1], limit=10)]
    assert listed == sorted(i for i in kept if i > ids[1])
    # A marker must be one of the tenant's servers, whatever the limit.
    for marker in (theirs["id"], str(uuid.uuid4()), ids[0].upper(), ids[0] + " ", "not-an-id"):
        for limit in (None, 0, 2):
            with pytest.raises(MarkerNotFound) as refused:
                store.list_servers("acme", marker=marker, limit=limit)
            assert "marker [%s] not found" % marker in refused.value.detail
    # A deleted server is no marker any more (nova's, too).
    assert store.delete_server("acme", ids[2])
    with pytest.raises(MarkerNotFound):
        store.list_servers("acme", marker=ids[2])


def test_a_tenant_never_sees_nor_deletes_another_tenants_server(store):
    mine = store.create_server("tenant-a", "a1")
    theirs = store.create_server("tenant-b", "b1")
    assert store.list_servers("tenant-a") == [mine]
    assert store.list_servers("tenant-b") == [theirs]
    assert store.get_server("tenant-a", theirs["id"]) is None
    assert store.delete_server("tenant-a", theirs["id"]) is False
    assert store.get_server("tenant-b", theirs["id"]) == theirs
    assert store.list_servers("tenant-c") == []


def test_tenant_ids_are_case_sensitive(store):
    upper = store.create_server("Acme", "upper")
    lower = store.create_server("acme", "lower")
    assert store.list_servers("Acme") == [upper]
    assert store.list_servers("acme") == [lower]
    assert store.list_servers("ACME") == []
    assert store.get_server("ACME", upper["id"]) is None
    assert store.delete_server("acme", upper["id"]) is False
    assert store.get_server("Acme", upper["id"]) == upper


@pytest.mark.parametrize(("owner", "other"), [("acme", "acme "), ("acme ", "acme"), ("ß", "ss"), ("\u00e9", "e\u0301")])
def test_tenant_ids_compare_exactly(store, owner, other):
    # MariaDB's utf8mb4_bin is PAD SPACE ('acme' = 'acme '), and accent- or
    # case-folding collations equate the others; each pair is two tenants.
    server = store.create_server(owner, "web1")
    assert store.list_servers(other) == []
    assert store.get_server(other, server["id"]) is None
    assert store.delete_server(other, server["id"]) is False
    assert store.list_servers(owner) == [server]


@pytest.mark.parametrize(
    ("tenant_id", "name"),
    [
        ("∑∞∆∏", "∑∞∆∏ server"),
        ("Bob's Tenant", 'Bob\'s "quoted" server'),
        ("resel1:sub2:acct3", "colons: a:b:c"),
        ("resel1\\sub2\\acct3", "back\\slash"),
        ("emoji-😀", "😀 four-byte UTF-8"),
        ("100% _off %s %d", "percent signs stay literal: %s %d %2F"),
        ("'; DROP TABLE servers; --", "Robert'); DROP TABLE servers;--"),
    ],
)
def test_utf8_tenant_ids_and_names_round_trip(store, tenant_id, name):
    server = store.create_server(tenant_id, name)
    (listed,) = store.list_servers(tenant_id)
    assert listed["tenant_id"] == tenant_id
    assert listed["name"] == name
    assert store.get_server(tenant_id, server["id"]) == listed


@pytest.mark.parametrize("char", ["a", "∑", "😀"], ids=["ascii", "3-byte", "4-byte"])
def test_255_character_tenant_ids_and_names_fit(store, char):
    tenant_id = char * 255
    name = char * 255
    server = store.create_server(tenant_id, name)
    (listed,) = store.list_servers(tenant_id)
    assert listed == server
    assert len(listed["tenant_id"]) == 255
    assert len(listed["name"]) == 255
    # A 254-character prefix is another tenant: nothing was cut to fit.
    assert store.list_servers(char * 254) == []


@pytest.mark.parametrize(
    ("tenant_id", "rule"),
    [("a" * 256, "too-long"), ("", "empty"), ("a/b", "slash"), ("a\x00b", "control-character"), (None, "not-a-string")],
)
def test_invalid_tenant_ids_are_refused(store, tenant_id, rule):
    with pytest.raises(InvalidTenantId) as caught:
        store.create_server(tenant_id, "web1")
    assert caught.value.rule == rule
    with pytest.raises(InvalidTenantId):
        store.list_servers(tenant_id)


@pytest.mark.parametrize("name", ["", "   ", "x" * 256, None, 5, ["web1"], "a\x00b", "line\nbreak", "\ud800"])
def test_invalid_names_are_refused(store, name):
    with pytest.raises(InvalidName) as caught:
        store.create_server("acme", name)
    assert caught.value.value == name
    assert store.list_servers("acme") == []


# A uuid the store never handed out, fixed so the test's id is the same on every collection: as
# the store writes ids (lower case), which reaches the query, and in upper case, which does not.
UNKNOWN_UUID = "7e0c3e1a-9d43-4f55-a2b4-1c8e5f6a9b30"


@pytest.mark.parametrize("server_id", ["nope", "", "x" * 300, "'", UNKNOWN_UUID, UNKNOWN_UUID.upper(), None])
def test_unknown_or_malformed_server_ids_are_not_found(store, server_id):
    store.create_server("acme", "web1")
    assert store.get_server("acme", server_id) is None
    assert store.delete_server("acme", server_id) is False
    assert len(store.list_servers("acme")) == 1


def test_a_second_store_uses_the_existing_table(database_url):
    first = ServerStore(database_url)
    server = first.create_server("acme", "web1")
    second = ServerStore(database_url)
    try:
        assert second.list_servers("acme") == [server]
    finally:
        first.close()
        second.close()


def test_sqlite_file_uses_wal_and_gets_its_folder(tmp_path):
    path = tmp_path / "state" / "deeper" / "demo.sqlite"
    store = ServerStore(sqlite_url(path))
    try:
        store.create_server("acme", "web1")
        assert path.is_file()
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:  # a with block alone does not close it
        assert conn.execute("SELECT tenant_id, name FROM servers").fetchall() == [("acme", "web1")]


def test_mariadb_columns_compare_exactly_whatever_the_database_default(mariadb_url):
    empty_servers_table(mariadb_url)
    store = ServerStore(mariadb_url)
    engine = sa.create_engine(mariadb_url)
    try:
        with engine.connect() as conn:
            default = conn.execute(sa.text("SELECT @@collation_database")).scalar()
            query = sa.text(
                "SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'servers'"
                " AND COLUMN_NAME IN ('id', 'tenant_id', 'name')"
            )
            columns = {column: collation for column, collation in conn.execute(query)}
        assert default != "utf8mb4_nopad_bin"  # the session database keeps the server's default
        assert columns == {"id": "utf8mb4_nopad_bin", "tenant_id": "utf8mb4_nopad_bin", "name": "utf8mb4_nopad_bin"}
    finally:
        store.close()
        engine.dispose()


def test_mariadb_store_refuses_a_table_that_folds_case(mariadb_url):
    engine = sa.create_engine(mariadb_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS servers"))
            conn.execute(
                sa.text(
                    "CREATE TABLE servers (id VARCHAR(36) PRIMARY KEY,"
                    " tenant_id VARCHAR(255) NOT NULL, name VARCHAR(255) NOT NULL, created DATETIME NOT NULL)"
                    " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
                )
            )
        with pytest.raises(RuntimeError, match="utf8mb4_general_ci"):
            ServerStore(mariadb_url)
    finally:
        with engine.begin() as conn:
            # The next store makes the table right again.
            conn.execute(sa.text("DROP TABLE IF EXISTS servers"))
        engine.dispose()
