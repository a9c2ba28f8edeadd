"""The demo app in process: its paste pipeline, its configuration, strip_tenant and mounts.

Real parts throughout (the paste file, oslo.middleware's RequestId, the
tenant_path filter, a SQLite file); webtest only stands in for the socket.
The same app behind a real gunicorn is in test_demo_server.py.
"""

from __future__ import annotations

import pytest
import webtest
from demo_compute.app import DATABASE_URL_ENV, DemoCompute, app_factory
from demo_compute.storage import ServerStore
from oslo_middleware.request_id import RequestId
from paste.deploy import loadapp

from tenancy_mw import migrations
from tenancy_mw.admin_cull import AdminCull
from tenancy_mw.id_resolver import IdResolver
from tenancy_mw.idempotency import Idempotency
from tenancy_mw.tag_query import TagQueryFilter
from tenancy_mw.tenant_admin import TenantAdmin
from tenancy_mw.tenant_path import TenantPath
from tests.functional.conftest import DEMO_INI, sqlite_url


@pytest.fixture
def sqlite_store(tmp_path):
    """A store on a SQLite file of the test's own."""
    store = ServerStore(sqlite_url(tmp_path / "demo.sqlite"))
    yield store
    store.close()


def pipeline(store, **tenant_path_conf):
    """request_id, tenant_path, the demo: the pipeline of api-paste.ini, built in Python."""
    return webtest.TestApp(RequestId(TenantPath(DemoCompute(store), tenant_path_conf)))


def test_the_paste_file_builds_the_public_and_admin_pipelines(tmp_path, monkeypatch):
    db = tmp_path / "from-env.sqlite"
    monkeypatch.setenv(DATABASE_URL_ENV, sqlite_url(db))
    cells = {"cell1": sqlite_url(tmp_path / "c1.sqlite"), "cell2": sqlite_url(tmp_path / "c2.sqlite")}
    monkeypatch.setenv("TENANCY_DEMO_CELLS", ", ".join("%s=%s" % item for item in cells.items()))
    registry_url = sqlite_url(tmp_path / "tenants.sqlite")
    migrations.upgrade(registry_url, ["tenants"])
    # What gunicorn's --paste-global passes: it wins over the file's [DEFAULT].
    overrides = {"registry_url": registry_url, "tenant_cache_ttl": "0"}
    app = loadapp("config:" + DEMO_INI, global_conf=overrides)
    assert isinstance(app, RequestId)
    assert isinstance(app.application, AdminCull)
    tenant_path = app.application.application
    assert isinstance(tenant_path, TenantPath)
    public_admin = tenant_path.application
    assert isinstance(public_admin, TenantAdmin)
    assert public_admin.admin_api is False
    assert public_admin.registry.engine.url.database == str(tmp_path / "tenants.sqlite")
    idempotency = public_admin.application
    assert isinstance(idempotency, Idempotency)
    # Its sql store lives in the app's database, the environment's included.
    assert idempotency.store.engine.url.database == str(db)
    tag_query = idempotency.application
    assert isinstance(tag_query, TagQueryFilter)
    id_resolver = tag_query.application
    assert isinstance(id_resolver, IdResolver)
    # The filter and the app look at the same cells, those of the environment.
    assert {name: str(engine.url) for name, engine in id_resolver.lookup.engines.items()} == cells
    assert {name: str(engine.url) for name, engine in id_resolver.application.cells_api.cells.engines.items()} == cells
    demo = id_resolver.application
    assert isinstance(demo, DemoCompute)
    # The environment variable won over the file's database_url.
    assert demo.store.engine.url.database == str(db)

    admin = loadapp("config:" + DEMO_INI, name="admin", global_conf=overrides)
    assert isinstance(admin, RequestId)
    assert isinstance(admin.application, TenantPath)
    assert isinstance(admin.application.application, TagQueryFilter)
    admin_filter = admin.application.application.application
    assert isinstance(admin_filter, TenantAdmin)
    assert admin_filter.admin_api is True
    assert admin_filter.cache.ttl == 0
    assert type(admin_filter.provider).__name__ == "ServerMoves"
    assert isinstance(admin_filter.application, DemoCompute)

    client = webtest.TestApp(app)
    admin_client = webtest.TestApp(admin)
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=404)
    admin_client.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=201)
    assert [s["name"] for s in client.get("/v2.1/acme/servers").json["servers"]] == ["web1"]
    # os-services names no tenant: it is neither checked nor taken for one.
    assert len(client.get("/v2.1/os-services").json["services"]) == 5
    # The public endpoint hides the tenant admin API.
    assert client.delete("/v2.1/acme", status=404).json["errors"][0]["code"] == "tenancy.not-found"
    client.post("/v2.1/acme/action/move?dest=other", status=404)
    client.post("/v2.1/acme/action/restore", status=404)
    assert admin_client.get("/v2.1/acme").json == {"tier": "gold"}
    assert db.is_file()
    # Everything the two pipelines opened, closed (tests/support/leaks.py fails a test that leaves any).
    for service in (demo, admin_filter.application):
        service.store.close()
        service.cells_api.cells.close()
    id_resolver.lookup.close()
    idempotency.store.close()
    public_admin.close()
    admin_filter.close()


