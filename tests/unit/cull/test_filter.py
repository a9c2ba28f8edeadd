"""The admin_cull filter in process: behaviour, options, and the bypass corpus."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import webtest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from oslo_middleware.request_id import RequestId

from tenancy_mw.core.base import ConfigError
from tenancy_mw.cull.filter import AdminCull, _judged_as
from tenancy_mw.cull.rules import PathView
from tenancy_mw.tenants.ids import DEFAULT_VERSION_PATTERN
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.bypass_corpus import FAIL_CLOSED_CALLS, PUBLIC_CALLS, STRIP_ATTACKS, admin_corpus
from tests.support.wsgi import call, make_environ

VERSION = re.compile(DEFAULT_VERSION_PATTERN, re.IGNORECASE)

CORPUS = admin_corpus()
RAW_KEYS = ["RAW_URI", "REQUEST_URI", None]


def build(conf=None, before=None):
    recorder = Recorder()
    app = AdminCull(recorder, conf or {})
    if before is not None:
        app = before(app)
    return app, recorder


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 100
    assert len({(r.method, r.target, r.headers, r.body) for r in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("raw_key", RAW_KEYS, ids=["gunicorn", "waitress", "no-raw-target"])
@pytest.mark.parametrize(
    "stack",
    ["alone", "after-tenant_path", "after-stripping-tenant_path", "before-tenant_path"],
)
def test_no_admin_call_of_the_corpus_reaches_the_app(raw_key, stack):
    recorder = Recorder()
    if stack == "alone":
        app = AdminCull(recorder, {})
    elif stack == "after-tenant_path":
        app = TenantPath(AdminCull(recorder, {}), {})
    elif stack == "after-stripping-tenant_path":
        app = TenantPath(AdminCull(recorder, {}), {"strip_tenant": "true"})
    else:
        app = AdminCull(TenantPath(recorder, {}), {})
    leaked = []
    for request in CORPUS:
        before = len(recorder.seen)
        environ = make_environ(request.method, request.target, request.headers, request.body, raw_key=raw_key)
        status, _, body = call(app, environ)
        if len(recorder.seen) != before or status < 400:
            leaked.append((request.note, request.method, request.target, status))
        else:
            assert status in (400, 404), (request, status, body)
            if request.method != "HEAD":
                assert json.loads(body)["errors"][0]["status"] == status
    assert leaked == []


@pytest.mark.parametrize("raw_key", RAW_KEYS, ids=["gunicorn", "waitress", "no-raw-target"])
@pytest.mark.parametrize("public", PUBLIC_CALLS, ids=lambda p: "%s %s" % (p.method, p.target))
def test_public_calls_pass_unchanged(public, raw_key):
    app, recorder = build()
    environ = make_environ(public.method, public.target, public.headers, public.body, raw_key=raw_key)
    sent = dict(environ)
    status, _, _ = call(app, environ)
    assert status == 200
    (seen,) = recorder.seen
    for key in ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE"):
        assert seen.get(key) == sent.get(key), key
    assert {k: v for k, v in seen.items() if k.startswith("HTTP_")} == {
        k: v for k, v in sent.items() if k.startswith("HTTP_")
    }
    assert seen["wsgi.input"].read() == public.body


@pytest.mark.parametrize("public", FAIL_CLOSED_CALLS, ids=lambda p: "%s %s" % (p.method, p.target))
def test_calls_that_could_be_a_tenant_call_below_a_mount_are_culled_unless_the_defaults_are_replaced(public):
    app, recorder = build()
    assert call(app, make_environ(public.method, public.target))[0] == 404
    assert recorder.seen == []
    app, recorder = build({"default_rules": "false", "rules": "PUT,DELETE /{version}/{tenant}"})
    assert call(app, make_environ(public.method, public.target))[0] == 200
    assert len(recorder.seen) == 1


@pytest.mark.parametrize("raw_key", RAW_KEYS, ids=["gunicorn", "waitress", "no-raw-target"])
def test_mount_point_named_like_a_version_does_not_hide_the_call(raw_key):
    # e.g. http_proxy_to_wsgi setting SCRIPT_NAME from X-Forwarded-Prefix: /v1
    app, recorder = build()
    environ = make_environ("DELETE", "/v1/v2.1/acme", raw_key=raw_key, script_name="/v1")
    assert environ["PATH_INFO"] == "/v2.1/acme"
    assert call(app, environ)[0] == 404
    assert recorder.seen == []


def test_form_body_stays_readable_after_looking_for_method():
    app, recorder = build()
    body = b"name=web1&flavor=small"
    environ = make_environ("POST", "/v2.1/acme/servers", (("Content-Type", "application/x-www-form-urlencoded"),), body)
    assert call(app, environ)[0] == 200
    assert recorder.seen[0]["wsgi.input"].read() == body


def test_cull_answers_404_by_default_and_names_nothing():
    app, recorder = build()
    status, headers, body = call(app, make_environ("DELETE", "/v2.1/acme"))
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)["errors"][0]
    assert error["code"] == "tenancy.not-found"
    assert "admin" not in error["detail"]
    assert recorder.seen == []


def test_cull_status_403_names_the_call():
    app, _ = build({"cull_status": "403"})
    status, _, body = call(app, make_environ("POST", "/v2.1/acme/action/move?dest=b"))
    assert status == 403
    assert "POST /v2.1/acme/action/move" in json.loads(body)["errors"][0]["detail"]


def test_cull_status_accepts_only_403_or_404():
    with pytest.raises(ConfigError, match="cull_status"):
        AdminCull(Recorder(), {"cull_status": "200"})


def test_tenant_reads_are_public_unless_configured():
    app, recorder = build()
    assert call(app, make_environ("GET", "/v2.1/acme"))[0] == 200
    assert call(app, make_environ("HEAD", "/v2.1/acme"))[0] == 200
    strict, strict_seen = build({"cull_tenant_reads": "true"})
    assert call(strict, make_environ("GET", "/v2.1/acme"))[0] == 404
    assert call(strict, make_environ("HEAD", "/v2.1/acme"))[0] == 404
    assert call(strict, make_environ("GET", "/v2.1/acme/servers"))[0] == 200
    assert len(strict_seen.seen) == 1


def test_operator_rules_from_paste_style_multiline_value():
    rules = "\n# nova admin APIs\nPUT,DELETE /os-services/*\n* /os-hypervisors/**\n"
    app, recorder = build({"rules": rules})
    assert call(app, make_environ("DELETE", "/v2.1/acme/os-services/3"))[0] == 404
    assert call(app, make_environ("PUT", "/v2.1/os-services/3"))[0] == 404
    assert call(app, make_environ("GET", "/v2.1/acme/os-hypervisors/detail"))[0] == 404
    assert call(app, make_environ("GET", "/v2.1/acme/os-services"))[0] == 200
    assert call(app, make_environ("DELETE", "/v2.1/acme"))[0] == 404  # defaults still apply
    assert len(recorder.seen) == 1


def test_default_rules_can_be_turned_off():
    app, _ = build({"default_rules": "false", "rules": "DELETE /os-services/*"})
    assert call(app, make_environ("DELETE", "/v2.1/acme"))[0] == 200
    assert call(app, make_environ("DELETE", "/v2.1/acme/os-services/1"))[0] == 404


@pytest.mark.parametrize("bad", ["GET os-services", "FETCH! /x", "* /a/{project}/b", "/only-a-path"])
def test_bad_rule_fails_at_load_naming_it(bad):
    with pytest.raises(ConfigError) as caught:
        AdminCull(Recorder(), {"rules": "PUT /fine/*\n" + bad})
    assert "rules" in str(caught.value)
    assert bad.split()[0] in str(caught.value)


def test_method_override_refuse_mode():
    app, recorder = build({"method_override": "refuse"})
    environ = make_environ("POST", "/v2.1/acme/servers", (("X-HTTP-Method-Override", "PUT"),))
    status, _, body = call(app, environ)
    assert status == 400
    assert "'PUT'" in json.loads(body)["errors"][0]["detail"]
    assert call(app, make_environ("POST", "/v2.1/acme/servers?_method=GET"))[0] == 400
    assert recorder.seen == []


def test_harmless_override_passes_in_cull_mode():
    app, recorder = build()
    environ = make_environ("POST", "/v2.1/acme/servers", (("X-HTTP-Method-Override", "GET"),))
    assert call(app, environ)[0] == 200
    assert recorder.seen[0]["HTTP_X_HTTP_METHOD_OVERRIDE"] == "GET"


def test_broken_multipart_on_an_admin_path_never_reaches_the_app():
    app, recorder = build()
    environ = make_environ(
        "POST",
        "/v2.1/acme",
        (("Content-Type", "multipart/form-data; boundary=zzz"),),
        b'--zzz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE',
    )
    status, _, _ = call(app, environ)
    assert status in (400, 404)
    assert recorder.seen == []


ADMIN_HEADERS = (("X-Identity-Status", "Confirmed"), ("X-Roles", "member,Cloud-Admin"))


def test_admin_roles_let_confirmed_admins_through():
    app, recorder = build({"admin_roles": "cloud-admin"})
    assert call(app, make_environ("DELETE", "/v2.1/acme", ADMIN_HEADERS))[0] == 200
    assert len(recorder.seen) == 1


@pytest.mark.parametrize(
    "headers",
    [
        (("X-Identity-Status", "Invalid"), ("X-Roles", "cloud-admin")),
        (("X-Roles", "cloud-admin"),),
        (("X-Identity-Status", "Confirmed"), ("X-Roles", "member,reader")),
        (("X-Identity-Status", "confirmed"), ("X-Roles", "cloud-admin")),
    ],
)
def test_admin_roles_need_a_confirmed_token_with_the_role(headers):
    app, recorder = build({"admin_roles": "cloud-admin"})
    assert call(app, make_environ("DELETE", "/v2.1/acme", headers))[0] == 404
    assert recorder.seen == []


def test_without_admin_roles_role_headers_are_not_trusted():
    app, recorder = build()
    assert call(app, make_environ("DELETE", "/v2.1/acme", ADMIN_HEADERS + (("X-Roles", "admin"),)))[0] == 404
    assert recorder.seen == []


def test_culls_are_logged_with_method_path_client_and_request_id(caplog):
    recorder = Recorder()
    app = webtest.TestApp(RequestId(AdminCull(recorder, {})))
    with caplog.at_level(logging.INFO, logger="tenancy_mw.admin_cull"):
        response = app.delete(
            "/v2.1/acme", expect_errors=True, extra_environ={"REMOTE_ADDR": "198.51.100.7", "RAW_URI": "/v2.1/acme"}
        )
    assert response.status_int == 404
    request_id = response.headers["x-openstack-request-id"]
    assert response.json["errors"][0]["request_id"] == request_id
    (record,) = [r for r in caplog.records if r.name == "tenancy_mw.admin_cull"]
    assert record.levelno == logging.INFO
    message = record.getMessage()
    for part in ("DELETE", "/v2.1/acme", "198.51.100.7", request_id):
        assert part in message


def test_nova_error_format():
    app, _ = build({"error_format": "nova"})
    status, _, body = call(app, make_environ("PUT", "/v2.1/acme"))
    assert status == 404
    assert json.loads(body) == {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}


# Property-based: any mix of rewrites applied to an admin call is culled or refused.

ADMIN_BASES = [
    ("DELETE", ["v2.1", "acme"]),
    ("PUT", ["v1.0", "Bob's Tenant"]),
    ("POST", ["v2.1", "acme", "action", "move"]),
    ("GET", ["v2.1", "acme", "servers", "7", "action", "move"]),
    ("POST", ["v2.1", "acme", "action", "restore"]),
]


def _encode_char(ch, lower):
    out = "".join("%%%02X" % b for b in ch.encode("utf-8"))
    return out.lower() if lower else out


@st.composite
def admin_variants(draw):
    method, segments = draw(st.sampled_from(ADMIN_BASES))
    pieces = []
    for segment in segments:
        text = ""
        for ch in segment:
            choice = draw(st.integers(0, 5))
            if choice == 0:
                text += _encode_char(ch, draw(st.booleans()))
            elif choice == 1 and ch.isalpha():
                text += ch.swapcase()
            elif ch == " ":
                text += "%20"
            else:
                text += ch
        if draw(st.integers(0, 7)) == 0:
            text += ";" + draw(st.sampled_from(["x", "a=b", ""]))
        pieces.append(text)
    separators = [draw(st.sampled_from(["/", "/", "/", "//", "/./", "\\"])) for _ in pieces]
    if separators[0] == "\\":
        separators[0] = "/"
    path = "".join(sep + piece for sep, piece in zip(separators, pieces, strict=True))
    if draw(st.booleans()):
        path += "/"
    if draw(st.integers(0, 4)) == 0:
        path = "/compute" + path
    if draw(st.integers(0, 4)) == 0:
        path = "http://h.example" + path
    path += draw(st.sampled_from(["", "?dest=b", "?x=/v2.1/acme/servers"]))
    method_form = draw(st.sampled_from(["same", "lower", "override", "query"]))
    headers = ()
    if method_form == "lower":
        method = method.lower()
    elif method_form == "override":
        headers = ((draw(st.sampled_from(["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"])), method),)
        method = "POST"
    elif method_form == "query":
        path += ("&" if "?" in path else "?") + "_method=" + method
        method = "POST"
    if method == "GET" and draw(st.booleans()):
        method = "HEAD"
    return method, path, headers


@settings(max_examples=400, deadline=None)
@given(admin_variants(), st.sampled_from(RAW_KEYS))
def test_generated_admin_variants_never_reach_the_app(variant, raw_key):
    method, target, headers = variant
    app, recorder = build()
    status, _, _ = call(app, make_environ(method, target, headers, raw_key=raw_key))
    assert recorder.seen == [], (method, target, headers)
    assert status in (400, 404)


# Regressions from the adversarial review.

STRIP_STACKS = {
    "admin_cull after stripping tenant_path": lambda app: TenantPath(AdminCull(app, {}), {"strip_tenant": "true"}),
    "admin_cull before stripping tenant_path": lambda app: AdminCull(TenantPath(app, {"strip_tenant": "true"}), {}),
}


@pytest.mark.parametrize("raw_key", RAW_KEYS, ids=["gunicorn", "waitress", "no-raw-target"])
@pytest.mark.parametrize("stack", sorted(STRIP_STACKS))
@pytest.mark.parametrize("attack", STRIP_ATTACKS, ids=lambda a: a.note)
def test_stripped_path_is_judged_too(attack, stack, raw_key):
    recorder = Recorder()
    app = STRIP_STACKS[stack](recorder)
    environ = make_environ(attack.method, attack.target, attack.headers, attack.body, raw_key=raw_key)
    status, _, _ = call(app, environ)
    assert recorder.seen == [], [(s["SCRIPT_NAME"], s["PATH_INFO"]) for s in recorder.seen]
    assert status in (400, 404)


@pytest.mark.parametrize("stack", sorted(STRIP_STACKS))
def test_stripping_still_serves_public_calls(stack):
    recorder = Recorder()
    app = STRIP_STACKS[stack](recorder)
    assert call(app, make_environ("GET", "/v2.1/acme/servers/7"))[0] == 200
    assert (recorder.seen[0]["SCRIPT_NAME"], recorder.seen[0]["PATH_INFO"]) == ("/acme", "/v2.1/servers/7")


def test_operator_rules_match_under_a_mount_point():
    app, recorder = build({"rules": "PUT,DELETE /os-services/**"})
    environ = make_environ("DELETE", "/compute/os-services/3", script_name="/compute")
    assert call(app, environ)[0] == 404
    assert recorder.seen == []


def test_forwarded_prefix_hides_nothing():
    # oslo.middleware's HTTPProxyToWSGI moves a client's X-Forwarded-Prefix into SCRIPT_NAME.
    from oslo_middleware.http_proxy_to_wsgi import HTTPProxyToWSGI

    recorder = Recorder()
    cull = AdminCull(recorder, {"rules": "PUT,DELETE /os-services/**"})
    proxy = HTTPProxyToWSGI(cull)
    proxy.oslo_conf.set_override("enable_proxy_headers_parsing", True, group="oslo_middleware")
    try:
        for target, prefix in (("/os-services/3", "/x"), ("/v2.1/acme", "/v1")):
            environ = make_environ("DELETE", target, (("X-Forwarded-Prefix", prefix),))
            assert call(proxy, environ)[0] == 404, target
    finally:
        proxy.oslo_conf.clear_override("enable_proxy_headers_parsing", group="oslo_middleware")
    assert recorder.seen == []


class ExplodingInput:
    """A wsgi.input that must not be read."""

    def read(self, *args):
        raise AssertionError("the body was read")


def test_public_form_posts_are_not_read():
    app, recorder = build()
    environ = make_environ("POST", "/v2.1/acme/servers", (("Content-Type", "application/x-www-form-urlencoded"),))
    environ["CONTENT_LENGTH"] = str(200 * 1024 * 1024)
    environ["wsgi.input"] = ExplodingInput()
    assert call(app, environ)[0] == 200
    assert recorder.seen[0]["wsgi.input"] is environ["wsgi.input"]


def test_large_form_on_an_admin_path_is_refused_unread():
    from tenancy_mw.cull.filter import FORM_BODY_LIMIT

    app, recorder = build()
    environ = make_environ("POST", "/v2.1/acme", (("Content-Type", "application/x-www-form-urlencoded"),))
    environ["CONTENT_LENGTH"] = str(FORM_BODY_LIMIT + 1)
    environ["wsgi.input"] = ExplodingInput()
    status, _, body = call(app, environ)
    assert status == 413
    assert json.loads(body)["errors"][0]["code"] == "tenancy.form-too-large"
    assert recorder.seen == []


class BrokenInput:
    """A wsgi.input that fails like gunicorn's on a bad chunk, and cannot seek."""

    def read(self, *args):
        raise OSError("Invalid chunk size")


