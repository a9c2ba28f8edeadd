"""The tenant_path filter, in process: every rule of its issue, each with a test."""

from __future__ import annotations

import json
import logging
import re

import pytest
import webtest
from hypothesis import given, settings
from hypothesis import strategies as st
from oslo_config import cfg
from oslo_middleware import HTTPProxyToWSGI
from oslo_middleware.request_id import RequestId
from paste.urlmap import URLMap

from tenancy_mw.core.base import ConfigError
from tenancy_mw.tenants.ids import validate_tenant_id
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.wsgi import call as wsgi_call
from tests.support.wsgi import make_environ


def build(conf=None):
    recorder = Recorder()
    return TenantPath(recorder, conf or {}), recorder


def call(app, path, raw=None, method="GET", script="", headers=None):
    """Call *app* as a WSGI server would; *raw* is RAW_URI (defaults to *path*)."""
    from urllib.parse import unquote

    environ = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": script,
        "PATH_INFO": unquote(path.split("?")[0], encoding="latin-1"),
        "RAW_URI": raw if raw is not None else script + path,
        "QUERY_STRING": path.partition("?")[2],
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
    }
    if script and raw is None:
        environ["PATH_INFO"] = unquote(path.split("?")[0], encoding="latin-1")
        environ["RAW_URI"] = script + path
    for key, value in (headers or {}).items():
        environ["HTTP_" + key.upper().replace("-", "_")] = value
    captured = {}

    def start_response(status, response_headers, exc_info=None):
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(response_headers)

    body = b"".join(app(environ, start_response))
    return captured["status"], captured["headers"], body, environ


@pytest.mark.parametrize(
    ("path", "tenant"),
    [
        ("/v1.0/12345/widgets", "12345"),
        ("/v1.0/Bob's%20Tenant/widgets", "Bob's Tenant"),
        ("/v1.0/%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F/widgets", "∑∞∆∏"),
        ("/v1.0/resel1:sub2:acct3/widgets", "resel1:sub2:acct3"),
        ("/v1.0/resel1\\sub2\\acct3/widgets", "resel1\\sub2\\acct3"),
        ("/v1.0/resel1/sub2/acct3/widgets", "resel1"),
        ("/v2.1/acme", "acme"),
        ("/v2.1/acme/", "acme"),
        ("/v2.1/acme/servers?name=/x", "acme"),
        ("/v2/" + "x" * 255 + "/servers", "x" * 255),
    ],
)
def test_tenant_id_reaches_the_app(path, tenant):
    app, recorder = build()
    status, _, _, _ = call(app, path)
    assert status == 200
    seen = recorder.seen[-1]
    assert seen["tenancy.tenant_id"] == tenant
    assert seen["HTTP_X_TENANT_ID"] == tenant.encode().decode("latin-1")


@pytest.mark.parametrize("path", ["/", "/v2.1", "/v2.1/", "/healthcheck", "/healthcheck/detail", "/servers/v2.1/t"])
def test_paths_without_tenant_pass_untouched(path):
    app, recorder = build()
    status, _, _, environ = call(app, path)
    assert status == 200
    seen = recorder.seen[-1]
    assert "tenancy.tenant_id" not in seen
    assert seen["PATH_INFO"] == path
    assert seen["SCRIPT_NAME"] == ""


@pytest.mark.parametrize(
    ("path", "code", "named"),
    [
        ("/v2.1//servers", "tenancy.invalid-tenant-id.empty", "empty"),
        ("/v2.1//", "tenancy.invalid-tenant-id.empty", "empty"),
        ("/v1.0/" + "y" * 256 + "/widgets", "tenancy.invalid-tenant-id.too-long", "256"),
        ("/v1.0/resel1%2Fsub2%2Facct3/widgets", "tenancy.bad-path.encoded-slash", "resel1%2Fsub2%2Facct3"),
        ("/v1.0/a%00b/widgets", "tenancy.bad-path.nul", "a%00b"),
        ("/v1.0/%FF%FE/widgets", "tenancy.bad-path.invalid-utf8", "%FF%FE"),
        ("/v1.0/a%252Fb/widgets", "tenancy.bad-path.double-encoding", "a%252Fb"),
        ("/v1.0/../other/widgets", "tenancy.bad-path.dot-segment", ".."),
        ("/v1.0/%2E%2E/widgets", "tenancy.bad-path.dot-segment", "%2E%2E"),
    ],
)
def test_refused_tenant_segments_get_400_naming_rule_and_value(path, code, named):
    app, recorder = build()
    status, headers, body, _ = call(app, path)
    assert status == 400
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)["errors"][0]
    assert error["status"] == 400
    assert error["code"] == code
    assert named in error["detail"]
    assert recorder.seen == []


