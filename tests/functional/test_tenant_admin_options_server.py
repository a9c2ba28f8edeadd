"""tenant_admin's representation options over HTTP, through the demo's admin pipeline under gunicorn.

``representations = false`` (GET answers 204, a second PUT 409) and
``updatable = false`` (a PUT that changes the representation is 409), set
as the demo's settings let an operator set them: ``[tenant_admin]`` of
tenancy_mw_demo.conf, here overridden by oslo.config's environment
variables ``OS_TENANT_ADMIN__REPRESENTATIONS=false`` /
``OS_TENANT_ADMIN__UPDATABLE=false`` (and ``version_discovery`` off, so a
GET shows the representation alone).  On each
backend, one admin server per option variant for the module, with one
worker: these options act per request, not across processes.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import require
from tests.functional.conftest import (
    BACKENDS,
    DEMO_INI,
    EXAMPLES_DIR,
    demo_server_env,
    migrated_registry,
    sqlite_url,
)
from tests.support import databases
from tests.support.registry import registry_snapshot
from tests.support.servers import GunicornServer


@pytest.fixture(scope="module", params=BACKENDS)
def database_url(request, tmp_path_factory):
    """A database per backend for the module: a SQLite file, or a fresh PostgreSQL/MariaDB database."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path_factory.mktemp("options") / "demo.sqlite")
        return
    made = databases.server_database(request.param, require)
    yield next(made)
    made.close()


@pytest.fixture(scope="module")
def start_admin(database_url, tmp_path_factory):
    started = []

    def _start(**overrides):
        tmp = tmp_path_factory.mktemp("options")
        registry_url = migrated_registry(database_url, tmp)
        env = demo_server_env(database_url, registry_url, tmp)
        for key, value in overrides.items():
            env["OS_TENANT_ADMIN__" + key.upper()] = value
        server = GunicornServer(DEMO_INI, name="admin", workers=1, env=env, cwd=EXAMPLES_DIR, log_dir=tmp)
        started.append(server)
        server.start()
        server.registry_url = registry_url
        return server

    yield _start
    for server in started:
        server.stop()


def put(server, target, document):
    return server.request("PUT", target, {"Content-Type": "application/json"}, json.dumps(document).encode())


def test_representations_off_get_is_204_and_a_second_put_409(start_admin):
    admin = start_admin(representations="false", version_discovery="false")
    tenant = "no-repr-" + uuid.uuid4().hex[:8]
    created = put(admin, "/v2.1/" + tenant, {"tier": "gold"})
    assert created.status == 201
    assert created.body == b""
    shown = admin.request("GET", "/v2.1/" + tenant)
    assert shown.status == 204
    assert shown.body == b""
    assert shown.headers["x-tenant-state"] == "active"
    assert shown.headers["etag"] == created.headers["etag"]
    assert admin.request("HEAD", "/v2.1/" + tenant).status == 204
    before = registry_snapshot(admin.registry_url)
    again = put(admin, "/v2.1/" + tenant, {"tier": "gold"})
    assert again.status == 409
    assert json.loads(again.body)["errors"][0]["code"] == "tenancy.tenant-exists"
    assert registry_snapshot(admin.registry_url) == before
    assert admin.request("DELETE", "/v2.1/" + tenant).status == 204
    assert admin.request("POST", "/v2.1/%s/action/restore" % tenant).status == 204


def test_not_updatable_put_that_changes_is_409(start_admin):
    admin = start_admin(updatable="false", version_discovery="false")
    tenant = "fixed-" + uuid.uuid4().hex[:8]
    assert put(admin, "/v2.1/" + tenant, {"tier": "gold"}).status == 201
    assert put(admin, "/v2.1/" + tenant, {"tier": "gold"}).status == 202  # the same PUT again: idempotent
    before = registry_snapshot(admin.registry_url)
    refused = put(admin, "/v2.1/" + tenant, {"tier": "silver"})
    assert refused.status == 409
    assert json.loads(refused.body)["errors"][0]["code"] == "tenancy.tenant-not-updatable"
    assert registry_snapshot(admin.registry_url) == before
    assert json.loads(admin.request("GET", "/v2.1/" + tenant).body) == {"tier": "gold"}
