"""The demo app in process: its paste pipeline, its configuration, strip_tenant and mounts.

Real parts throughout (the paste file, oslo.middleware's RequestId, the
tenant_path filter, a SQLite file); webtest only stands in for the socket.
The same app behind a real gunicorn is in test_demo_server.py.
"""

from __future__ import annotations

import configparser
import os

import pytest
import webtest
from demo_compute import config
from demo_compute.app import DemoCompute, app_factory, close_pipeline
from demo_compute.openapi import OpenApiFilter
from demo_compute.storage import ServerStore
from oslo_middleware.request_id import RequestId
from paste.deploy import loadapp

from tenancy_mw import migrations
from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.idempotency import Idempotency
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tenants.admin_filter import TenantAdmin
from tenancy_mw.tenants.path_filter import TenantPath
from tests.functional.conftest import DEMO_INI, EXAMPLES_DIR, sqlite_url


@pytest.fixture
def sqlite_store(tmp_path):
    """A store on a SQLite file of the test's own."""
    store = ServerStore(sqlite_url(tmp_path / "demo.sqlite"))
    yield store
    store.close()


def pipeline(store, **tenant_path_conf):
    """request_id, tenant_path, the demo: the pipeline of api-paste.ini, built in Python."""
    return webtest.TestApp(RequestId(TenantPath(DemoCompute(store), tenant_path_conf)))


def chain(app):
    """The objects of a built pipeline, outermost first (each filter keeps the next in ``application``)."""
    found = [app]
    while hasattr(found[-1], "application"):
        found.append(found[-1].application)
    return found


def test_the_paste_file_builds_the_public_and_admin_pipelines(tmp_path, monkeypatch):
    db = tmp_path / "from-env.sqlite"
    cells = {"cell1": sqlite_url(tmp_path / "c1.sqlite"), "cell2": sqlite_url(tmp_path / "c2.sqlite")}
    registry_url = sqlite_url(tmp_path / "tenants.sqlite")
    migrations.upgrade(registry_url, ["tenants"])
    migrations.upgrade(sqlite_url(db), ["idempotency"])
    # oslo.config's environment source: it wins over tenancy_mw_demo.conf.
    monkeypatch.setenv("OS_DEMO_COMPUTE__DATABASE_URL", sqlite_url(db))
    monkeypatch.setenv("OS_IDEMPOTENCY__CONNECTION", sqlite_url(db))
    monkeypatch.setenv("OS_ID_RESOLVER__CELLS", ", ".join("%s=%s" % item for item in cells.items()))
    monkeypatch.setenv("OS_TENANT_ADMIN__CONNECTION", registry_url)
    monkeypatch.setenv("OS_TENANT_ADMIN__CACHE_TTL", "0")
    app = loadapp("config:" + DEMO_INI)
    public = chain(app)
    # request_id openapi admin_cull tenant_path tenant_admin(admin_api = false) idempotency tag_query id_resolver
    # demo_compute
    expected = [
        RequestId,
        OpenApiFilter,
        AdminCull,
        TenantPath,
        TenantAdmin,
        Idempotency,
        TagQueryFilter,
        IdResolver,
        DemoCompute,
    ]
    assert [type(part) for part in public] == expected
    _, _, _, _, public_admin, idempotency, tag_query, id_resolver, demo = public
    assert public_admin.admin_api is False
    assert public_admin.registry.engine.url.database == str(tmp_path / "tenants.sqlite")
    # Options of the settings file, not of api-paste.ini.
    assert idempotency.options.backend == "sql"
    assert idempotency.store.engine.url.database == str(db)
    assert tag_query.options.not_tags_semantics == "guideline"
    assert id_resolver.options.max_microversion == "2.53"
    # The filter and the app look at the same cells, those of the environment.
    assert {name: str(engine.url) for name, engine in id_resolver.lookup.engines.items()} == cells
    assert {name: str(engine.url) for name, engine in demo.cells_api.cells.engines.items()} == cells
    assert demo.store.engine.url.database == str(db)

    admin = loadapp("config:" + DEMO_INI, name="admin")
    admin_chain = chain(admin)
    # The same without admin_cull, tenant_admin serving the admin calls.
    assert [type(part) for part in admin_chain] == [kind for kind in expected if kind is not AdminCull]
    admin_filter = admin_chain[3]
    assert admin_filter.admin_api is True
    assert admin_filter.cache.ttl == 0
    assert type(admin_filter.provider).__name__ == "ServerMoves"
    assert admin_filter.provider.store is admin_chain[-1].store

    client = webtest.TestApp(app)
    admin_client = webtest.TestApp(admin)
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=404)
    admin_client.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    client.post_json("/v2.1/acme/servers", {"server": {"name": "web1"}}, status=201)
    assert [s["name"] for s in client.get("/v2.1/acme/servers").json["servers"]] == ["web1"]
    assert [s["name"] for s in admin_client.get("/v2.1/acme/servers").json["servers"]] == ["web1"]
    # os-services names no tenant: it is neither checked nor taken for one.
    assert len(client.get("/v2.1/os-services").json["services"]) == 5
    assert len(admin_client.get("/v2.1/os-services").json["services"]) == 5
    # The public endpoint hides the tenant admin API.
    assert client.delete("/v2.1/acme", status=404).json["errors"][0]["code"] == "tenancy.not-found"
    client.post("/v2.1/acme/action/move?dest=other", status=404)
    client.post("/v2.1/acme/action/restore", status=404)
    # The tenant's representation and, version_discovery being on in the
    # demo, the app's own /v2.1 document beside it.
    shown = admin_client.get("/v2.1/acme").json
    assert shown == {"tier": "gold", "version": client.get("/v2.1").json["version"]}
    assert db.is_file()
    # Everything the two pipelines opened, closed (tests/support/leaks.py fails a test that leaves any).
    close_pipeline(public[0])
    close_pipeline(admin_chain[0])