def test_encoded_slash_is_only_visible_in_the_raw_uri():
    # With RAW_URI the filter sees %2F; PATH_INFO alone would show a plain "/".
    app, recorder = build()
    status, _, _, _ = call(app, "/v1.0/a%2Fb/widgets")
    assert status == 400
    # Without a raw target, PATH_INFO is all there is: documented as lost.
    environ_status, _, _, _ = call(app, "/v1.0/a/b/widgets", raw="")
    assert environ_status == 200
    assert recorder.seen[-1]["tenancy.tenant_id"] == "a"


def test_client_tenant_header_is_always_removed():
    app, recorder = build()
    call(app, "/v2.1/acme/servers", headers={"X-Tenant-Id": "victim"})
    assert recorder.seen[-1]["HTTP_X_TENANT_ID"] == "acme"
    call(app, "/healthcheck", headers={"X-Tenant-Id": "victim"})
    assert "HTTP_X_TENANT_ID" not in recorder.seen[-1]


def test_header_name_is_configurable_and_can_be_left_unset():
    app, recorder = build({"tenant_header": "X-Project-Name", "set_tenant_header": "false"})
    call(app, "/v2.1/acme/servers", headers={"X-Project-Name": "victim", "X-Tenant-Id": "kept"})
    seen = recorder.seen[-1]
    assert "HTTP_X_PROJECT_NAME" not in seen
    assert seen["HTTP_X_TENANT_ID"] == "kept"
    assert seen["tenancy.tenant_id"] == "acme"


def test_version_pattern_is_configurable():
    app, recorder = build({"version_pattern": r"\d{4}-\d\d-\d\d"})
    call(app, "/2024-05-01/acme/things")
    assert recorder.seen[-1]["tenancy.tenant_id"] == "acme"
    call(app, "/v2.1/acme/things")
    assert "tenancy.tenant_id" not in recorder.seen[-1]


def test_strip_tenant_moves_it_to_script_name():
    app, recorder = build({"strip_tenant": "true"})
    call(app, "/v2.1/Bob's%20Tenant/servers/1")
    seen = recorder.seen[-1]
    assert seen["PATH_INFO"] == "/v2.1/servers/1"
    assert seen["SCRIPT_NAME"] == "/Bob's Tenant"
    assert seen["tenancy.tenant_id"] == "Bob's Tenant"


def test_strip_tenant_under_a_version_mount_keeps_the_url_whole():
    # nova mounts its pipeline at /v2.1 with urlmap: PATH_INFO starts at the tenant.
    app, recorder = build({"strip_tenant": "true"})
    call(app, "/acme/servers", script="/v2.1")
    seen = recorder.seen[-1]
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"]) == ("/v2.1/acme", "/servers")
    assert seen["tenancy.tenant_id"] == "acme"


def test_strip_is_off_by_default():
    app, recorder = build()
    call(app, "/v2.1/acme/servers")
    assert recorder.seen[-1]["PATH_INFO"] == "/v2.1/acme/servers"


KEYSTONE = {"X-Identity-Status": "Confirmed", "X-Project-Id": "acme", "X-Roles": "member,reader"}


def test_token_project_check_refuses_another_tenant():
    app, recorder = build({"check_token_project": "true"})
    status, _, body, _ = call(app, "/v2.1/victim/servers", headers=KEYSTONE)
    assert status == 403
    detail = json.loads(body)["errors"][0]["detail"]
    assert "acme" in detail
    assert "victim" in detail
    assert recorder.seen == []