def test_unreadable_body_on_an_admin_path_is_a_400_not_a_crash():
    app, recorder = build()
    environ = make_environ("POST", "/v2.1/acme", (("Content-Type", "application/x-www-form-urlencoded"),))
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input_terminated"] = True
    environ["wsgi.input"] = BrokenInput()
    status, _, body = call(app, environ)
    assert status == 400
    assert "Invalid chunk size" in json.loads(body)["errors"][0]["detail"]
    assert recorder.seen == []


def test_admin_path_form_body_stays_readable_for_the_app():
    app, recorder = build()
    body = b"name=x&_method=PATCH"
    environ = make_environ("POST", "/v2.1/acme", (("Content-Type", "application/x-www-form-urlencoded"),), body)
    assert call(app, environ)[0] == 200
    assert recorder.seen[0]["wsgi.input"].read() == body


# Regressions from the acceptance review.


@pytest.mark.parametrize("conf", [{}, {"method_override": "refuse"}], ids=["cull", "refuse"])
@pytest.mark.parametrize("target", ["/v2.1/acme?a=%FF", "/v2.1/acme?_method=%FF%FE", "/v2.1/acme/servers?a=%C3%28;b"])
def test_malformed_query_never_crashes(conf, target):
    app, recorder = build(conf)
    status, headers, body = call(app, make_environ("GET", target))
    assert status in (200, 400)
    if status == 400:
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["errors"][0]["status"] == 400


