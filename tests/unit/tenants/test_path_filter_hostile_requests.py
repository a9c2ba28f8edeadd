"""tenant_path against hostile requests and pipelines.

Two stripping filters in one pipeline fail at load (or answer a clear
error when hidden); forged tenant headers, in any spelling, and forged
identities never become the tenant; deciding the URL layout costs a bounded
number of Python calls.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest
import webob
from django.http.request import HttpHeaders
from paste.deploy import loadapp

from tenancy_mw.core.base import ConfigError
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.wsgi import call, make_environ, python_calls

# Two stripping tenant_path filters.


def test_two_stripping_tenant_paths_fail_at_load():
    inner = TenantPath(Recorder(), {"strip_tenant": "true"})
    with pytest.raises(ConfigError, match="strip_tenant"):
        TenantPath(AdminCull(inner, {}), {"strip_tenant": "true"})
    TenantPath(AdminCull(inner, {}), {})  # one stripping filter and a plain one are fine


def test_two_stripping_tenant_paths_around_a_urlmap_fail_at_load():
    from paste.urlmap import URLMap

    urlmap = URLMap()
    urlmap["/v2.1"] = AdminCull(TenantPath(Recorder(), {"strip_tenant": "true"}), {})
    with pytest.raises(ConfigError, match="another tenant_path"):
        TenantPath(urlmap, {"strip_tenant": "true"})


def test_two_stripping_tenant_paths_in_a_paste_pipeline_fail_at_load(tmp_path):
    ini = tmp_path / "paste.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = strip admin_cull strip recorder\n"
        "[filter:strip]\nuse = egg:tenancy_mw#tenant_path\nstrip_tenant = true\n"
        "[filter:admin_cull]\nuse = egg:tenancy_mw#admin_cull\n"
        "[app:recorder]\npaste.app_factory = tests.support.apps:recorder_factory\nrecord_file = %s\n"
        % (tmp_path / "r.jsonl")
    )
    with pytest.raises(ConfigError, match="another tenant_path"):
        loadapp("config:%s" % ini)


class Opaque:
    """A router the load-time check cannot look into."""

    def __init__(self, app):
        self._hidden = app

    def __call__(self, environ, start_response):
        return self._hidden(environ, start_response)


@pytest.mark.parametrize("path", ["/v2.1/acme", "/v2.1/acme/servers/7", "/v2.1/acme/x/y"])
def test_a_hidden_second_strip_answers_a_clear_error_never_a_wrong_strip(path):
    recorder = Recorder()
    app = TenantPath(Opaque(TenantPath(recorder, {"strip_tenant": "true"})), {"strip_tenant": "true"})
    status, _, body = call(app, make_environ("GET", path))
    assert status == 503
    assert json.loads(body)["errors"][0]["code"] == "tenancy.misconfigured-pipeline"
    assert recorder.seen == []


# Every spelling of the tenant header is removed.


SPELLINGS = ["HTTP_X-TENANT-ID", "HTTP_x_tenant_id", "HTTP_X_Tenant_Id", "HTTP_X-Tenant_ID", "http_x_tenant_id"]


@pytest.mark.parametrize("path", ["/v2.1/acme/servers", "/healthcheck"])
def test_every_spelling_of_the_tenant_header_is_removed(path):
    recorder = Recorder()
    environ = make_environ("GET", path)
    for key in SPELLINGS:
        environ[key] = "victim"
    assert call(TenantPath(recorder, {}), environ)[0] == 200
    (seen,) = recorder.seen
    assert [k for k in seen if k.upper().replace("-", "_") == "HTTP_X_TENANT_ID" and k != "HTTP_X_TENANT_ID"] == []
    # What frameworks would read as the header: only the filter's own value, or nothing.
    expected = "acme" if path != "/healthcheck" else None
    assert HttpHeaders(seen).get("X-Tenant-Id") == expected
    assert webob.Request(seen).headers.get("X-Tenant-Id") == expected


def _plain_app(environ, start_response):
    _plain_app.seen.append(environ)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"reached"]


_plain_app.seen = []


def test_many_headers_that_start_like_the_tenant_header_cost_no_per_header_work():
    # X-Tenant-Id-1 ... (waitress passes thousands of headers) are not
    # spellings of X-Tenant-Id: no per-key loop for them.
    headers = tuple(("X-Tenant-Id-%d" % i, "v") for i in range(2000))
    environ = make_environ("GET", "/v2.1/acme/servers", headers)
    status, calls = python_calls(TenantPath(_plain_app, {}), environ)
    assert status == 200
    assert calls < 400, calls


# The URL layout: bounded work, and no header a client forged.


@pytest.mark.parametrize(
    "target",
    ["/v2.1/servers/detail", "/v2.1/acme/servers/detail", "/v3/" + "volumes." * 900 + "json", "/v2.1/" + "x" * 255],
)
def test_the_layout_decides_in_a_bounded_number_of_calls(target):
    app = TenantPath(Recorder(), {"tenant_id_pattern": "[0-9a-z.-]+"})
    status, calls = python_calls(app, make_environ("GET", target))
    assert status in (200, 400)
    assert calls < 200, calls


@pytest.mark.parametrize("status_header", [None, "Invalid", "confirmed", "Confirmed "])
def test_a_forged_identity_never_becomes_the_token_tenant(status_header):
    # Without keystonemiddleware's exact "Confirmed", X-Project-Id is a client's word, never a tenant.
    recorder = Recorder()
    headers = [("X-Project-Id", "victim"), ("X-Tenant-Id", "victim")]
    if status_header is not None:
        headers.append(("X-Identity-Status", status_header))
    assert call(TenantPath(recorder, {"token_tenant": "true"}), make_environ("GET", "/v2.1/servers", headers))[0] == 200
    (seen,) = recorder.seen
    assert "tenancy.tenant_id" not in seen
    assert "HTTP_X_TENANT_ID" not in seen


@pytest.mark.parametrize("segment", ["SERVERS", "servers%20", "servers;x", "servers.json.x", "%73ervers"])
def test_a_collection_name_spelled_otherwise_is_a_tenant_the_router_would_not_route(segment):
    # Routes compares literals exactly: what is not the collection is read as a tenant (so checked as one),
    # except the percent-encoded form, which decodes to the collection itself.
    recorder = Recorder()
    assert call(TenantPath(recorder, {}), make_environ("GET", "/v2.1/%s/detail" % segment))[0] == 200
    decoded = urllib.parse.unquote(segment)
    assert recorder.seen[0].get("tenancy.tenant_id") == (None if decoded == "servers" else decoded)