def test_token_project_check_passes_own_tenant_admins_and_unconfirmed():
    app, recorder = build({"check_token_project": "true", "admin_roles": "cloud-admin, Admin"})
    assert call(app, "/v2.1/acme/servers", headers=KEYSTONE)[0] == 200
    assert call(app, "/v2.1/victim/servers", headers=dict(KEYSTONE, **{"X-Roles": "member,ADMIN"}))[0] == 200
    assert call(app, "/v2.1/victim/servers", headers=dict(KEYSTONE, **{"X-Identity-Status": "Invalid"}))[0] == 200
    assert len(recorder.seen) == 3


def test_token_project_check_is_off_by_default():
    app, _ = build()
    assert call(app, "/v2.1/victim/servers", headers=KEYSTONE)[0] == 200


def test_nova_error_format_and_request_id():
    app, _ = build({"error_format": "nova"})
    status, _, body, _ = call(app, "/v2.1//servers")
    assert status == 400
    assert json.loads(body) == {
        "badRequest": {"code": 400, "message": "Tenant id is empty; it needs 1 to 255 characters."}
    }
    wrapped = webtest.TestApp(RequestId(TenantPath(Recorder(), {})))
    response = wrapped.get("/v2.1/a%00/x", expect_errors=True, extra_environ={"RAW_URI": "/v2.1/a%00/x"})
    assert response.status_int == 400
    assert response.json["errors"][0]["request_id"] == response.headers["x-openstack-request-id"]


def test_head_errors_have_no_body():
    app, _ = build()
    status, headers, body, _ = call(app, "/v2.1//servers", method="HEAD")
    assert status == 400
    assert body == b""
    assert headers["Content-Type"] == "application/json"


def test_webtest_without_raw_uri():
    app = webtest.TestApp(TenantPath(Recorder(), {}))
    response = app.get("/v1.0/Bob%27s%20Tenant/widgets")
    assert response.json["tenant_id"] == "Bob's Tenant"


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({"version_pattern": "v[0-9"}, "version_pattern"),
        ({"version_pattern": "v?"}, "version_pattern"),
        ({"strip_tenant": "maybe"}, "strip_tenant"),
        ({"error_format": "xml"}, "error_format"),
        ({"tenant_header": "X Tenant"}, "tenant_header"),
        ({"tenant_hedaer": "X-Tenant"}, "tenant_hedaer"),
        ({"tenant_in_path": "sometimes"}, "tenant_in_path"),
        ({"tenantless_collections": "servers, a%2Fb"}, "'a%2Fb'"),
        ({"tenant_id_pattern": "[0-9a-f"}, "tenant_id_pattern = '[0-9a-f'"),
        ({"token_tenant": "perhaps"}, "token_tenant"),
    ],
)
def test_bad_options_fail_at_construction_naming_the_option(conf, named):
    with pytest.raises(ConfigError) as caught:
        TenantPath(Recorder(), conf)
    assert named in str(caught.value)
    assert "tenant_path" in str(caught.value)


def test_options_from_oslo_config():
    conf = cfg.ConfigOpts()
    conf([], project="tenancy-test", default_config_files=[])
    TenantPath(Recorder(), conf)  # registers the group
    conf.set_override("tenant_header", "X-Project-Name", group="tenant_path")
    recorder = Recorder()
    app = TenantPath(recorder, conf)
    call(app, "/v2.1/acme/x")
    assert recorder.seen[-1]["HTTP_X_PROJECT_NAME"] == "acme"


def test_bad_oslo_config_file_value_fails_at_construction(tmp_path):
    path = tmp_path / "svc.conf"
    path.write_text("[tenant_path]\nstrip_tenant = perhaps\n")
    conf = cfg.ConfigOpts()
    conf([], project="tenancy-test", default_config_files=[str(path)])
    with pytest.raises(ConfigError) as caught:
        TenantPath(Recorder(), conf)
    assert "strip_tenant" in str(caught.value)