def test_too_many_segments_are_refused_before_matching():
    app, recorder = build()
    status, _, body = call(app, make_environ("GET", "/v2.1/acme" + "/x" * 99))
    assert status == 400
    error = json.loads(body)["errors"][0]
    assert error["code"] == "tenancy.path-too-deep"
    assert "101" in error["detail"]
    assert recorder.seen == []
    assert call(app, make_environ("GET", "/v2.1/acme" + "/x" * 98))[0] == 200


def test_matching_work_grows_linearly_with_the_path(monkeypatch):
    """A long path cannot make '**' matching explode: count the segment comparisons."""
    from tenancy_mw.cull import rules as cull_rules

    calls = []
    real = cull_rules._literal_matches

    def counting(literal, segment):
        calls.append(segment)
        return real(literal, segment)

    monkeypatch.setattr(cull_rules, "_literal_matches", counting)
    rule = "* /os-a/**/os-b/**/os-c/**/os-d"
    app, recorder = build({"rules": rule, "max_segments": "5000", "max_target_length": "100000"})
    segments = ("os-a/os-b/os-c/" * 600).split("/")[:-1]
    path = "/v2.1/acme/" + "/".join(segments)
    assert call(app, make_environ("GET", path))[0] == 200
    tokens = len(cull_rules.parse_rule(rule).tokens)
    assert len(calls) <= tokens * (len(segments) + 2) * 2


