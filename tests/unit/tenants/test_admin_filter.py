"""tenant_admin in process: every admin call, the state check, moves, bad input, options.

A real SQLite registry (migrated with the library's own migrations) and a
real move provider (tests/support/widgets.py); webtest stands in for the
socket.  The same calls over HTTP through the demo's two pipelines, on all
three databases, are in tests/functional/test_tenant_admin_server.py.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

import pytest
import webtest

from tenancy_mw import migrations
from tenancy_mw.core.base import ConfigError
from tenancy_mw.tenants.admin_filter import TenantAdmin, parse_if_match
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.registry import TenantRegistry
from tests.support.registry import registry_snapshot
from tests.support.widgets import WidgetService

PROVIDER = "tests.support.widgets:WidgetMoves"


@pytest.fixture(scope="module")
def migrated_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry") / "template.sqlite"
    migrations.upgrade("sqlite:///%s" % path, ["tenants"])
    return path


@pytest.fixture
def registry_url(tmp_path, migrated_template):
    """A fresh, migrated SQLite registry for each test."""
    path = tmp_path / "tenants.sqlite"
    shutil.copy(migrated_template, path)
    return "sqlite:///%s" % path


#: Filters build() made in the running test, closed when it ends (_close_built).
BUILT: list[TenantAdmin] = []


@pytest.fixture(autouse=True)
def _close_built():
    yield
    while BUILT:
        BUILT.pop().close()


def build(registry_url, service=None, **options):
    service = service if service is not None else WidgetService()
    conf = {"connection": registry_url, "move_provider": PROVIDER}
    conf.update({k: str(v) for k, v in options.items()})
    admin = TenantAdmin(service, conf)
    BUILT.append(admin)
    return webtest.TestApp(TenantPath(admin, {})), admin, service


@pytest.fixture
def admin(registry_url):
    app, _, service = build(registry_url)
    app.service = service
    return app


def registry_rows(url):
    tenants, moves = registry_snapshot(url)
    return [(t[0], t[2], t[1], t[3]) for t in tenants], len(moves)


def error_code(response):
    (error,) = response.json["errors"]
    assert error["status"] == response.status_int
    return error["code"]


# Lifecycle -------------------------------------------------------------------


def test_put_get_head_delete_restore(admin):
    created = admin.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    assert created.json == {"tier": "gold"}
    assert created.headers["Location"] == "http://localhost:80/v2.1/acme"
    etag = created.headers["ETag"]
    assert etag.startswith('"')
    assert etag.endswith('"')

    shown = admin.get("/v2.1/acme", status=200)
    assert shown.json == {"tier": "gold"}
    assert shown.headers["ETag"] == etag
    assert shown.headers["X-Tenant-State"] == "active"
    head = admin.head("/v2.1/acme", status=204)
    assert head.body == b""
    for name in ("ETag", "Last-Modified", "X-Tenant-State", "X-Tenant-Created", "X-Tenant-Updated"):
        assert head.headers[name] == shown.headers[name], name

    modified = admin.put_json("/v2.1/acme", {"tier": "silver"}, status=202)
    assert modified.json == {"tier": "silver"}
    assert modified.headers["ETag"] != etag

    deleted = admin.delete("/v2.1/acme", status=204)
    assert deleted.headers["X-Tenant-State"] == "deleted"
    assert error_code(admin.get("/v2.1/acme", status=410)) == "tenancy.tenant-deleted"
    assert admin.head("/v2.1/acme", status=410).body == b""
    assert error_code(admin.delete("/v2.1/acme", status=410)) == "tenancy.tenant-deleted"
    assert error_code(admin.get("/v2.1/acme/widgets", status=410)) == "tenancy.tenant-deleted"
    assert error_code(admin.put_json("/v2.1/acme", {"tier": "x"}, status=409)) == "tenancy.tenant-deleted"

    restored = admin.post("/v2.1/acme/action/restore", status=200)
    assert restored.json == {"tier": "silver"}
    assert error_code(admin.post("/v2.1/acme/action/restore", status=409)) == "tenancy.tenant-not-deleted"
    admin.get("/v2.1/acme/widgets", status=200)


def test_unknown_tenant_is_404_everywhere(admin):
    for call in (
        lambda: admin.get("/v2.1/nobody", status=404),
        lambda: admin.head("/v2.1/nobody", status=404),
        lambda: admin.delete("/v2.1/nobody", status=404),
        lambda: admin.post("/v2.1/nobody/action/restore", status=404),
        lambda: admin.get("/v2.1/nobody/widgets", status=404),
        lambda: admin.post("/v2.1/nobody/action/move?dest=x", status=404),
    ):
        response = call()
        if response.request.method != "HEAD":
            assert error_code(response) == "tenancy.tenant-not-found"
    assert admin.service.calls == 0


def test_put_is_idempotent(admin, registry_url):
    admin.put_json("/v2.1/acme", {"b": 1, "a": [1, 2]}, status=201)
    before = registry_rows(registry_url)
    again = admin.put_json("/v2.1/acme", {"a": [1, 2], "b": 1}, status=202)
    assert registry_rows(registry_url) == before  # not even the revision moved
    assert again.json == {"a": [1, 2], "b": 1}


def test_empty_put_creates_an_empty_representation(admin):
    admin.put("/v2.1/acme", status=201)
    assert admin.get("/v2.1/acme").json == {}


def test_tenant_ids_compare_exactly(admin):
    admin.put_json("/v2.1/acme", {"n": 1}, status=201)
    admin.get("/v2.1/ACME", status=404)
    admin.get("/v2.1/acme%20", status=404)
    admin.put_json("/v2.1/acme%20", {"n": 2}, status=201)
    assert admin.get("/v2.1/acme").json == {"n": 1}
    assert admin.get("/v2.1/acme%20").json == {"n": 2}
    admin.get("/v2.1/%E2%88%91", status=404)
    admin.put_json("/v2.1/%E2%88%91", {"n": "∑"}, status=201)
    assert admin.get("/v2.1/%E2%88%91").json == {"n": "∑"}


def test_wrong_methods_are_405_with_allow(admin):
    admin.put_json("/v2.1/acme", {}, status=201)
    response = admin.post("/v2.1/acme", status=405)
    assert response.headers["Allow"] == "DELETE, GET, HEAD, PUT"
    assert admin.get("/v2.1/acme/action/restore", status=405).headers["Allow"] == "POST"
    assert admin.delete("/v2.1/acme/action/move?dest=b", status=405).headers["Allow"] == "GET, HEAD, POST"


# Bad input -------------------------------------------------------------------

BAD_BODIES = [
    ("malformed JSON", b"{bad", "application/json", 400, "tenancy.representation-not-json"),
    ("not UTF-8", b'{"a": "\xff"}', "application/json", 400, "tenancy.representation-not-json"),
    ("too deep", b"[" * 60000, "application/json", 400, "tenancy.representation-not-json"),
    ("NaN", b'{"a": NaN}', "application/json", 400, "tenancy.representation-not-json"),
    ("repeated key", b'{"a": 1, "a": 2}', "application/json", 400, "tenancy.representation-not-json"),
    ("a list", b"[1, 2]", "application/json", 400, "tenancy.representation-not-an-object"),
    ("a string", b'"gold"', "application/json", 400, "tenancy.representation-not-an-object"),
    ("huge", b'{"a": "' + b"x" * 70000 + b'"}', "application/json", 413, "tenancy.representation-too-large"),
    ("not JSON type", b'{"a": 1}', "text/plain", 415, "tenancy.representation-not-json"),
]


@pytest.mark.parametrize(
    ("what", "body", "content_type", "status", "code"), BAD_BODIES, ids=[case[0] for case in BAD_BODIES]
)
def test_bad_bodies_are_4xx_and_leave_the_registry_unchanged(
    admin, registry_url, what, body, content_type, status, code
):
    admin.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    before = registry_rows(registry_url)
    for tenant in ("acme", "newcomer"):
        response = admin.put("/v2.1/%s" % tenant, body, headers={"Content-Type": content_type}, status=status)
        assert error_code(response) == code
    assert registry_rows(registry_url) == before


def test_bad_body_errors_name_the_value(admin):
    detail = admin.put("/v2.1/acme", b"[1, 2]", headers={"Content-Type": "application/json"}, status=400).json[
        "errors"
    ][0]["detail"]
    assert "[1, 2]" in detail
    assert "JSON object" in detail
    detail = admin.put("/v2.1/acme", b"{bad", headers={"Content-Type": "application/json"}, status=400).json["errors"][
        0
    ]["detail"]
    assert "{bad" in detail


def test_invalid_tenant_ids_are_400(admin, registry_url):
    # (Encoded slashes need the raw target of a real server: see the functional tests.)
    for target, code in (
        ("/v2.1/" + "a" * 256, "tenancy.invalid-tenant-id.too-long"),
        ("/v2.1/a%252Fb", "tenancy.bad-path.double-encoding"),
        ("/v2.1/a%01b", "tenancy.bad-path.control-character"),
    ):
        assert error_code(admin.put_json(target, {}, status=400)) == code
    assert registry_rows(registry_url) == ([], 0)


def test_a_lone_surrogate_in_a_representation_is_kept_safely(admin):
    admin.put("/v2.1/acme", b'{"a": "\\ud800"}', headers={"Content-Type": "application/json"}, status=201)
    assert admin.get("/v2.1/acme").json == {"a": "\ud800"}


# Options -------------------------------------------------------------------


def test_representations_off(registry_url):
    app, _, _ = build(registry_url, representations=False)
    created = app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    assert created.body == b""
    shown = app.get("/v2.1/acme", status=204)
    assert shown.body == b""
    assert shown.headers["ETag"]
    assert error_code(app.put_json("/v2.1/acme", {}, status=409)) == "tenancy.tenant-exists"


def test_not_updatable(registry_url):
    app, _, _ = build(registry_url, updatable=False)
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=202)  # the same PUT again is fine
    assert error_code(app.put_json("/v2.1/acme", {"tier": "x"}, status=409)) == "tenancy.tenant-not-updatable"
    assert app.get("/v2.1/acme").json == {"tier": "gold"}


def test_public_copy_answers_no_admin_call_and_checks_states(registry_url):
    admin_app, _, _ = build(registry_url)
    public, _, service = build(registry_url, admin_api=False)
    admin_app.put_json("/v2.1/acme", {}, status=201)
    # Admin calls are the service's business on a public endpoint (admin_cull culls them before).
    public.put_json("/v2.1/acme", {"x": 1}, status=404)
    assert service.calls == 1
    assert admin_app.get("/v2.1/acme").json == {}
    public.get("/v2.1/acme/widgets", status=200)
    assert error_code(public.get("/v2.1/other/widgets", status=404)) == "tenancy.tenant-not-found"


def test_state_check_can_be_turned_off(registry_url):
    app, _, service = build(registry_url, check_tenant_state=False)
    app.get("/v2.1/nobody/widgets", status=200)
    assert service.calls == 1


def test_other_workers_see_a_delete_within_the_cache_ttl(registry_url):
    # Two filter instances are two worker processes' caches.
    worker_a, _, _ = build(registry_url, cache_ttl=0.5)
    worker_b, _, _ = build(registry_url, cache_ttl=0.5)
    worker_a.put_json("/v2.1/acme", {}, status=201)
    worker_b.get("/v2.1/acme/widgets", status=200)  # b caches "active"
    worker_a.delete("/v2.1/acme", status=204)
    worker_a.get("/v2.1/acme/widgets", status=410)  # a knows at once
    worker_b.get("/v2.1/acme/widgets", status=200)  # b still has it cached
    time.sleep(0.6)
    worker_b.get("/v2.1/acme/widgets", status=410)


def test_cache_ttl_zero_reads_every_time(registry_url):
    worker_a, _, _ = build(registry_url, cache_ttl=0)
    worker_b, _, _ = build(registry_url, cache_ttl=0)
    worker_a.put_json("/v2.1/acme", {}, status=201)
    worker_b.get("/v2.1/acme/widgets", status=200)
    worker_a.delete("/v2.1/acme", status=204)
    worker_b.get("/v2.1/acme/widgets", status=410)


def test_registry_down_is_503_not_500(tmp_path):
    app, _, service = build("sqlite:///%s" % (tmp_path / "never-migrated.sqlite"))
    assert error_code(app.get("/v2.1/acme/widgets", status=503)) == "tenancy.registry-unavailable"
    assert error_code(app.put_json("/v2.1/acme", {}, status=503)) == "tenancy.registry-unavailable"
    assert service.calls == 0


@pytest.mark.parametrize(
    ("conf", "fragment"),
    [
        ({}, "connection"),
        ({"connection": "not a url"}, "connection"),
        ({"connection": "sqlite://", "move_provider": "no.such.module:X"}, "move_provider"),
        ({"connection": "sqlite://", "move_provider": "builtins:repr"}, "MoveProvider"),
        ({"connection": "sqlite://", "move_provider": "tests.support.widgets:WidgetService"}, "takes 1"),
        ({"connection": "sqlite://", "cache_ttl": "-1"}, "cache_ttl"),
        ({"connection": "sqlite://", "version_pattern": "v("}, "version_pattern"),
        ({"connection": "sqlite://", "admin_api": "perhaps"}, "admin_api"),
        ({"connection": "sqlite://", "state_memcached_servers": "cache1"}, "state_memcached_servers"),
        ({"connection": "sqlite://", "state_memcached_servers": "cache1:0"}, "state_memcached_servers"),
        ({"connection": "sqlite://", "state_store_timeout": "0"}, "state_store_timeout"),
        ({"connection": "sqlite://", "on_state_store_error": "fail_maybe"}, "on_state_store_error"),
    ],
)
def test_bad_options_fail_at_load(conf, fragment):
    with pytest.raises(ConfigError) as caught:
        TenantAdmin(WidgetService(), conf)
    assert fragment in str(caught.value)
    assert "tenant_admin" in str(caught.value)


def test_provider_factory_by_dotted_path(registry_url):
    _, admin, service = build(registry_url, move_provider="tests.support.widgets.widget_moves_factory")
    assert admin.provider.service is service


def test_if_match_parsing():
    assert parse_if_match("*") == ["*"]
    assert parse_if_match(' "a" ,"b"') == ['"a"', '"b"']
    for garbage in ("a", '"a', '"a" "b"', '"a",', "W/a", '"a"b"', ""):
        assert parse_if_match(garbage) is None, garbage


# Moves ---------------------------------------------------------------------


@pytest.fixture
def two_tenants(admin):
    admin.put_json("/v2.1/src", {"tier": "gold"}, status=201)
    admin.put_json("/v2.1/dst", {"tier": "gold"}, status=201)
    admin.put("/v2.1/src/widgets/w1", status=201)
    admin.put("/v2.1/src/widgets/w2", status=201)
    return admin


def test_move_a_resource_then_301s(two_tenants, registry_url):
    admin = two_tenants
    action = admin.get("/v2.1/src/widgets/w1/action/move?dest=dst", status=200)
    document = action.json["move"]
    assert document["resource"]["path"] == "widgets/w1"
    assert document["source"]["id"] == "src"
    assert document["destination"]["id"] == "dst"
    moved = admin.post(
        "/v2.1/src/widgets/w1/action/move?dest=dst", headers={"If-Match": action.headers["ETag"]}, status=303
    )
    assert moved.headers["Location"] == "http://localhost:80/v2.1/dst/widgets/w1"
    admin.get("/v2.1/dst/widgets/w1", status=200)
    old = admin.get("/v2.1/src/widgets/w1?x=1", status=301)
    assert old.headers["Location"] == "http://localhost:80/v2.1/dst/widgets/w1?x=1"
    again = admin.post("/v2.1/src/widgets/w1/action/move?dest=dst", status=301)
    assert again.headers["Location"] == "http://localhost:80/v2.1/dst/widgets/w1/action/move?dest=dst"
    # Moving it back drops the old record: no redirect loop.
    admin.post("/v2.1/dst/widgets/w1/action/move?dest=src", status=303)
    admin.get("/v2.1/src/widgets/w1", status=200)
    assert admin.get("/v2.1/dst/widgets/w1", status=301).headers["Location"].endswith("/v2.1/src/widgets/w1")
    assert registry_rows(registry_url)[1] == 1


def test_move_errors(two_tenants, registry_url):
    admin = two_tenants
    admin.put_json("/v2.1/gone", {}, status=201)
    admin.delete("/v2.1/gone", status=204)
    admin.delete("/v2.1/src/widgets/w2", status=204)
    before = registry_rows(registry_url)
    base = "/v2.1/src/widgets/w1/action/move"
    for query, status, code in (
        ("", 400, "tenancy.move-missing-dest"),
        ("?other=1", 400, "tenancy.move-missing-dest"),
        ("?dest=", 400, "tenancy.move-invalid-dest.empty"),
        ("?dest=" + "a" * 256, 400, "tenancy.move-invalid-dest.too-long"),
        ("?dest=a%2Fb", 400, "tenancy.move-invalid-dest.slash"),
        ("?dest=a%00b", 400, "tenancy.move-invalid-dest.control-character"),
        ("?dest=%FF", 400, "tenancy.move-bad-query"),
        ("?dest=dst&dest=src", 400, "tenancy.move-repeated-dest"),
        ("?dest=src", 400, "tenancy.move-same-tenant"),
        ("?dest=nobody", 404, "tenancy.move-destination-not-found"),
        ("?dest=gone", 409, "tenancy.move-destination-deleted"),
    ):
        for method in ("GET", "POST"):
            response = admin.request(base + query, method=method, status=status)
            assert error_code(response) == code, (query, method)
    assert (
        error_code(admin.post("/v2.1/src/widgets/nope/action/move?dest=dst", status=404))
        == "tenancy.move-resource-not-found"
    )
    assert (
        error_code(admin.get("/v2.1/src/things/x/action/move?dest=dst", status=404))
        == "tenancy.move-resource-not-found"
    )
    assert (
        error_code(admin.post("/v2.1/src/widgets/w2/action/move?dest=dst", status=410))
        == "tenancy.move-resource-deleted"
    )
    assert error_code(admin.get("/v2.1/gone/widgets/w2/action/move?dest=dst", status=410)) == "tenancy.tenant-deleted"
    for garbage in ("abc", '"unterminated', "W/abc", '"a" "b"'):
        response = admin.post(base + "?dest=dst", headers={"If-Match": garbage}, status=400)
        assert error_code(response) == "tenancy.bad-if-match"
    assert registry_rows(registry_url) == before
    assert ("src", "w1") in admin.service.widgets


def test_conditional_move_412_when_anything_changed(two_tenants):
    admin = two_tenants
    url = "/v2.1/src/widgets/w1/action/move?dest=dst"
    etag = admin.get(url).headers["ETag"]
    admin.put("/v2.1/src/widgets/w1", status=201)  # the widget changes
    stale = admin.post(url, headers={"If-Match": etag}, status=412)
    assert error_code(stale) == "tenancy.move-precondition-failed"
    assert stale.headers["ETag"] == admin.get(url).headers["ETag"] != etag
    etag = admin.get(url).headers["ETag"]
    admin.put_json("/v2.1/dst", {"tier": "bronze"}, status=202)  # the destination changes
    admin.post(url, headers={"If-Match": etag}, status=412)
    admin.post(url, headers={"If-Match": "W/" + admin.get(url).headers["ETag"]}, status=412)
    admin.post(url, headers={"If-Match": '"x", ' + admin.get(url).headers["ETag"]}, status=303)
    assert ("dst", "w1") in admin.service.widgets


def test_move_refused_by_the_provider(registry_url):
    app, filter_, service = build(registry_url)
    app.put_json("/v2.1/src", {}, status=201)
    app.put_json("/v2.1/full", {}, status=201)
    app.put("/v2.1/src/widgets/w1", status=201)
    filter_.provider.refuse_into.add("full")
    response = app.post("/v2.1/src/widgets/w1/action/move?dest=full", status=403)
    assert "no more widgets" in response.json["errors"][0]["detail"]
    assert ("src", "w1") in service.widgets


def test_move_a_whole_tenant(two_tenants, registry_url):
    admin = two_tenants
    url = "/v2.1/src/action/move?dest=dst"
    document = admin.get(url).json["move"]
    assert document["resources"]["count"] == 2
    assert [r["path"] for r in document["resources"]["list"]] == ["widgets/w1", "widgets/w2"]
    etag = admin.get(url).headers["ETag"]
    moved = admin.post(url, headers={"If-Match": etag}, status=303)
    assert moved.headers["Location"] == "http://localhost:80/v2.1/dst"
    admin.get("/v2.1/src", status=200)  # the source tenant stays
    assert admin.get("/v2.1/src/widgets/w2", status=301).headers["Location"].endswith("/v2.1/dst/widgets/w2")
    assert admin.get(url).json["move"]["resources"]["count"] == 0
    assert admin.post(url, headers={"If-Match": etag}, status=412)
    assert registry_rows(registry_url)[1] == 2


def test_large_tenant_move_document_carries_a_tag_not_a_list(registry_url):
    app, _, _ = build(registry_url, move_list_limit=1)
    app.put_json("/v2.1/src", {}, status=201)
    app.put_json("/v2.1/dst", {}, status=201)
    app.put("/v2.1/src/widgets/w1", status=201)
    app.put("/v2.1/src/widgets/w2", status=201)
    resources = app.get("/v2.1/src/action/move?dest=dst").json["move"]["resources"]
    assert resources["count"] == 2
    assert "list" not in resources
    assert len(resources["tag"]) == 64
    etag = app.get("/v2.1/src/action/move?dest=dst").headers["ETag"]
    app.put("/v2.1/src/widgets/w2", status=201)
    assert app.get("/v2.1/src/action/move?dest=dst").headers["ETag"] != etag


def test_without_a_provider_move_urls_go_to_the_service(registry_url):
    service = WidgetService()
    admin = TenantAdmin(service, {"connection": registry_url})
    BUILT.append(admin)
    app = webtest.TestApp(TenantPath(admin, {}))
    app.put_json("/v2.1/src", {}, status=201)
    app.post("/v2.1/src/widgets/w1/action/move?dest=x", status=404)
    assert service.calls == 1


def test_purge_library_call(admin, registry_url):
    from datetime import timedelta

    admin.put_json("/v2.1/old", {}, status=201)
    admin.put_json("/v2.1/keep", {}, status=201)
    admin.put_json("/v2.1/dst", {}, status=201)
    admin.put("/v2.1/old/widgets/w1", status=201)
    admin.post("/v2.1/old/widgets/w1/action/move?dest=dst", status=303)
    admin.delete("/v2.1/old", status=204)
    registry = TenantRegistry(registry_url)
    try:
        assert registry.purge(timedelta(days=1)).tenants == []
        dry = registry.purge(timedelta(0), dry_run=True)
        assert (dry.tenants, dry.moves) == (["old"], 1)
        report = registry.purge(timedelta(0))
        assert (report.tenants, report.moves) == (["old"], 1)
        assert "'old'" in str(report)
    finally:
        registry.close()
    admin.get("/v2.1/old", status=404)
    admin.put_json("/v2.1/old", {"new": True}, status=201)
    assert json.loads(json.dumps(admin.get("/v2.1/old").json)) == {"new": True}


def test_tenantless_collections_are_neither_checked_nor_admin_calls(registry_url):
    for admin_api in (True, False):
        app, _, service = build(registry_url, admin_api=admin_api, tenantless_collections="os-services, os-hypervisors")
        app.get("/v2.1/os-services", status=404)  # the service's own answer: WidgetService knows no os-services
        app.put_json("/v2.1/os-hypervisors", {}, status=404)
        app.get("/v2.1/os-services/7/action/move?dest=x", status=404)
        assert service.calls == 3
        app.get("/v2.1/nobody/os-services", status=404)  # a tenant segment before it is still checked
        assert service.calls == 3


def test_a_body_shorter_than_its_content_length_is_refused(admin, registry_url):
    from tests.support.wsgi import make_environ

    environ = make_environ("PUT", "/v2.1/acme", (("Content-Type", "application/json"),), body=b'{"a": 1}')
    environ["CONTENT_LENGTH"] = "100"
    response = webtest.TestRequest(environ).get_response(admin.app)
    assert response.status_int == 400
    assert "100 bytes" in response.json["errors"][0]["detail"]
    assert registry_rows(registry_url) == ([], 0)


def _strip_version(app):
    """A filter that rewrites /v2.1/t/... to /t/... (as a mount or rewrite between the two filters might)."""

    def rewrite(environ, start_response):
        environ["PATH_INFO"] = environ["PATH_INFO"].replace("/v2.1", "", 1)
        return app(environ, start_response)

    return rewrite


@pytest.mark.parametrize("pipeline", ["rewrite between", "other version pattern"])
def test_the_tenant_the_service_gets_is_the_one_checked(registry_url, pipeline):
    # The admin endpoint's filter: whatever it makes of the path, the tenant
    # tenant_path handed on (environ['tenancy.tenant_id']) is the one checked;
    # it follows tenant_path's decision (environ['tenancy.tenant_segment']), not its own version_pattern.
    service = WidgetService()
    admin = TenantAdmin(service, {"connection": registry_url})
    BUILT.append(admin)
    if pipeline == "rewrite between":
        app, version = webtest.TestApp(TenantPath(_strip_version(admin), {})), "v2.1"
    else:
        app, version = webtest.TestApp(TenantPath(admin, {"version_pattern": r"v[0-9.]+|latest"})), "latest"
    admin.registry.put("acme", {})
    admin.registry.put("gone", {})
    admin.registry.delete("gone")
    assert error_code(app.get("/%s/nobody/widgets" % version, status=404)) == "tenancy.tenant-not-found"
    assert error_code(app.get("/%s/gone/widgets" % version, status=410)) == "tenancy.tenant-deleted"
    if pipeline == "rewrite between":
        # The path it sees no longer holds tenant_path's tenant where tenant_path found it: no admin call.
        assert error_code(app.put_json("/%s/nobody" % version, {}, status=404)) == "tenancy.tenant-not-found"
    else:
        assert app.put_json("/%s/nobody" % version, {}, status=201).headers["Location"].endswith("/latest/nobody")
    assert service.calls == 0
    app.get("/%s/acme/widgets" % version, status="*")  # the service's own answer to a path it may not route
    assert service.calls == 1


def test_a_number_json_cannot_carry_is_named_as_such(admin, registry_url):
    for body in (b'{"a": 1e999}', b'{"a": [-1e400]}'):
        response = admin.put("/v2.1/acme", body, headers={"Content-Type": "application/json"}, status=400)
        assert error_code(response) == "tenancy.representation-not-json"
        assert "number" in response.json["errors"][0]["detail"]
        assert "nested" not in response.json["errors"][0]["detail"]
    assert registry_rows(registry_url) == ([], 0)


@pytest.mark.parametrize("length", ["\u00b2", "\u0661\u0662", "+8", "8_0", "0x8", "8 8"])
def test_a_content_length_that_is_not_ascii_digits_is_400(admin, registry_url, length):
    from tests.support.wsgi import make_environ

    environ = make_environ("PUT", "/v2.1/acme", (("Content-Type", "application/json"),), body=b'{"a": 1}')
    environ["CONTENT_LENGTH"] = length
    response = webtest.TestRequest(environ).get_response(admin.app)
    assert response.status_int == 400
    assert error_code(response) == "tenancy.bad-content-length"
    assert registry_rows(registry_url) == ([], 0)


def test_move_urls_under_a_deleted_or_unknown_tenant_are_410_and_404_first(two_tenants, registry_url):
    # "Every request under /{version}/{tenantId}/... then gets 410": a move URL too,
    # whatever else is wrong with it (no dest, a bad If-Match, a method it does not take).
    admin = two_tenants
    admin.delete("/v2.1/src", status=204)
    for tenant, status in (("src", 410), ("nobody", 404)):
        for target, method, headers in (
            ("/v2.1/%s/widgets/w1/action/move" % tenant, "GET", {}),
            ("/v2.1/%s/widgets/w1/action/move?dest=" % tenant, "POST", {}),
            ("/v2.1/%s/action/move?dest=dst" % tenant, "POST", {"If-Match": "garbage"}),
            ("/v2.1/%s/action/move?dest=dst" % tenant, "PUT", {}),
        ):
            response = admin.request(target, method=method, headers=headers, status=status)
            assert error_code(response) == ("tenancy.tenant-deleted" if status == 410 else "tenancy.tenant-not-found")
    assert admin.service.calls == 2  # the two widget PUTs of the fixture


@pytest.mark.parametrize("url", ["/v2.1/src/widgets/w1/action/move?dest=dst", "/v2.1/src/action/move?dest=dst"])
def test_the_move_etag_changes_with_the_destination_resources(two_tenants, url):
    # The spec's reason for move actions: "tenants are only allowed to have 100
    # resources"; the operator checks the destination's resources, and a
    # conditional move fails when they changed meanwhile.
    admin = two_tenants
    action = admin.get(url)
    assert action.json["move"]["destination"]["resources"]["count"] == 0
    admin.put("/v2.1/dst/widgets/d1", status=201)
    assert admin.get(url).json["move"]["destination"]["resources"]["count"] == 1
    stale = admin.post(url, headers={"If-Match": action.headers["ETag"]}, status=412)
    assert error_code(stale) == "tenancy.move-precondition-failed"
    assert ("src", "w1") in admin.service.widgets


# version_discovery ---------------------------------------------------------------


class VersionedService:
    """A service with a version document at ``/v2.1`` (as nova's); records what it was asked."""

    DOCUMENT = {"version": {"id": "v2.1", "version": "2.53", "min_version": "2.1"}}

    def __init__(self, document=DOCUMENT, status="200 OK"):
        self.document, self.status = document, status
        self.seen: list[dict] = []

    def __call__(self, environ, start_response):
        self.seen.append(
            {
                "method": environ["REQUEST_METHOD"],
                "script": environ.get("SCRIPT_NAME", ""),
                "path": environ["PATH_INFO"],
                "query": environ.get("QUERY_STRING", ""),
                "body": environ["wsgi.input"].read(),
                "tenant": environ.get("tenancy.tenant_id"),
                "if_match": environ.get("HTTP_IF_MATCH"),
                "request_id": environ.get("openstack.request_id"),
                "headers": {key: value for key, value in environ.items() if key.startswith("HTTP_")},
            }
        )
        at_version = (environ.get("SCRIPT_NAME", "") + environ["PATH_INFO"]).rstrip("/").endswith("/v2.1")
        body = json.dumps(self.document).encode() if at_version else b"{}"
        start_response(self.status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def discovering(registry_url, service, **options):
    """A tenant_admin with version_discovery over *service* (no move provider: the service has no widgets)."""
    options.setdefault("version_discovery", True)
    return build(registry_url, service=service, move_provider="", **options)[0]


def test_version_discovery_adds_the_services_version_document_to_a_tenants_get(registry_url):
    service = VersionedService()
    app = discovering(registry_url, service)
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    head = app.head("/v2.1/acme", status=204)
    shown = app.get(
        "/v2.1/acme?x=1",
        headers={
            "If-Match": "*",
            "Authorization": "Bearer secret",
            "Cookie": "session=1",
            "Range": "bytes=0-3",
            "Accept-Encoding": "gzip",
            "X-HTTP-Method-Override": "DELETE",
            "OpenStack-API-Version": "compute 9.99",
            "X-Forwarded-Proto": "https",
        },
        extra_environ={"openstack.request_id": "req-1"},
        status=200,
    )
    assert shown.json == {"tier": "gold", "version": VersionedService.DOCUMENT["version"]}
    # The tenant's ETag and metadata, not the body's.
    assert shown.headers["ETag"] == head.headers["ETag"]
    assert shown.headers["X-Tenant-State"] == "active"
    # The service was asked a plain GET of /v2.1: no query, body, condition or tenant.
    assert service.seen == [
        {
            "method": "GET",
            "script": "",
            "path": "/v2.1",
            "query": "",
            "body": b"",
            "tenant": None,
            "if_match": None,
            "request_id": "req-1",
            # Only what locates the service: no credentials, cookie, tenant
            # header (tenant_path's X-Tenant-Id), range, encoding, method
            # override or version header of the client's.
            "headers": {
                "HTTP_HOST": "localhost:80",
                "HTTP_ACCEPT": "application/json",
                "HTTP_X_FORWARDED_PROTO": "https",
            },
        }
    ]
    # HEAD stays the tenant's 204, without asking the service.
    assert len(service.seen) == 1
    app.head("/v2.1/acme", status=204)
    assert len(service.seen) == 1


def test_version_discovery_below_a_mount(registry_url):
    service = VersionedService()
    app = discovering(registry_url, service)
    app.put_json("/v2.1/acme", {}, extra_environ={"SCRIPT_NAME": "/compute"}, status=201)
    shown = app.get("/v2.1/acme", extra_environ={"SCRIPT_NAME": "/compute"}, status=200)
    assert shown.json == {"version": VersionedService.DOCUMENT["version"]}
    assert (service.seen[-1]["script"], service.seen[-1]["path"]) == ("/compute", "/v2.1")


def test_version_discovery_reserves_the_member_in_a_put(registry_url):
    app = discovering(registry_url, VersionedService())
    refused = app.put_json("/v2.1/acme", {"version": "mine"}, status=400)
    assert error_code(refused) == "tenancy.representation-reserved-member"
    assert "'version'" in refused.json["errors"][0]["detail"]
    app.get("/v2.1/acme", status=404)
    # Without the option the member is the tenant's own, as any other.
    plain = discovering(registry_url, VersionedService(), version_discovery=False)
    plain.put_json("/v2.1/acme", {"version": "mine"}, status=201)
    assert plain.get("/v2.1/acme").json == {"version": "mine"}
    # Stored before the option was turned on: the tenant's member is kept.
    later = discovering(registry_url, VersionedService())
    assert later.get("/v2.1/acme").json == {"version": "mine"}


@pytest.mark.parametrize(
    "service",
    [
        VersionedService(status="404 Not Found"),
        VersionedService(document={"versions": []}),
        VersionedService(document={"version": "2.53"}),
        VersionedService(document=["version"]),
    ],
    ids=["404", "no-member", "not-an-object", "not-a-dict"],
)
def test_version_discovery_without_a_document_shows_the_tenant_alone(registry_url, service, caplog):
    app = discovering(registry_url, service)
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    with caplog.at_level("WARNING", logger="tenancy_mw.tenant_admin"):
        assert app.get("/v2.1/acme", status=200).json == {"tier": "gold"}
    assert "version_discovery: the service answers GET /v2.1 with" in caplog.text


def test_version_discovery_without_representations(registry_url):
    app = discovering(registry_url, VersionedService(), representations=False)
    app.put_json("/v2.1/acme", {}, status=201)
    # 200 with the version document alone (a GET without the option is 204).
    assert app.get("/v2.1/acme", status=200).json == {"version": VersionedService.DOCUMENT["version"]}
    app.head("/v2.1/acme", status=204)


def test_version_discovery_with_the_tenant_stripped_into_the_mount(registry_url):
    """nova's layout: the API mounted at its version, tenant_path's strip_tenant moving the tenant into SCRIPT_NAME."""
    service = VersionedService()
    admin = TenantAdmin(service, {"connection": registry_url, "version_discovery": "true"})
    BUILT.append(admin)
    app = webtest.TestApp(TenantPath(admin, {"strip_tenant": "true"}))
    app.put_json("/acme", {}, extra_environ={"SCRIPT_NAME": "/v2.1"}, status=201)
    shown = app.get("/acme", extra_environ={"SCRIPT_NAME": "/v2.1"}, status=200)
    assert shown.json == {"version": VersionedService.DOCUMENT["version"]}
    assert (service.seen[-1]["script"], service.seen[-1]["path"]) == ("/v2.1", "")


def broken_service(answer):
    """A service whose every answer is *answer*(start_response) (a WSGI body) or raises."""

    def service(environ, start_response):
        return answer(start_response)

    return service


def _raises(start_response):
    raise RuntimeError("the service is down")


def _nan(start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b'{"version": {"id": "v2.1", "x": NaN}}']


def _deep(start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b'{"version": ' + b"[" * 100000 + b"]" * 100000 + b"}"]


def _huge(start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b'{"version": {"pad": "', b"x" * 70000, b'"}}']


def _not_json(start_response):
    start_response("200 OK", [("Content-Type", "text/html")])
    return [b"<html>versions</html>"]


@pytest.mark.parametrize(
    "answer", [_raises, _nan, _deep, _huge, _not_json], ids=["raises", "nan", "deep", "over-64k", "not-json"]
)
def test_version_discovery_never_fails_the_tenants_get(registry_url, answer, caplog):
    app = discovering(registry_url, broken_service(answer))
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    with caplog.at_level("WARNING", logger="tenancy_mw.tenant_admin"):
        shown = app.get("/v2.1/acme", status=200)
    assert shown.json == {"tier": "gold"}
    assert "version_discovery" in caplog.text
    # Without representations: as without the option, 204.
    bare = discovering(registry_url, broken_service(answer), representations=False)
    assert bare.get("/v2.1/acme", status=204).body == b""


def test_version_discovery_reads_the_write_callable_and_the_last_status(registry_url):
    document = json.dumps(VersionedService.DOCUMENT).encode()

    def writer(start_response):
        try:
            raise ValueError("first try failed")
        except ValueError:
            pass
        start_response("500 Internal Server Error", [])
        write = start_response("200 OK", [("Content-Type", "application/json")], sys.exc_info())
        write(document[:10])
        return [document[10:]]

    app = discovering(registry_url, broken_service(writer))
    app.put_json("/v2.1/acme", {}, status=201)
    assert app.get("/v2.1/acme", status=200).json == {"version": VersionedService.DOCUMENT["version"]}


def test_version_discovery_get_put_round_trip(registry_url):
    """A client may PUT back what it read: the service's version member is dropped, not stored."""
    app = discovering(registry_url, VersionedService())
    app.put_json("/v2.1/acme", {"tier": "gold"}, status=201)
    read = app.get("/v2.1/acme").json
    read["tier"] = "silver"
    app.put_json("/v2.1/acme", read, status=202)
    registry = TenantRegistry(registry_url)
    try:
        assert registry.get("acme").representation == {"tier": "silver"}
    finally:
        registry.close()
    assert app.get("/v2.1/acme").json == {"tier": "silver", "version": VersionedService.DOCUMENT["version"]}
    # Any other version member is refused.
    read["version"] = dict(read["version"], version="9.99")
    assert error_code(app.put_json("/v2.1/acme", read, status=400)) == "tenancy.representation-reserved-member"


def test_version_discovery_keeps_a_tenants_own_version_member_and_warns(registry_url, caplog):
    plain = discovering(registry_url, VersionedService(), version_discovery=False)
    plain.put_json("/v2.1/acme", {"version": "mine"}, status=201)
    later = discovering(registry_url, VersionedService())
    with caplog.at_level("WARNING", logger="tenancy_mw.tenant_admin"):
        assert later.get("/v2.1/acme").json == {"version": "mine"}
    assert "holds its own 'version' member" in caplog.text


# The URL layout: tenant_path's decision, or the filter's own -----------------------------------------

CONFIRMED = {"X-Identity-Status": "Confirmed", "X-Project-Id": "6f70656e"}


def layered(registry_url, tenant_path=None, **options):
    """``(client, admin, service)``: tenant_admin behind a tenant_path with *tenant_path* options, or alone (None)."""
    service = WidgetService()
    conf = {"connection": registry_url}
    conf.update({k: str(v) for k, v in options.items()})
    admin = TenantAdmin(service, conf)
    BUILT.append(admin)
    app = admin if tenant_path is None else TenantPath(admin, tenant_path)
    return webtest.TestApp(app), admin, service


@pytest.mark.parametrize("tenant_path", [{}, None], ids=["behind tenant_path", "alone"])
def test_a_collection_on_the_admin_endpoint_goes_to_the_service_not_the_tenant_api(registry_url, tenant_path):
    client, _, service = layered(registry_url, tenant_path)
    # GET /v2.1/servers is the service's list, not "GET tenant servers" (which would be 404 tenant-not-found).
    assert client.get("/v2.1/servers", status=404).json == {"error": "no such widget"}
    assert client.put_json("/v2.1/os-keypairs", {}, status=404).json == {"error": "no such widget"}
    assert client.delete("/v2.1/flavors", status=404).json == {"error": "no such widget"}
    client.post("/v2.1/servers/action/restore", status=404)
    assert service.calls == 4
    assert registry_rows(registry_url) == ([], 0)
    # A tenant's own URL is still the admin API.
    client.put_json("/v2.1/acme", {}, status=201)
    assert service.calls == 4


@pytest.mark.parametrize("admin_api", [True, False], ids=["admin endpoint", "public endpoint"])
def test_with_token_tenant_the_state_check_applies_to_the_tokens_tenant(registry_url, admin_api):
    client, admin, service = layered(registry_url, {"token_tenant": "true"}, admin_api=admin_api, cache_ttl=0)
    no_tenant = client.get("/v2.1/servers", headers=CONFIRMED, status=404)
    assert error_code(no_tenant) == "tenancy.tenant-not-found"
    assert "'6f70656e'" in no_tenant.json["errors"][0]["detail"]
    admin.registry.put("6f70656e", {})
    assert client.get("/v2.1/servers", headers=CONFIRMED, status=404).json == {"error": "no such widget"}
    assert client.get("/v2.1/6f70656e/widgets", headers=CONFIRMED).json == {"widgets": []}
    admin.registry.delete("6f70656e")
    assert error_code(client.post("/v2.1/os-keypairs", headers=CONFIRMED, status=410)) == "tenancy.tenant-deleted"
    # Without a confirmed token there is no tenant to check.
    client.get("/v2.1/servers", headers={"X-Project-Id": "6f70656e"}, status=404)
    assert service.calls == 3
    assert registry_rows(registry_url)[0][0][:2] == ("6f70656e", "deleted")


def test_the_tokens_tenant_is_never_an_admin_call(registry_url):
    client, _, service = layered(registry_url, {"token_tenant": "true", "tenant_in_path": "never"})
    # Under the never layout /v2.1/acme is no tenant URL: the token's tenant is checked, nothing is created.
    assert error_code(client.put_json("/v2.1/acme", {}, headers=CONFIRMED, status=404)) == "tenancy.tenant-not-found"
    assert registry_rows(registry_url) == ([], 0)
    assert service.calls == 0


def test_alone_it_decides_with_its_own_layout_and_fails_closed(registry_url):
    client, _, service = layered(registry_url, None, tenant_id_pattern="[0-9a-f-]+")
    refused = client.get("/v2.1/os-widgets/1", status=404)
    assert error_code(refused) == "tenancy.unknown-path-segment"
    assert "'os-widgets'" in refused.json["errors"][0]["detail"]
    assert error_code(client.get("/v2.1/abc1/widgets", status=404)) == "tenancy.tenant-not-found"
    client.get("/v2.1/servers", status=404)
    assert service.calls == 1
    spec, _, _ = layered(registry_url, None, tenant_in_path="always")
    assert error_code(spec.get("/v2.1/servers", status=404)) == "tenancy.tenant-not-found"


def test_it_follows_tenant_paths_layout_over_its_own(registry_url):
    # tenant_path (default layout) found no tenant in /v2.1/servers: tenant_admin's own "always" is not asked.
    client, _, service = layered(registry_url, {}, tenant_in_path="always")
    assert client.get("/v2.1/servers", status=404).json == {"error": "no such widget"}
    assert service.calls == 1


@pytest.mark.parametrize("tenant_path", [{}, None], ids=["behind tenant_path", "alone"])
@pytest.mark.parametrize("mount", ["/v1/aaaa/v2.1", "/api/v1/compute/v2.1"], ids=["forwarded prefix", "deeper mount"])
def test_the_version_is_the_end_of_the_mount_never_a_segment_before_it(registry_url, tenant_path, mount):
    # A client's X-Forwarded-Prefix (http_proxy_to_wsgi prepends it), or a deployment's own mount, before nova's /v2.1.
    client, _, service = layered(registry_url, tenant_path)
    under = {"SCRIPT_NAME": mount}
    assert client.get("/servers", extra_environ=under, status=404).json == {"error": "no such widget"}
    assert service.calls == 1
    # The tenant admin API is the segment after nova's version, as without the mount.
    client.put_json("/acme", {"tier": "gold"}, extra_environ=under, status=201)
    assert [row[:2] for row in registry_rows(registry_url)[0]] == [("acme", "active")]
    assert client.get("/acme", extra_environ=under, status=200).json == {"tier": "gold"}
    assert service.calls == 1


@pytest.mark.parametrize(
    ("option", "value"),
    [("tenant_in_path", "sometimes"), ("tenantless_collections", "os-services, a/b"), ("tenant_id_pattern", "(")],
)
def test_bad_layout_options_fail_at_load_naming_the_value(option, value):
    with pytest.raises(ConfigError) as caught:
        TenantAdmin(WidgetService(), {"connection": "sqlite://", option: value})
    message = str(caught.value)
    assert "tenant_admin" in message
    assert option in message
    assert repr(value.split(", ")[-1]) in message