def test_database_url_of_the_section_is_relative_to_the_paste_file(tmp_path, monkeypatch):
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    app = app_factory({"here": str(tmp_path)}, database_url="sqlite:///state/demo.sqlite")
    try:
        assert app.store.engine.url.database == str(tmp_path / "state" / "demo.sqlite")
        assert (tmp_path / "state" / "demo.sqlite").is_file()
    finally:
        app.store.close()


def test_an_empty_environment_variable_does_not_override(tmp_path, monkeypatch):
    monkeypatch.setenv(DATABASE_URL_ENV, "")
    app = app_factory({"here": str(tmp_path)}, database_url=sqlite_url(tmp_path / "ini.sqlite"))
    try:
        assert app.store.engine.url.database == str(tmp_path / "ini.sqlite")
    finally:
        app.store.close()


def test_an_unknown_option_is_refused(tmp_path):
    with pytest.raises(ValueError, match="databse_url"):
        app_factory({"here": str(tmp_path)}, databse_url="sqlite://")


@pytest.mark.parametrize("strip_tenant", ["false", "true"])
def test_the_app_answers_the_same_whether_tenant_path_strips_the_tenant_or_not(sqlite_store, strip_tenant):
    client = pipeline(sqlite_store, strip_tenant=strip_tenant)
    created = client.post_json("/v2.1/Bob's%20Tenant/servers", {"server": {"name": "web1"}}, status=201)
    server = created.json["server"]
    assert server["tenant_id"] == "Bob's Tenant"
    link = "http://localhost/v2.1/Bob's%20Tenant/servers/" + server["id"]
    assert server["links"] == [{"rel": "self", "href": link}]
    assert created.headers["Location"] == link
    assert client.get("/v2.1/Bob's%20Tenant/servers").json["servers"] == [server]
    assert client.get("/v2.1/Bob's%20Tenant/servers/" + server["id"]).json["server"] == server
    client.get("/v2.1/acme/servers/" + server["id"], status=404)
    client.delete("/v2.1/Bob's%20Tenant/servers/" + server["id"], status=204)
    client.get("/v2.1/Bob's%20Tenant/servers/" + server["id"], status=404)


def test_links_keep_the_mount_point(sqlite_store):
    client = pipeline(sqlite_store)
    created = client.post_json(
        "/v2.1/acme/servers", {"server": {"name": "web1"}}, extra_environ={"SCRIPT_NAME": "/compute"}, status=201
    )
    assert created.headers["Location"].startswith("http://localhost/compute/v2.1/acme/servers/")
    versions = client.get("/", extra_environ={"SCRIPT_NAME": "/compute"}).json
    assert versions["versions"][0]["links"][0]["href"] == "http://localhost/compute/v2.1/"


def test_without_tenant_path_the_servers_urls_say_it_must_run_first(sqlite_store):
    client = webtest.TestApp(RequestId(DemoCompute(sqlite_store)))
    answer = client.get("/v2.1/acme/servers", status=400)
    (error,) = answer.json["errors"]
    assert error["code"] == "demo.no-tenant"
    assert "tenant_path filter must run before" in error["detail"]
    assert error["request_id"] == answer.headers["x-openstack-request-id"]
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=400)
    assert sqlite_store.list_servers("acme") == []
    # The version documents need no tenant.
    assert client.get("/v2.1").json["version"]["id"] == "v2.1"


def test_a_tenant_path_with_another_version_pattern_is_a_400_not_a_guess(sqlite_store):
    # Mounted at /compute: tenant_path takes 'compute' for the version and
    # 'v2.1' for the tenant; the app routes on v2.1 and tenant 'acme'.  They
    # disagree: refuse rather than pick one.
    client = pipeline(sqlite_store, version_pattern="compute")
    answer = client.get("/v2.1/acme/servers", extra_environ={"SCRIPT_NAME": "/compute"}, status=400)
    assert answer.json["errors"][0]["code"] == "demo.tenant-mismatch"
    client.post_json(
        "/v2.1/acme/servers", {"server": {"name": "web1"}}, extra_environ={"SCRIPT_NAME": "/compute"}, status=400
    )
    assert sqlite_store.list_servers("acme") == []
    assert sqlite_store.list_servers("v2.1") == []


def test_head_gets_headers_only(sqlite_store):
    client = pipeline(sqlite_store)
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=201)
    answer = client.head("/v2.1/acme/servers", status=200)
    assert answer.body == b""
    assert answer.content_type == "application/json"