def test_long_paths_beyond_the_cap_are_cheap_to_refuse():
    app, _ = build()
    path = "/v2.1/acme/" + "action/a/" * 800 + "move"
    assert call(app, make_environ("GET", path))[0] == 400
    assert call(app, make_environ("GET", path + "/x" * 500))[0] == 414


_GROUPED_SEGMENTS = ["v1", "v2.1", "acme", "action", "move", "os-services", "x", "servers", "V3", "v2;p"]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_GROUPED_SEGMENTS), min_size=1, max_size=6),
    st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "PROPFIND"]),
)
def test_grouped_rules_decide_as_every_rule_tried_one_by_one(segments, method):
    # The filter tries rules by group (a literal or a version test skips a
    # group); trying every rule in turn must cull exactly the same requests.
    from tenancy_mw.core.paths import canonical_path
    from tenancy_mw.cull.filter import _judged_as

    cull = AdminCull(None, {"rules": "PUT,DELETE /os-services/*\nPATCH /{version}/*/x\n* /**/{version}/servers"})
    path = "/" + "/".join(segments)
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "RAW_URI": path}
    view = cull._view(canonical_path(dict(environ)))
    expected = any(rule.matches_view(view, _judged_as(method)) for rule in cull.rules)
    assert (cull.judge(environ) is not None) is expected, (method, path)