def test_api_paste_ini_holds_only_wiring():
    """Every option is in tenancy_mw_demo.conf; a paste section only names its filter (and which
    tenant_admin copy answers admin calls)."""
    paste = configparser.ConfigParser(interpolation=None)
    paste.read(DEMO_INI)
    options = {
        section: sorted(
            set(paste[section])
            - set(paste.defaults())
            - {"use", "paste.app_factory", "paste.filter_factory", "pipeline"}
        )
        for section in paste.sections()
    }
    assert options == {section: (["admin_api"] if "tenant_admin" in section else []) for section in paste.sections()}
    assert paste.defaults()["oslo_config_file"] == "%(here)s/tenancy_mw_demo.conf"


def test_the_settings_file_is_read_and_the_environment_wins(monkeypatch):
    for name in ("OS_DEMO_COMPUTE__DATABASE_URL", "OS_ID_RESOLVER__CELLS", "OS_DEMO_COMPUTE__MAX_LIMIT"):
        monkeypatch.delenv(name, raising=False)
    settings = config.load({"oslo_config_file": os.path.join(EXAMPLES_DIR, "tenancy_mw_demo.conf")})
    assert settings.demo_compute.database_url == "sqlite:///state/demo.sqlite"
    assert settings.demo_compute.max_limit == 1000
    assert settings.id_resolver.cells.startswith("cell1=sqlite:///state/cell1.sqlite")
    assert settings.tenant_admin.connection == "sqlite:///state/tenants.sqlite"
    assert settings.idempotency.backend == "sql"
    monkeypatch.setenv("OS_DEMO_COMPUTE__DATABASE_URL", "postgresql+psycopg2://root@127.0.0.1:5432/demo")
    assert config.load().demo_compute.database_url == "postgresql+psycopg2://root@127.0.0.1:5432/demo"
    monkeypatch.setenv("OS_DEMO_COMPUTE__MAX_LIMIT", "25")
    assert config.load().demo_compute.max_limit == 25
    monkeypatch.setenv("OS_DEMO_COMPUTE__MAX_LIMIT", "0")  # a page of nothing is no bound
    with pytest.raises(ValueError, match="max_limit"):
        config.load().demo_compute.max_limit  # noqa: B018


def test_relative_sqlite_paths_are_relative_to_the_working_folder(tmp_path, monkeypatch):
    for name in ("OS_DEMO_COMPUTE__DATABASE_URL", "OS_ID_RESOLVER__CELLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    app = app_factory({"oslo_config_file": os.path.join(EXAMPLES_DIR, "tenancy_mw_demo.conf")})
    try:
        assert (tmp_path / "state" / "demo.sqlite").is_file()
        assert (tmp_path / "state" / "cell1.sqlite").is_file()
        assert (tmp_path / "state" / "cell2.sqlite").is_file()
    finally:
        app.store.close()
        app.cells_api.cells.close()


def test_the_paste_section_wins_over_the_settings_file(tmp_path):
    app = app_factory({}, database_url=sqlite_url(tmp_path / "ini.sqlite"), cells="cell1=sqlite://")
    try:
        assert app.store.engine.url.database == str(tmp_path / "ini.sqlite")
        assert list(app.cells_api.cells.engines) == ["cell1"]
    finally:
        app.store.close()
        app.cells_api.cells.close()


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
    # The next link is the client's URL too, tenant segment and all.
    paged = client.get("/v2.1/Bob's%20Tenant/servers/detail?limit=1").json
    assert paged["servers_links"] == [
        {"rel": "next", "href": link.rsplit("/", 1)[0] + "/detail?limit=1&marker=" + server["id"]}
    ]
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
    paged = client.get("/v2.1/acme/servers?limit=1", extra_environ={"SCRIPT_NAME": "/compute"}).json
    (link,) = paged["servers_links"]
    assert link["href"] == "http://localhost/compute/v2.1/acme/servers?limit=1&marker=" + created.json["server"]["id"]
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


def test_the_version_document_at_a_projects_url_is_never_a_cells_collection(sqlite_store):
    """``/v2.1/{project_id}`` shows the version document (novaclient discovers there); without cells,
    ``/v2.1/os-services`` and ``/v2.1/os-hypervisors`` are still nothing, not a version document.
    """
    client = pipeline(sqlite_store)
    assert client.get("/v2.1/acme").json["version"]["version"] == "2.53"
    for name in ("os-services", "os-hypervisors"):
        assert client.get("/v2.1/" + name, status=404).json["errors"][0]["code"] == "demo.not-found"
