"""The demo's server ids compare exactly on SQLite, PostgreSQL and MariaDB: both endpoints under gunicorn.

MariaDB's default collations ignore case: a server id column declared
there without the library's exact collation
(:class:`tenancy_mw.core.sql.ExactString`) would take ``ABC...`` for
``abc...``.  Here a second server whose id is the first's in capitals is
put in the table (as a tool importing servers could), and every answer
must keep the two apart.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import sqlalchemy as sa

from tenancy_mw import migrations
from tests.functional.conftest import BACKENDS, sqlite_url
from tests.support.demo import serve_demo


@pytest.fixture(params=BACKENDS)
def database_url(request, tmp_path, make_database):
    """A fresh database for the demo's servers on each backend, its idempotency table made."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "demo.sqlite")
    url = make_database(request.param)
    migrations.upgrade(url, ["idempotency"])
    return url


def code_of(response) -> str:
    (error,) = response.json()["errors"]
    return error["code"]


def test_a_server_id_differing_only_in_case_is_another_server(tmp_path, database_url):
    environment = {"OS_DEMO_COMPUTE__DATABASE_URL": database_url, "OS_IDEMPOTENCY__CONNECTION": database_url}
    with serve_demo(tmp_path, environment=environment) as servers:
        public, admin = servers["public"], servers["admin"]
        assert admin.request("PUT", "/v2.1/acme", {"Content-Type": "application/json"}, b"{}").status == 201
        created = public.request(
            "POST", "/v2.1/acme/servers", {"Content-Type": "application/json"}, b'{"server": {"name": "web1"}}'
        )
        assert created.status == 201, created.body
        ident = created.json()["server"]["id"]
        other = ident.upper()
        engine = sa.create_engine(database_url)
        try:
            with engine.begin() as conn:
                # Refused as a duplicate key where the column folds case.
                conn.execute(
                    sa.text("INSERT INTO servers (id, tenant_id, name, created) VALUES (:id, 'acme', :name, :created)"),
                    {"id": other, "name": "imported", "created": datetime.now(timezone.utc).replace(tzinfo=None)},
                )
            shown = public.request("GET", "/v2.1/acme/servers/" + ident)
            assert (shown.status, shown.json()["server"]["name"]) == (200, "web1")
            for method in ("GET", "DELETE"):
                response = public.request(method, "/v2.1/acme/servers/" + other)
                assert (response.status, code_of(response)) == (404, "demo.server-not-found"), method
            assert public.request("GET", "/v2.1/acme/servers/" + ident).status == 200
            assert public.request("DELETE", "/v2.1/acme/servers/" + ident).status == 204
            # The deleted server's tombstone is its own: a move of it is 410, of the other id 404.
            move = "/v2.1/acme/servers/%s/action/move?dest=elsewhere"
            assert admin.request("PUT", "/v2.1/elsewhere", {"Content-Type": "application/json"}, b"{}").status == 201
            gone = admin.request("GET", move % ident)
            assert (gone.status, code_of(gone)) == (410, "tenancy.move-resource-deleted")
            unknown = admin.request("GET", move % other)
            assert (unknown.status, code_of(unknown)) == (404, "tenancy.move-resource-not-found")
            with engine.connect() as conn:
                rows = conn.execute(sa.text("SELECT id, name FROM servers")).all()
            assert [tuple(row) for row in rows] == [(other, "imported")]
        finally:
            engine.dispose()


def test_a_servers_table_of_an_older_demo_whose_ids_fold_case_is_refused_on_mariadb(make_database):
    from demo_compute.storage import ServerStore

    url = make_database("mariadb")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            # As the demo made it before its ids compared exactly: the database's default collation for id.
            conn.execute(
                sa.text(
                    "CREATE TABLE servers (id VARCHAR(36) PRIMARY KEY,"
                    " tenant_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,"
                    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,"
                    " created DATETIME NOT NULL) CHARACTER SET utf8mb4"
                )
            )
    finally:
        engine.dispose()
    with pytest.raises(RuntimeError, match=r"columns servers\.id use collation utf8mb4_.*convert them"):
        ServerStore(url)
