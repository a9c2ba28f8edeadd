"""admin_cull against hostile requests: bounded work whatever a client sends, and no spelling that hides an admin call.

Form bodies, queries, long targets and headers cost a bounded number of
Python calls; ``_method`` fields, media-type versions, mounts and override
headers are found however they are written.  Costs are asserted by counting
work (Python function calls while judging a request), never by timing: the
count does not depend on the machine.  The bench (``make bench``) measures
the time.
"""

from __future__ import annotations

import io
import json

import pytest
from django.http.request import HttpHeaders

from tenancy_mw.core.paths import DEFAULT_MAX_TARGET_LENGTH
from tenancy_mw.cull.filter import FORM_BODY_LIMIT, AdminCull
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.bypass_corpus import HIDDEN_MULTIPART
from tests.support.wsgi import call, make_environ, python_calls

FORM = (("Content-Type", "application/x-www-form-urlencoded"),)


def multipart(parts: int, size: int) -> bytes:
    piece = b'--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n'
    body = piece * parts
    return body + b"x" * max(0, size - len(body) - 8) + b"--zz--\r\n"


# Form bodies: judged in one linear pass, read once, never when it cannot matter.


BIG_BODIES = {
    "urlencoded a&a&...": (FORM, b"a&" * (FORM_BODY_LIMIT // 2)),
    "urlencoded ;_method; noise": (FORM, b"x;" * (FORM_BODY_LIMIT // 2 - 8) + b"_method=PATCH"),
    "no content type": ((), b"a=1&" * (FORM_BODY_LIMIT // 4)),
    "multipart 18000 parts": (
        (("Content-Type", "multipart/form-data; boundary=zz"),),
        multipart(18000, FORM_BODY_LIMIT),
    ),
}


@pytest.mark.parametrize("name", sorted(BIG_BODIES))
def test_judging_a_1mib_form_body_costs_a_bounded_number_of_calls(name):
    headers, body = BIG_BODIES[name]
    assert len(body) <= FORM_BODY_LIMIT
    app = AdminCull(Recorder(), {})
    status, calls = python_calls(app, make_environ("POST", "/v2.1/acme", headers, body))
    assert status == 200
    # Parsing the form with webob, as before, made one or more calls per field.
    assert calls < 400, calls


def test_the_app_gets_the_whole_body_after_the_scan():
    recorder = Recorder()
    body = b"a&" * 1000 + b"name=web1"
    assert call(AdminCull(recorder, {}), make_environ("POST", "/v2.1/acme", FORM, body))[0] == 200
    assert recorder.seen[0]["wsgi.input"].read() == body
    assert recorder.seen[0]["CONTENT_LENGTH"] == str(len(body))


class CountingInput(io.BytesIO):
    reads = 0

    def read(self, *args):
        CountingInput.reads += 1
        return super().read(*args)


@pytest.mark.parametrize("order", ["admin_cull first", "tenant_path first"])
def test_a_form_body_is_read_once_with_a_stripping_tenant_path(order):
    recorder = Recorder()
    if order == "admin_cull first":
        app = AdminCull(TenantPath(recorder, {"strip_tenant": "true"}), {})
    else:
        app = TenantPath(AdminCull(recorder, {}), {"strip_tenant": "true"})
    body = b"name=x&_method=PATCH"
    environ = make_environ("POST", "/v2.1/x/acme", FORM, body)
    CountingInput.reads = 0
    environ["wsgi.input"] = CountingInput(body)
    assert call(app, environ)[0] == 200
    assert CountingInput.reads == 1
    assert recorder.seen[0]["wsgi.input"].read() == body


class ExplodingInput:
    def read(self, *args):
        raise AssertionError("the body was read")


@pytest.mark.parametrize("path", ["/v2.1/acme", "/v2.1/acme/servers"])
def test_refuse_mode_never_reads_a_body(path):
    recorder = Recorder()
    app = AdminCull(recorder, {"method_override": "refuse"})
    environ = make_environ("POST", path, FORM)
    environ["CONTENT_LENGTH"] = "20"
    environ["wsgi.input"] = ExplodingInput()
    status, _, body = call(app, environ)
    if path == "/v2.1/acme":  # admin for PUT/DELETE: a form could name them; refused unread
        assert status == 400
        assert json.loads(body)["errors"][0]["code"] == "tenancy.method-override-refused"
        assert recorder.seen == []
    else:
        assert status == 200


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (FORM, b"a=1&_method=DELETE"),
        (FORM, b"a=1;+%5FMETHOD+=delete"),
        (FORM, b"_m%45thod=put"),
        ((), b"_method=DELETE"),
        (
            (("Content-Type", "multipart/form-data; boundary=zz"),),
            b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n',
        ),
        (
            (("Content-Type", "multipart/form-data; boundary=zz"),),
            b"--zz\nContent-Disposition: form-data; name=_METHOD\n\nput\n--zz--\n",
        ),
    ],
)
def test_method_fields_are_still_found(headers, body):
    recorder = Recorder()
    assert call(AdminCull(recorder, {}), make_environ("POST", "/v2.1/acme", headers, body))[0] == 404
    assert recorder.seen == []


def test_a_multipart_name_spelling_method_with_escapes_is_refused():
    # RFC 2231 names (Django decodes them; webob does not): refused unread-as-a-guess, never passed.
    recorder = Recorder()
    body = b"--zz\r\ncontent-disposition: form-data; name*=utf-8''%5Fmethod\r\n\r\nPUT\r\n--zz--\r\n"
    headers = (("Content-Type", "multipart/form-data; boundary=zz"),)
    status, _, out = call(AdminCull(recorder, {}), make_environ("POST", "/v2.1/acme", headers, body))
    assert status == 400
    assert json.loads(out)["errors"][0]["code"] == "tenancy.unreadable-form"
    assert recorder.seen == []


def test_a_body_mentioning_method_too_often_is_refused_on_an_admin_path():
    body = b"&".join(b"_method=GET" for _ in range(100))
    status, _, out = call(AdminCull(Recorder(), {}), make_environ("POST", "/v2.1/acme", FORM, body))
    assert status == 400
    assert "_method" in json.loads(out)["errors"][0]["detail"]


def test_a_form_with_more_escapes_than_are_decoded_is_refused_on_an_admin_path():
    from tenancy_mw.cull.overrides import MAX_ESCAPES

    recorder = Recorder()
    app = AdminCull(recorder, {})
    body = b"a=" + b"%C3%A1" * (MAX_ESCAPES // 2 + 1)
    status, _, out = call(app, make_environ("POST", "/v2.1/acme", FORM, body))
    assert status == 400
    assert json.loads(out)["errors"][0]["code"] == "tenancy.unreadable-form"
    # Up to the bound the escapes are decoded: an escaped _method is still found.
    body = b"a=" + b"%C3%A1" * (MAX_ESCAPES // 2 - 8) + b"&%5Fm%45thod=DELETE"
    assert call(app, make_environ("POST", "/v2.1/acme", FORM, body))[0] == 404
    # On a public path the body is never read, whatever it holds.
    body = b"a=" + b"%C3%A1" * MAX_ESCAPES
    assert call(app, make_environ("POST", "/v2.1/acme/servers", FORM, body))[0] == 200
    assert len(recorder.seen) == 1


@pytest.mark.parametrize("router", ["routes", "pecan get_one(tenant_id)"])
@pytest.mark.parametrize("name", sorted(HIDDEN_MULTIPART))
def test_a_multipart_method_field_is_found_however_its_headers_are_written(router, name):
    from tests.support.routers import DEPLOYMENTS

    content_type, body = HIDDEN_MULTIPART[name]
    deployment = {d.name: d for d in DEPLOYMENTS}[router]

    def send(pipeline):
        app, probe = deployment.build(pipeline)
        status, _, out = call(app, make_environ("POST", "/v2.1/acme", (("Content-Type", content_type),), body))
        return status, out, probe.hits

    # The router itself reads the part as _method=DELETE: a tenant delete.
    assert json.loads(send(lambda app: app)[1])["handler"] == "admin:delete-tenant"
    status, _, hits = send(lambda app: AdminCull(app, {}))
    assert status in (400, 404)
    assert hits == 0


# Long queries, targets and headers (waitress accepts about 256 KB of headers): bounded work.


def test_a_long_query_costs_a_bounded_number_of_calls():
    query = "a;" * 3000 + "x=method"
    status, calls = python_calls(AdminCull(Recorder(), {}), make_environ("GET", "/v2.1/acme?" + query))
    assert status == 200
    assert calls < 300, calls


@pytest.mark.parametrize(
    "path",
    [
        "/v2.1/acme/" + "%C3%A1\\action\\move" * 400,
        "/v2.1/acme/" + "\\" * 8000,
        "/v2.1/acme/" + "a\\" * 4000,
        "/v2.1/" + "v1/" * 2600,
    ],
    ids=["accented-backslash-actions", "backslashes", "backslash-segments", "version-run"],
)
def test_long_targets_within_the_limit_cost_a_bounded_number_of_calls(path):
    assert len(path) <= DEFAULT_MAX_TARGET_LENGTH
    status, calls = python_calls(AdminCull(Recorder(), {}), make_environ("POST", path))
    assert status in (400, 404)
    assert calls < 2000, calls


LONG_HEADERS = {
    "Accept versions": (("Accept", "application/json" + ";version=2.1" * 20000),),
    "override list": (("X-HTTP-Method-Override", "GET," * 60000),),
    "content type params": (("Content-Type", "multipart/form-data" + ";a=b" * 60000 + ";boundary=zz"),),
}


@pytest.mark.parametrize("name", sorted(LONG_HEADERS))
@pytest.mark.parametrize("conf", [{}, {"method_override": "refuse"}], ids=["cull", "refuse"])
def test_long_headers_cost_a_bounded_number_of_calls(name, conf):
    body = b'--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--zz--\r\n'
    environ = make_environ("POST", "/v2.1/acme", LONG_HEADERS[name], body)
    status, calls = python_calls(AdminCull(Recorder(), conf), environ)
    assert status in (200, 400)
    # A constant (the rules tried under each version found), not one per ";".
    assert calls < 600, calls


@pytest.mark.parametrize(
    "header",
    [
        ("Accept", ";" * 250_000 + "version=2.1"),
        ("Accept", " ;" * 125_000 + "version=2.1"),
        ("Content-Type", "multipart/form-data" + ";" * 250_000 + ";boundary=zz"),
    ],
    ids=["accept-semicolons", "accept-spaced-semicolons", "content-type-semicolons"],
)
def test_a_256k_media_type_header_costs_a_bounded_number_of_calls(header):
    # Before: a regular expression tried at every ";" (about 10 ms per judge).
    body = b'--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--zz--\r\n'
    environ = make_environ("POST", "/v2.1/acme", (header,), body)
    app = AdminCull(TenantPath(Recorder(), {"strip_tenant": "true"}), {})
    status, calls = python_calls(app, environ)
    assert status in (200, 400)
    # A constant (the rules tried under each version found), not one per ";".
    assert calls < 600, calls


# Versions named by media types, for a version-routing urlmap behind the filter.


@pytest.mark.parametrize(
    ("method", "path", "header"),
    [
        ("DELETE", "/acme", ("Accept", "application/json;version=2.1")),
        ("PUT", "/acme", ("Accept", 'text/html;q=0.1, application/json; Version="2.1"')),
        ("POST", "/acme/action/restore", ("Content-Type", "application/json;version=2.1")),
        ("GET", "/acme/action", ("Accept", "application/json;version=2.1/anything")),
    ],
)
def test_a_media_type_version_is_judged_as_a_mount(method, path, header):
    recorder = Recorder()
    assert call(AdminCull(recorder, {}), make_environ(method, path, (header,)))[0] == 404
    assert recorder.seen == []


def test_public_calls_with_a_media_type_version_pass():
    recorder = Recorder()
    app = AdminCull(recorder, {})
    accept = (("Accept", "application/json;version=2.1"),)
    assert call(app, make_environ("GET", "/acme/servers", accept))[0] == 200
    assert call(app, make_environ("DELETE", "/acme/servers/7", accept))[0] == 200
    assert len(recorder.seen) == 2


def test_too_many_media_type_versions_are_refused():
    accept = ", ".join("application/json;version=2.%d" % i for i in range(20))
    status, _, body = call(AdminCull(Recorder(), {}), make_environ("GET", "/acme/servers", (("Accept", accept),)))
    assert status == 400
    assert json.loads(body)["errors"][0]["code"] == "tenancy.too-many-versions"


def test_media_type_versions_are_still_found_after_long_noise():
    recorder = Recorder()
    accept = (("Accept", ";" * 100_000 + 'application/json; "Version" = "2.1"'),)
    assert call(AdminCull(recorder, {}), make_environ("DELETE", "/acme", accept))[0] == 404
    assert recorder.seen == []


# Mounts: every plausible split into mount, version and tenant is judged.


@pytest.mark.parametrize("mount", ["/v1/compute", "/api/v1/x"])
def test_a_mount_holding_a_version_then_an_ordinary_segment_hides_no_tenant_call(mount):
    # Every plausible split into mount, version and tenant is judged, also a
    # mount whose own path holds a version-like segment then an ordinary one.
    from paste.urlmap import URLMap

    from tests.support.routers import flask_app

    urlmap = URLMap()
    urlmap[mount] = flask_app()
    target = mount + "/v2.1/acme"
    assert json.loads(call(urlmap, make_environ("DELETE", target))[2])["handler"] == "admin:delete-tenant"
    app = AdminCull(urlmap, {})
    for method in ("PUT", "DELETE"):
        assert call(app, make_environ(method, target))[0] == 404
    assert call(app, make_environ("GET", target))[0] == 200
    assert call(app, make_environ("DELETE", target + "/servers/7"))[0] == 200


def test_the_price_of_judging_every_split_is_that_default_rules_cull_version_like_parents():
    # Failing closed: PUT/DELETE of a path ending in a version-like segment
    # and one more is culled; a service with such paths replaces the defaults.
    recorder = Recorder()
    assert call(AdminCull(recorder, {}), make_environ("PUT", "/v1/AUTH_acme/v2/photo.jpg"))[0] == 404
    assert recorder.seen == []
    own = AdminCull(recorder, {"default_rules": "false", "rules": "PUT,DELETE /v1/{tenant}"})
    assert call(own, make_environ("PUT", "/v1/AUTH_acme/v2/photo.jpg"))[0] == 200


# Override headers in every environ spelling a framework reads.


@pytest.mark.parametrize(
    "key",
    ["HTTP_X-HTTP-METHOD-OVERRIDE", "HTTP_x_http_method_override", "HTTP_X_Method_Override", "HTTP_X-HTTP-Method"],
)
@pytest.mark.parametrize("conf", [{}, {"method_override": "refuse"}], ids=["cull", "refuse"])
def test_override_headers_in_any_spelling_a_framework_reads_are_judged(key, conf):
    # Django's request.headers reads these environ keys as the override headers.
    recorder = Recorder()
    environ = make_environ("POST", "/v2.1/acme")
    environ[key] = "DELETE"
    assert HttpHeaders(environ).get(key[5:].replace("_", "-")) == "DELETE"
    status = call(AdminCull(recorder, conf), environ)[0]
    assert status == (404 if not conf else 400)
    assert recorder.seen == []


def test_two_spellings_of_an_override_header_side_by_side_are_both_judged():
    recorder = Recorder()
    environ = make_environ("POST", "/v2.1/acme")
    environ["HTTP_X_HTTP_METHOD_OVERRIDE"] = "GET"
    environ["HTTP_x_http_method_override"] = "DELETE"
    assert call(AdminCull(recorder, {}), environ)[0] == 404
    assert recorder.seen == []