def test_two_instances_keep_their_own_settings():
    first, first_seen = build({"tenant_header": "X-One"})
    second, second_seen = build({"tenant_header": "X-Two"})
    call(first, "/v2.1/a/x")
    call(second, "/v2.1/b/x")
    assert first_seen.seen[-1]["HTTP_X_ONE"] == "a"
    assert second_seen.seen[-1]["HTTP_X_TWO"] == "b"


def test_refusals_are_logged_at_debug(caplog):
    app, _ = build()
    with caplog.at_level(logging.DEBUG, logger="tenancy_mw.tenant_path"):
        call(app, "/v2.1/a%2Fb/x")
    assert "a%2Fb" in caplog.text


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from(["RAW_URI", "REQUEST_URI", None]))
def test_any_request_target_gets_a_valid_tenant_or_a_400(data, raw_key):
    """Whatever bytes follow /v1.0/, the filter passes a valid tenant id (or none) on, or answers 400."""
    app, recorder = build()
    target = "/v1.0/" + data.decode("latin-1").replace(" ", "%20")
    status, _, body = wsgi_call(app, make_environ("GET", target, raw_key=raw_key))
    if status == 400:
        assert json.loads(body)["errors"][0]["code"].startswith(("tenancy.bad-path.", "tenancy.invalid-tenant-id."))
        assert recorder.seen == []
        return
    assert status == 200
    tenant = recorder.seen[0].get("tenancy.tenant_id")
    if tenant is not None:
        assert validate_tenant_id(tenant) == tenant


# The URL layout: one decision, both layouts -------------------------------------------------------

CONFIRMED = {"X-Identity-Status": "Confirmed", "X-Project-Id": "6f70656e"}


@pytest.mark.parametrize("name", ["servers", "flavors", "os-keypairs", "os-services", "limits", "volumes", "types"])
def test_a_collection_after_the_version_is_never_a_tenant(name):
    app, recorder = build()
    status, _, _, _ = call(app, "/v2.1/%s/detail" % name, headers={"X-Tenant-Id": "forged"})
    assert status == 200
    seen = recorder.seen[-1]
    assert "tenancy.tenant_id" not in seen
    assert "HTTP_X_TENANT_ID" not in seen
    assert seen["tenancy.tenant_segment"] == -1
    assert seen["PATH_INFO"] == "/v2.1/%s/detail" % name


def test_the_decision_is_left_in_environ_for_the_filters_after():
    app, recorder = build()
    call(app, "/v2.1/acme/servers")
    seen = recorder.seen[-1]
    assert (seen["tenancy.tenant_id"], seen["tenancy.tenant_source"], seen["tenancy.tenant_segment"]) == (
        "acme",
        "path",
        1,
    )
    call(app, "/healthcheck")
    assert recorder.seen[-1]["tenancy.tenant_segment"] == -1
    assert "tenancy.tenant_source" not in recorder.seen[-1]
    call(app, "/acme/servers", script="/v2.1")
    assert recorder.seen[-1]["tenancy.tenant_segment"] == 1


@pytest.mark.parametrize(
    ("path", "source"),
    [("/v2.1/6f70656e/os-keypairs", "path"), ("/v2.1/os-keypairs", "token")],
)
def test_both_layouts_give_the_app_the_same_tenant_with_token_tenant(path, source):
    app, recorder = build({"token_tenant": "true"})
    assert call(app, path, method="POST", headers=CONFIRMED)[0] == 200
    seen = recorder.seen[-1]
    assert (seen["tenancy.tenant_id"], seen["tenancy.tenant_source"]) == ("6f70656e", source)
    assert seen["HTTP_X_TENANT_ID"] == "6f70656e"
    assert seen["tenancy.tenant_segment"] == (1 if source == "path" else -1)


@pytest.mark.parametrize(
    ("conf", "headers"),
    [
        ({}, CONFIRMED),  # token_tenant is off by default
        ({"token_tenant": "true"}, dict(CONFIRMED, **{"X-Identity-Status": "Invalid"})),
        ({"token_tenant": "true"}, {"X-Project-Id": "6f70656e"}),
        ({"token_tenant": "true"}, {"X-Identity-Status": "Confirmed"}),
        ({"token_tenant": "true"}, dict(CONFIRMED, **{"X-Project-Id": ""})),
    ],
)
def test_the_token_is_the_tenant_only_when_confirmed_with_a_project(conf, headers):
    app, recorder = build(conf)
    assert call(app, "/v2.1/servers", headers=dict(headers, **{"X-Tenant-Id": "forged"}))[0] == 200
    assert "tenancy.tenant_id" not in recorder.seen[-1]
    assert "HTTP_X_TENANT_ID" not in recorder.seen[-1]