# nova's admin calls as derived from its policy (bench/nova-policy-rules.txt,
# which tests/openstack keeps equal to what the derivation prints for nova).
NOVA_RULES = (Path(__file__).resolve().parents[3] / "bench" / "nova-policy-rules.txt").read_text()
_NOVA_SEGMENTS = [
    "v2.1",
    "V2.1",
    "v2",
    "acme",
    "servers",
    "Servers.json",
    "detail",
    "7",
    "action",
    "Action.xml",
    "move",
    "migrations",
    "diagnostics",
    "os-hosts",
    "reboot",
    "flavors",
    "os-extra_specs",
    "os-aggregates",
    "os-hypervisors",
    "statistics",
    "os-services",
    "os-quota-sets",
    "os-availability-zone",
    "a.b",
    "v2;x",
    "os-hosts;p",
    "\uff53ervers",
    "restore",
    "reboot.json",
    "Diagnostics.xml",
    "migrations.json",
    "os-hosts.v1",
]


def _general_view(segments) -> PathView:
    """A view that takes the general matcher's road: every reading and start, no compiled program."""
    view = PathView(tuple(segments), VERSION, 0)
    view.plain = False
    view.simple = False
    return view


@settings(max_examples=800, deadline=None)
@example(["v2.1", "acme", "os-hosts", "7", "reboot.json"], "GET")
@example(["v2.1", "acme", "os-hosts.v1", "7", "Reboot"], "HEAD")
@example(["v2.1", "acme", "servers", "7", "migrations.json", "8"], "DELETE")
@given(
    st.lists(st.sampled_from(_NOVA_SEGMENTS), min_size=1, max_size=7),
    st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]),
)
def test_with_novas_rules_the_filter_culls_what_the_general_matcher_culls(segments, method):
    # The filter finds the rules to try by lookups and screens on a simple
    # path and matches them with compiled programs: the general matcher
    # (every rule, every reading, every start) must cull exactly the same
    # requests.  A member's action body: keyed rules never cull here.
    app, recorder = build({"rules": NOVA_RULES})
    path = "/" + "/".join(quote(segment, safe=";") for segment in segments)
    body = b'{"reboot": {"type": "SOFT"}}'
    status, _, _ = call(app, make_environ(method, path, (("Content-Type", "application/json"),), body))
    canonical = tuple(segment for segment in segments)
    judged = _judged_as(method)
    expected = any(
        rule.action_keys is None and rule.applies_to(judged) and rule.matches_path(_general_view(canonical))
        for rule in app.rules
    )
    assert status == (404 if expected else 200), (method, path)
