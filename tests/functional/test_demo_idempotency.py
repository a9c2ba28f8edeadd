"""The demo's idempotency filter through examples/api-paste.ini under real gunicorn (2 workers)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import pytest

from tests.functional.conftest import (
    DEMO_INI,
    EXAMPLES_DIR,
    DemoClient,
    demo_server_env,
    empty_servers_table,
    migrated_registry,
    sqlite_url,
)
from tests.functional.test_demo_server import assert_error, stored_rows


def create(demo, tenant, name, token, header="X-Client-Token"):
    return demo.create(tenant, name, headers={header: token})


@pytest.fixture
def demo(demo):
    """The demo with the tenants these tests use."""
    demo.add_tenants("acme", "globex")
    return demo


def test_a_retried_create_makes_one_server_and_replays_the_first_answer(demo, demo_db):
    token = str(uuid.uuid4())
    first = create(demo, "acme", "web1", token)
    assert first.status == 201, first.body
    assert "idempotent-replayed" not in first.headers
    # Retries from several clients at once, landing on both workers.
    with ThreadPoolExecutor(6) as pool:
        retries = list(pool.map(lambda _: create(demo, "acme", "web1", token), range(12)))
    for retry in retries:
        assert retry.status == 201
        assert retry.body == first.body
        assert retry.headers["idempotent-replayed"] == "true"
        assert retry.headers["location"] == first.headers["location"]
        # request_id runs before idempotency: each answer has its own request id.
        assert retry.headers["x-openstack-request-id"] != first.headers["x-openstack-request-id"]
    assert stored_rows(demo_db) == [("acme", "web1")]
    # The store is the demo's own SQLite file, shared by both workers.
    with closing(sqlite3.connect(demo_db)) as conn:  # a with block alone does not close it
        assert conn.execute("SELECT COUNT(*) FROM tenancy_mw_idempotency").fetchone() == (1,)


def test_the_ietf_header_quoted_and_creates_without_a_token(demo, demo_db):
    token = str(uuid.uuid4())
    first = create(demo, "acme", "web1", '"%s"' % token, header="Idempotency-Key")
    again = create(demo, "acme", "web1", token)
    assert again.body == first.body
    assert again.headers["idempotent-replayed"] == "true"
    assert len(stored_rows(demo_db)) == 1
    # No token: untouched, every create runs.
    assert demo.create("acme", "web1").status == 201
    assert demo.create("acme", "web1").status == 201
    assert len(stored_rows(demo_db)) == 3


def test_a_token_reused_for_another_server_is_a_409(demo, demo_db):
    token = str(uuid.uuid4())
    create(demo, "acme", "web1", token)
    error = assert_error(create(demo, "acme", "web2", token), 409, token, "different request")
    assert error["code"] == "idempotency.token-reused"
    assert stored_rows(demo_db) == [("acme", "web1")]


def test_tenants_do_not_share_tokens(demo, demo_db):
    token = str(uuid.uuid4())
    acme = create(demo, "acme", "web1", token).json()["server"]
    globex = create(demo, "globex", "web1", token).json()["server"]
    assert acme["id"] != globex["id"]
    assert acme["tenant_id"] == "acme"
    assert globex["tenant_id"] == "globex"
    assert stored_rows(demo_db) == [("acme", "web1"), ("globex", "web1")]


def test_bad_tokens_are_400_and_create_nothing(demo, demo_db):
    for token, rule in [("", "empty"), ("x" * 256, "too-long"), ("caf\u00e9", "not-printable-ascii"),
                        ('"unterminated', "bad-quoting")]:
        response = demo.create("acme", "web1", headers={"X-Client-Token": token.encode().decode("latin-1")})
        error = assert_error(response, 400, "X-Client-Token")
        assert error["code"] == "idempotency.invalid-token." + rule
    assert stored_rows(demo_db) == []


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_the_store_follows_the_demo_to_a_database_server(request, start_demo, backend):
    url = request.getfixturevalue(backend + "_url")
    empty_servers_table(url)
    demo = start_demo(url)
    demo.add_tenants("acme")
    token = str(uuid.uuid4())
    first = create(demo, "acme", "web1", token)
    again = create(demo, "acme", "web1", token)
    assert first.status == 201
    assert again.body == first.body
    assert again.headers["idempotent-replayed"] == "true"
    assert [s["name"] for s in demo.list("acme").json()["servers"]] == ["web1"]


def test_memcached_by_config(serve_paste, memcached_server, tmp_path):
    """The demo's settings file with its two commented memcached lines switched on (api-paste.ini unchanged)."""
    with open(os.path.join(EXAMPLES_DIR, "tenancy_mw_demo.conf"), encoding="utf-8") as handle:
        text = handle.read()
    assert "backend = sql\n" in text
    text = text.replace("backend = sql\n", "backend = memcached\nmemcached_servers = %s\n" % memcached_server.address)
    (tmp_path / "tenancy_mw_demo.conf").write_text(text, encoding="utf-8")
    # Its [DEFAULT] names the settings file beside it: this copy's.
    shutil.copy(DEMO_INI, tmp_path / "api-paste.ini")
    ini = tmp_path / "api-paste.ini"
    database_url = sqlite_url(tmp_path / "demo.sqlite")
    registry_url = migrated_registry(database_url, tmp_path)
    server = serve_paste(str(ini), workers=2, cwd=EXAMPLES_DIR,
                         env=demo_server_env(database_url, registry_url, tmp_path))
    DemoClient(server, registry_url).add_tenants("acme")
    token = str(uuid.uuid4())
    body = json.dumps({"server": {"name": "web1"}}).encode()
    headers = {"X-Client-Token": token, "Content-Type": "application/json"}
    first = server.request("POST", "/v2.1/acme/servers", headers, body)
    again = server.request("POST", "/v2.1/acme/servers", headers, body)
    assert first.status == 201
    assert again.body == first.body
    assert again.headers["idempotent-replayed"] == "true"
    assert stored_rows(tmp_path / "demo.sqlite") == [("acme", "web1")]