def test_a_token_project_is_read_as_utf8_and_checked_as_a_tenant_id():
    app, recorder = build({"token_tenant": "true"})
    latin1 = "∑proj".encode().decode("latin-1")
    call(app, "/v2.1/servers", headers=dict(CONFIRMED, **{"X-Project-Id": latin1}))
    assert recorder.seen[-1]["tenancy.tenant_id"] == "∑proj"
    assert recorder.seen[-1]["HTTP_X_TENANT_ID"] == latin1
    status, _, body, _ = call(app, "/v2.1/servers", headers=dict(CONFIRMED, **{"X-Project-Id": "\xff\xfe"}))
    assert status == 400
    assert json.loads(body)["errors"][0]["code"] == "tenancy.invalid-tenant-id.not-utf-8"
    status, _, body, _ = call(app, "/v2.1/servers", headers=dict(CONFIRMED, **{"X-Project-Id": "a/b"}))
    assert status == 400
    error = json.loads(body)["errors"][0]
    assert error["code"] == "tenancy.invalid-tenant-id.slash"
    assert "'a/b'" in error["detail"]
    assert len(recorder.seen) == 1


def test_check_token_project_applies_to_path_tenants_only():
    # The case: with the catalog's /v2.1 endpoint every member's call was 403 (os-keypairs "tenant").
    app, recorder = build({"check_token_project": "true", "token_tenant": "true"})
    assert call(app, "/v2.1/os-keypairs", method="POST", headers=CONFIRMED)[0] == 200
    assert call(app, "/v2.1/flavors/detail", headers=CONFIRMED)[0] == 200
    assert call(app, "/v2.1/6f70656e/os-keypairs", headers=CONFIRMED)[0] == 200
    status, _, body, _ = call(app, "/v2.1/0ther/os-keypairs", headers=CONFIRMED)
    assert status == 403
    assert json.loads(body)["errors"][0]["code"] == "tenancy.project-mismatch"
    assert [seen["tenancy.tenant_id"] for seen in recorder.seen] == ["6f70656e"] * 3


def test_strip_tenant_strips_only_a_path_tenant():
    app, recorder = build({"strip_tenant": "true", "token_tenant": "true"})
    call(app, "/v2.1/servers/1", headers=CONFIRMED)
    seen = recorder.seen[-1]
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"], seen["tenancy.tenant_id"]) == ("", "/v2.1/servers/1", "6f70656e")
    assert "tenancy.tenant_stripped" not in seen
    call(app, "/v2.1/6f70656e/servers/1", headers=CONFIRMED)
    assert (recorder.seen[-1]["SCRIPT_NAME"], recorder.seen[-1]["PATH_INFO"]) == ("/6f70656e", "/v2.1/servers/1")


@pytest.mark.parametrize("error_format", ["api-wg", "nova"])
def test_a_segment_the_layout_cannot_tell_apart_is_404_naming_it(error_format):
    app, recorder = build({"tenant_id_pattern": "[0-9a-f-]+", "error_format": error_format})
    status, headers, body, _ = call(app, "/v2.1/os-widgets/7")
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    document = json.loads(body)
    if error_format == "nova":
        detail = document["itemNotFound"]["message"]
    else:
        (error,) = document["errors"]
        assert error["code"] == "tenancy.unknown-path-segment"
        detail = error["detail"]
    assert "'os-widgets'" in detail
    assert "tenantless_collections" in detail
    assert recorder.seen == []
    assert call(app, "/v2.1/6f70656e/os-widgets/7")[0] == 200
    assert call(app, "/v2.1/os-keypairs")[0] == 200


def test_the_always_layout_is_the_tenants_specs():
    app, recorder = build({"tenant_in_path": "always"})
    call(app, "/v2.1/servers/detail")
    assert recorder.seen[-1]["tenancy.tenant_id"] == "servers"


def test_the_never_layout_takes_no_tenant_from_any_path():
    app, recorder = build({"tenant_in_path": "never", "token_tenant": "true"})
    call(app, "/v2.1/acme/servers", headers=CONFIRMED)
    assert (recorder.seen[-1]["tenancy.tenant_id"], recorder.seen[-1]["tenancy.tenant_source"]) == ("6f70656e", "token")
    call(app, "/v2.1/acme/servers")
    assert "tenancy.tenant_id" not in recorder.seen[-1]


def test_own_tenantless_collections_replace_the_defaults_and_compare_exactly():
    app, recorder = build({"tenantless_collections": "widgets, os-gadgets"})
    call(app, "/v1.0/widgets/3")
    assert "tenancy.tenant_id" not in recorder.seen[-1]
    for path, tenant in (("/v1.0/Widgets/3", "Widgets"), ("/v2.1/servers", "servers")):
        call(app, path)
        assert recorder.seen[-1]["tenancy.tenant_id"] == tenant


def test_a_collection_with_a_format_suffix_is_no_tenant():
    app, recorder = build()
    call(app, "/v3/volumes.json")
    assert "tenancy.tenant_id" not in recorder.seen[-1]


# Issue 19 review: the version is the end of the mount point, never a segment a proxy put before it ------------

#: nova's recipe (doc/deploy-openstack.rst): its project ids, the token's project for a path without one.
NOVA = {"tenant_id_pattern": "[0-9a-f-]+", "token_tenant": "true", "check_token_project": "true"}


def http_proxy_to_wsgi(app):
    """oslo.middleware's http_proxy_to_wsgi before *app*, proxy headers parsed (a config of its own, not cfg.CONF)."""
    conf = cfg.ConfigOpts()
    proxy = HTTPProxyToWSGI(app, conf)
    conf.set_override("enable_proxy_headers_parsing", True, group="oslo_middleware")
    return proxy


def nova_behind_http_proxy_to_wsgi():
    """nova's ``/v2.1`` urlmap mount; in its pipeline http_proxy_to_wsgi, then us."""
    recorder = Recorder()
    urlmap = URLMap()
    urlmap["/v2.1"] = http_proxy_to_wsgi(TenantPath(recorder, NOVA))
    return urlmap, recorder


@pytest.mark.parametrize("prefix", ["/v1/aaaa", "/v2.1/aaaa", "/v1/aaaa/", "/v3/aaaa/v2"])
def test_a_forwarded_prefix_never_names_the_tenant(prefix):
    app, recorder = nova_behind_http_proxy_to_wsgi()
    headers = dict(CONFIRMED, **{"X-Forwarded-Prefix": prefix})
    status, _, body, _ = call(app, "/v2.1/servers", headers=headers)
    assert status == 200, body
    seen = recorder.seen[-1]
    # The proxy filter did prepend the client's prefix to nova's mount.
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"]) == (prefix + "/v2.1", "/servers")
    # nova routes /servers: the tenant is the token's project, never the prefix's "aaaa".
    assert (seen["tenancy.tenant_id"], seen["tenancy.tenant_source"]) == ("6f70656e", "token")
    assert seen["HTTP_X_TENANT_ID"] == "6f70656e"
    # A project id in the URL after nova's mount is still the tenant, and still checked against the token.
    assert call(app, "/v2.1/6f70656e/servers", headers=headers)[0] == 200
    assert (recorder.seen[-1]["tenancy.tenant_id"], recorder.seen[-1]["tenancy.tenant_source"]) == ("6f70656e", "path")
    status, _, body, _ = call(app, "/v2.1/aaaa/servers", headers=headers)
    assert status == 403
    assert json.loads(body)["errors"][0]["code"] == "tenancy.project-mismatch"


def test_under_a_deeper_mount_the_version_is_novas_own():
    recorder = Recorder()
    nova = URLMap()
    nova["/v2.1"] = TenantPath(recorder, NOVA)
    site = URLMap()  # a deployment serving nova under /api/v1/compute
    site["/api/v1/compute"] = nova
    assert call(site, "/api/v1/compute/v2.1/servers/detail", headers=CONFIRMED)[0] == 200
    seen = recorder.seen[-1]
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"]) == ("/api/v1/compute/v2.1", "/servers/detail")
    assert (seen["tenancy.tenant_id"], seen["tenancy.tenant_source"]) == ("6f70656e", "token")
    assert call(site, "/api/v1/compute/v2.1/6f70656e/servers", headers=CONFIRMED)[0] == 200
    assert (recorder.seen[-1]["tenancy.tenant_id"], recorder.seen[-1]["tenancy.tenant_source"]) == ("6f70656e", "path")
    # Still closed where it cannot tell: the segment after nova's version, named.
    status, _, body, _ = call(site, "/api/v1/compute/v2.1/os-widgets", headers=CONFIRMED)
    assert status == 404
    assert "'os-widgets'" in json.loads(body)["errors"][0]["detail"]
    assert len(recorder.seen) == 2


def test_a_stripped_tenant_is_still_read_after_a_router_moves_it_into_the_mount():
    """nova's /v2.1 mount, a stripping tenant_path, then a router whose sub-app has a tenant_path of its own."""
    recorder = Recorder()
    servers = URLMap()
    servers["/servers"] = TenantPath(recorder, {"tenant_id_pattern": "[0-9a-f-]+"})
    nova = URLMap()
    nova["/v2.1"] = TenantPath(servers, {"strip_tenant": "true", "tenant_id_pattern": "[0-9a-f-]+"})
    assert call(nova, "/v2.1/6f70656e/servers/1")[0] == 200
    seen = recorder.seen[-1]
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"]) == ("/v2.1/6f70656e/servers", "/1")
    assert (seen["tenancy.tenant_id"], seen["tenancy.tenant_segment"], seen["HTTP_X_TENANT_ID"]) == (
        "6f70656e",
        1,
        "6f70656e",
    )


def test_a_prefix_prepended_after_a_strip_never_names_the_tenant():
    """A stripping tenant_path, then http_proxy_to_wsgi, then another tenant_path: the mount's segments moved."""
    recorder = Recorder()
    nova = URLMap()
    second = http_proxy_to_wsgi(TenantPath(recorder, {}))
    nova["/v2.1"] = TenantPath(second, {"strip_tenant": "true", "tenant_id_pattern": "[0-9a-f-]+"})
    assert call(nova, "/v2.1/6f70656e/servers", headers={"X-Forwarded-Prefix": "/v1/aaaa"})[0] == 200
    seen = recorder.seen[-1]
    assert (seen["SCRIPT_NAME"], seen["PATH_INFO"]) == ("/v1/aaaa/v2.1/6f70656e", "/servers")
    assert seen["tenancy.tenant_id"] == "6f70656e"
    assert seen.get("HTTP_X_TENANT_ID") != "aaaa"


# Issue 19 review: the 404's advice keeps the default collections ---------------------------------------------


def test_following_the_unknown_segment_advice_keeps_novas_collections():
    app, _ = build(NOVA)
    status, _, body, _ = call(app, "/v2.1/os-widgets/7", headers=CONFIRMED)
    assert status == 404
    detail = json.loads(body)["errors"][0]["detail"]
    assert "'os-widgets'" in detail
    # Do what it says, literally: the option it names, given the segment it names.
    option = re.search(r"add it to the (\w+) option", detail).group(1)
    assert option == "extra_tenantless_collections"
    app, recorder = build(dict(NOVA, **{option: "os-widgets"}))
    for path in ("/v2.1/os-widgets/7", "/v2.1/servers", "/v2.1/os-keypairs", "/v3/volumes.json"):
        assert call(app, path, headers=CONFIRMED)[0] == 200, path
        assert recorder.seen[-1]["tenancy.tenant_source"] == "token", path
    assert call(app, "/v2.1/6f70656e/os-widgets/7", headers=CONFIRMED)[0] == 200
    assert recorder.seen[-1]["tenancy.tenant_source"] == "path"
