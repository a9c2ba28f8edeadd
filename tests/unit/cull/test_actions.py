"""admin_cull rules told apart by the JSON body's action key (tenancy_mw.cull.actions, and the filter).

``POST /servers/{id}/action`` with ``{"os-migrateLive": {...}}`` is an
admin call, with ``{"reboot": {...}}`` a member's.  The body is read only
on a path a keyed rule matches, once, within ACTION_BODY_LIMIT, and handed on
intact; every top-level key counts, folded; a body that is not one JSON
object is refused, never passed on unjudged.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
import webtest
from hypothesis import given, settings
from hypothesis import strategies as st
from webtest import TestApp

from tenancy_mw.core.base import ConfigError
from tenancy_mw.core.bodies import MAX_DEPTH
from tenancy_mw.cull import actions, forms
from tenancy_mw.cull.actions import (
    ACTION_BODY_LIMIT,
    ACTION_KEYS_KEY,
    MAX_CONTAINERS,
    body_action_keys,
    json_object_keys,
)
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.cull.forms import FORM_BODY_LIMIT, UnreadableBody
from tenancy_mw.cull.rules import fold_action_key
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.wsgi import call, make_environ

ADMIN_ACTIONS = "POST /servers/*/action (os-migrateLive,evacuate,os-resetState)"
ACTION_PATH = "/v2.1/acme/servers/7/action"
JSON = "application/json"


class BodyEcho:
    """A service that reads its body as PEP 3333 says (up to ``Content-Length``) and answers with it."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def __call__(self, environ, start_response):
        length = environ.get("CONTENT_LENGTH")
        if length:
            body = environ["wsgi.input"].read(int(length))
        else:
            body = environ["wsgi.input"].read() if environ.get("wsgi.input_terminated") else b""
        stream = environ["wsgi.input"]
        self.seen.append({"body": body, "content_length": environ.get("CONTENT_LENGTH"), "stream": stream})
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body)))])
        return [body]


class CountingInput(io.BytesIO):
    """A body stream that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, *args):
        piece = super().read(*args)
        self.bytes_read += len(piece)
        return piece


class ExplodingInput:
    """A wsgi.input that must not be read."""

    def read(self, *args):
        raise AssertionError("the body was read")


def counted(app, streams: list):
    """WSGI middleware putting the body in a CountingInput (kept in *streams*) before *app* sees it."""

    def middleware(environ, start_response):
        stream = CountingInput(environ["wsgi.input"].read())
        streams.append(stream)
        environ["wsgi.input"] = stream
        return app(environ, start_response)

    return middleware


def public(rules: str = ADMIN_ACTIONS, **conf) -> tuple[webtest.TestApp, BodyEcho]:
    service = BodyEcho()
    return webtest.TestApp(AdminCull(service, {"rules": rules, "cull_status": "403", **conf})), service


def post_json(app: webtest.TestApp, body: bytes, path: str = ACTION_PATH, **kwargs):
    return app.post(path, body, content_type=JSON, expect_errors=True, **kwargs)


def error_code(response) -> str:
    return response.json["errors"][0]["code"]


# The filter: which bodies are culled, which reach the service, and how.


@pytest.mark.parametrize(
    "body",
    [
        {"os-migrateLive": {"host": None, "block_migration": "auto"}},
        {"evacuate": {}},
        {"os-resetState": {"state": "active"}},
    ],
)
def test_admin_actions_are_culled(body):
    app, service = public()
    response = post_json(app, json.dumps(body).encode())
    assert response.status_int == 403
    assert error_code(response) == "tenancy.admin-call"
    assert service.seen == []


@pytest.mark.parametrize(
    "body",
    [{"reboot": {"type": "HARD"}}, {"os-start": None}, {"createImage": {"name": "os-migrateLive"}}, {}],
)
def test_member_actions_reach_the_service_with_the_same_bytes(body):
    app, service = public()
    data = json.dumps(body).encode()
    response = post_json(app, data)
    assert response.status_int == 200
    assert response.body == data
    assert [(seen["body"], seen["content_length"]) for seen in service.seen] == [(data, str(len(data)))]


def test_a_keyed_rule_leaves_other_paths_and_methods_alone():
    app, service = public()
    admin = json.dumps({"os-migrateLive": {}}).encode()
    assert post_json(app, admin, "/v2.1/acme/servers").status_int == 200
    assert post_json(app, admin, "/v2.1/acme/servers/7/actions").status_int == 200
    assert app.put(ACTION_PATH, admin, content_type=JSON).status_int == 200
    assert len(service.seen) == 3


@pytest.mark.parametrize(
    "data",
    [
        b'{"reboot": {"type": "SOFT"}, "os-migrateLive": {}, "reboot": {"type": "HARD"}}',
        b'{"os-migrateLive": {}, "os-migrateLive": {}}',
        b'{"OS-MIGRATELIVE": {}}',
        b'{"Evacuate": {}}',
        b'{" evacuate\\t": {}}',
        '{"\uff45vacuate": {}}'.encode(),
        '{"\uff2f\uff33-migrateLive": {}}'.encode(),
        b'{"\\u0065vacuate": {}}',
        b'{"\\uff45\\u0056ACUATE": {}}',
        b'{"os-resetState": NaN}',
        b'{"evacuate": 1' + b"0" * 5000 + b"}",
        b'{"evacuate": "line\nbreak"}',
    ],
    ids=[
        "duplicate-keys",
        "repeated-admin-key",
        "upper-case",
        "title-case",
        "outer-white-space",
        "fullwidth-e",
        "fullwidth-OS",
        "u-escape",
        "u-escapes-of-fullwidth-and-case",
        "nan",
        "5000-digit-number",
        "raw-control-character",
    ],
)
def test_every_spelling_of_an_admin_key_is_culled(data):
    app, service = public()
    assert post_json(app, data).status_int == 403
    assert service.seen == []


ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(("key", "status"), [("evacuate", 403), ("reboot", 200)])
def test_bodies_in_every_json_encoding_are_judged(encoding, key, status):
    app, service = public()
    data = json.dumps({key: {"note": "caf\u00e9"}}).encode(encoding)
    response = post_json(app, data)
    assert response.status_int == status
    if status == 200:
        assert service.seen[0]["body"] == data
    else:
        assert service.seen == []


def _nested(depth: int) -> bytes:
    """An action body whose arrays and objects nest *depth* levels deep, the object included."""
    return b'{"reboot": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(
    ("data", "fault"),
    [
        (b'[{"evacuate": {}}]', "a JSON array, not an object"),
        (b'"evacuate"', "a JSON string, not an object"),
        (b"12", "a JSON number, not an object"),
        (b"true", "a JSON boolean, not an object"),
        (b"null", "a JSON null, not an object"),
        (b'{"evacuate": {}', "not valid JSON"),
        (b'{"reboot": {}} {"evacuate": {}}', "not valid JSON"),
        (b"{'evacuate': {}}", "not valid JSON"),
        (b"   ", "not valid JSON"),
        (b'{"evacuat\xe9": {}}', "not valid JSON"),
        (b'{"evacuate": "\xff"}', "not valid JSON"),
        (b"name=x&evacuate=1", "not valid JSON"),
        (_nested(MAX_DEPTH + 1), "nested deeper than %d levels" % MAX_DEPTH),
        (b"[" * 4_000 + b"]" * 4_000, "nested deeper than %d levels" % MAX_DEPTH),
        # Unclosed: nested too deep or not valid JSON, as the Python's own scanner tells first.
        (b'{"reboot": ' + b"[" * 4_000 + b"}", "cannot be checked for its action: it is n"),
        (b'{"reboot": [' + b"[]," * MAX_CONTAINERS + b"1]}", "more arrays and objects than the %d" % MAX_CONTAINERS),
        (b'{"reboot": "' + b"{" * (MAX_CONTAINERS + 1) + b'"}', "more arrays and objects than the %d" % MAX_CONTAINERS),
    ],
    ids=[
        "array",
        "string",
        "number",
        "boolean",
        "null",
        "cut-short",
        "two-objects",
        "single-quotes",
        "white-space-only",
        "latin-1-key",
        "invalid-utf-8-value",
        "form-body",
        "one-level-too-deep",
        "deep-array",
        "deep-unclosed",
        "too-many-containers",
        "too-many-brackets-in-a-string",
    ],
)
def test_a_body_that_is_not_one_json_object_is_refused_on_a_keyed_path(data, fault):
    app, service = public()
    response = post_json(app, data)
    assert response.status_int == 400
    assert error_code(response) == "tenancy.unreadable-body"
    assert fault in response.json["errors"][0]["detail"]
    assert service.seen == []
    # ... and passes untouched where no keyed rule matches: the service answers it.
    assert post_json(app, data, "/v2.1/acme/servers").status_int == 200


def test_nesting_up_to_the_bound_is_read():
    app, service = public()
    assert post_json(app, _nested(MAX_DEPTH)).status_int == 200
    assert service.seen[0]["body"] == _nested(MAX_DEPTH)


def test_the_body_is_judged_whatever_the_content_type_says():
    app, service = public()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/octet-stream"):
        response = app.post(ACTION_PATH, b'{"evacuate": {}}', content_type=content_type, expect_errors=True)
        assert response.status_int == 403, content_type
    assert service.seen == []


def test_a_body_over_the_limit_is_refused_never_passed_unjudged():
    app, service = public()
    data = b'{"reboot": {}, "pad": "' + b"x" * ACTION_BODY_LIMIT + b'"}'
    response = post_json(app, data)
    assert response.status_int == 413
    assert error_code(response) == "tenancy.body-too-large"
    assert str(ACTION_BODY_LIMIT) in response.json["errors"][0]["detail"]
    assert service.seen == []
    # Exactly at the limit is read.
    data = b'{"reboot": "' + b"x" * (ACTION_BODY_LIMIT - 14) + b'"}'
    assert len(data) == ACTION_BODY_LIMIT
    assert post_json(app, data).status_int == 200


def test_the_operator_sets_the_limit_of_an_action_body():
    service = BodyEcho()
    app = TestApp(AdminCull(service, {"rules": ADMIN_ACTIONS, "max_action_body_size": str(FORM_BODY_LIMIT)}))
    data = b'{"reboot": "' + b"x" * (FORM_BODY_LIMIT - 14) + b'"}'
    assert app.post(ACTION_PATH, data, headers={"Content-Type": JSON}).status_int == 200
    assert [seen["body"] for seen in service.seen] == [data]
    too_large = app.post(ACTION_PATH, data + b" ", headers={"Content-Type": JSON}, expect_errors=True)
    assert too_large.status_int == 413


def test_an_announced_length_over_the_limit_is_refused_unread():
    service = BodyEcho()
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),))
    environ["CONTENT_LENGTH"] = str(ACTION_BODY_LIMIT + 1)
    environ["wsgi.input"] = ExplodingInput()
    status, _, body = call(AdminCull(service, {"rules": ADMIN_ACTIONS}), environ)
    assert status == 413
    assert json.loads(body)["errors"][0]["code"] == "tenancy.body-too-large"
    assert service.seen == []


def _chunked(data: bytes) -> dict:
    """An environ as a server that de-chunks the body and ends the input builds it (no Content-Length)."""
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON), ("Transfer-Encoding", "chunked")))
    environ["wsgi.input_terminated"] = True
    environ["wsgi.input"] = io.BytesIO(data)
    return environ


def test_chunked_bodies_are_judged_and_handed_on():
    service = BodyEcho()
    app = AdminCull(service, {"rules": ADMIN_ACTIONS})
    assert call(app, _chunked(b'{"evacuate": {}}'))[0] == 404
    assert service.seen == []
    data = b'{"reboot": {"type": "SOFT"}}'
    status, _, body = call(app, _chunked(data))
    assert (status, body) == (200, data)
    assert [(seen["body"], seen["content_length"]) for seen in service.seen] == [(data, str(len(data)))]
    status, _, body = call(app, _chunked(b'{"reboot": "' + b"x" * ACTION_BODY_LIMIT + b'"}'))
    assert status == 413


def test_a_chunked_body_the_server_does_not_end_is_refused():
    service = BodyEcho()
    environ = _chunked(b'{"evacuate": {}}')
    del environ["wsgi.input_terminated"]
    status, _, body = call(AdminCull(service, {"rules": ADMIN_ACTIONS}), environ)
    assert status == 411
    assert json.loads(body)["errors"][0]["code"] == "tenancy.unreadable-body"
    assert service.seen == []


def test_a_content_length_shorter_than_the_body_judges_what_the_service_reads():
    service = BodyEcho()
    app = AdminCull(service, {"rules": ADMIN_ACTIONS})
    first = b'{"reboot": {}}'
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),), first + b'{"evacuate": {}}')
    environ["CONTENT_LENGTH"] = str(len(first))
    status, _, body = call(app, environ)
    assert (status, body) == (200, first)
    # Cut inside the object: what the service would read is not JSON.
    data = b'{"reboot": {}, "evacuate": {}}'
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),), data)
    environ["CONTENT_LENGTH"] = str(data.index(b", "))
    status, _, body = call(app, environ)
    assert status == 400
    assert json.loads(body)["errors"][0]["code"] == "tenancy.unreadable-body"
    assert [(seen["body"], seen["content_length"]) for seen in service.seen] == [(first, str(len(first)))]


def test_a_content_length_longer_than_the_body_is_refused():
    service = BodyEcho()
    data = b'{"evacuate": {}}'
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),), data)
    environ["CONTENT_LENGTH"] = str(len(data) + 10)
    status, _, body = call(AdminCull(service, {"rules": ADMIN_ACTIONS}), environ)
    assert status == 400
    assert "ended after %d of its %d bytes" % (len(data), len(data) + 10) in json.loads(body)["errors"][0]["detail"]
    assert service.seen == []


@pytest.mark.parametrize("length", [None, "0"])
def test_an_empty_body_names_no_action_and_passes(length):
    service = BodyEcho()
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),))
    if length is not None:
        environ["CONTENT_LENGTH"] = length
    assert call(AdminCull(service, {"rules": ADMIN_ACTIONS}), environ)[0] == 200
    assert service.seen[0]["body"] == b""


@pytest.mark.parametrize("override", ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"])
def test_a_method_override_naming_a_keyed_rules_method_is_judged_by_the_body(override):
    # Without the default rules, which cull GET of any .../action on the path alone.
    app, service = public(default_rules="false")
    headers = {override: "POST"}
    admin = app.request(
        ACTION_PATH, method="GET", body=b'{"evacuate": {}}', headers=headers, content_type=JSON, expect_errors=True
    )
    assert admin.status_int == 403
    assert "GET (as POST)" in admin.json["errors"][0]["detail"]
    assert service.seen == []
    member = app.request(ACTION_PATH, method="GET", body=b'{"reboot": {}}', headers=headers, content_type=JSON)
    assert member.status_int == 200
    assert service.seen[0]["body"] == b'{"reboot": {}}'


def test_a_query_override_is_judged_by_the_body_too():
    app, service = public()
    response = app.put(ACTION_PATH + "?_method=post", b'{"os-resetState": {}}', content_type=JSON, expect_errors=True)
    assert response.status_int == 403
    assert service.seen == []


def test_a_form_body_overriding_to_a_keyed_method_is_refused_as_not_json():
    # PUT with a form naming _method=POST: webob-based routers take it for a
    # POST, whose body must then be an action object.
    app, service = public()
    response = app.put(
        ACTION_PATH, b"_method=POST&evacuate=1", content_type="application/x-www-form-urlencoded", expect_errors=True
    )
    assert response.status_int == 400
    assert error_code(response) == "tenancy.unreadable-body"
    assert service.seen == []


def counting_calls(monkeypatch, module, name: str) -> list:
    """Count the calls of ``module.name`` (the real function still runs): a list with one item per call."""
    real = getattr(module, name)
    calls: list = []

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_the_body_is_read_and_parsed_once_across_judges_and_handed_on_intact(monkeypatch):
    # Two admin_cull filters, a stripping tenant_path that judges again, a
    # form scan (a POST webob would read a form from) and an override header
    # on a path with keyed rules for two methods: one read, one parse.
    reads = counting_calls(monkeypatch, forms, "read_body")
    parses = counting_calls(monkeypatch, actions, "json_object_keys")
    rules = ADMIN_ACTIONS + "\nDELETE /servers/*/action (forceDelete)"
    service = BodyEcho()
    streams: list = []
    inner = AdminCull(TenantPath(service, {"strip_tenant": "true"}), {"rules": rules})
    app = webtest.TestApp(counted(AdminCull(inner, {"rules": rules}), streams))
    data = b'{"reboot": {"type": "HARD"}}'
    response = app.post(
        ACTION_PATH,
        data,
        headers={"X-HTTP-Method-Override": "DELETE"},
        content_type="application/x-www-form-urlencoded",
    )
    assert response.body == data
    assert (len(reads), len(parses)) == (1, 1)
    assert streams[0].bytes_read == len(data)
    assert [(seen["body"], seen["content_length"]) for seen in service.seen] == [(data, str(len(data)))]


def test_a_stripped_path_is_judged_by_the_same_reading():
    # The rule names the tenant-less path the app routes on after the strip.
    rules = "POST /{version}/servers/*/action (evacuate)"
    service = BodyEcho()
    streams: list = []
    stripped = TenantPath(service, {"strip_tenant": "true"})
    app = webtest.TestApp(counted(AdminCull(stripped, {"rules": rules, "default_rules": "false"}), streams))
    assert app.post(ACTION_PATH, b'{"evacuate": {}}', content_type=JSON, expect_errors=True).status_int == 404
    assert app.post(ACTION_PATH, b'{"reboot": {}}', content_type=JSON).status_int == 200
    assert [s.bytes_read for s in streams] == [len(b'{"evacuate": {}}'), len(b'{"reboot": {}}')]


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/v2.1/acme/servers"),
        ("POST", "/v2.1/acme/servers/7/actions"),
        ("PUT", ACTION_PATH),
        ("POST", "/v2.1/acme/os-volumes/7/action"),
    ],
)
def test_no_body_is_read_on_a_path_without_a_matching_keyed_rule(method, target):
    service = BodyEcho()
    environ = make_environ(method, target, (("Content-Type", JSON),))
    environ["CONTENT_LENGTH"] = str(200 * 1024 * 1024)
    environ["wsgi.input"] = stream = CountingInput(b'{"evacuate": {}}')
    AdminCull(lambda e, s: s("200 OK", []) or [], {"rules": ADMIN_ACTIONS})(environ, lambda *a: None)
    assert stream.bytes_read == 0
    assert environ["wsgi.input"] is stream
    assert ACTION_KEYS_KEY not in environ
    del service


def test_a_rule_culling_on_the_path_alone_wins_without_reading_the_body():
    rules = ADMIN_ACTIONS + "\nPOST /servers/*/action"
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),))
    environ["CONTENT_LENGTH"] = "20"
    environ["wsgi.input"] = ExplodingInput()
    status, _, _ = call(AdminCull(BodyEcho(), {"rules": rules}), environ)
    assert status == 404


def test_confirmed_admins_pass_without_the_body_being_read():
    service = BodyEcho()
    app = webtest.TestApp(AdminCull(service, {"rules": ADMIN_ACTIONS, "admin_roles": "admin"}))
    streams: list = []
    app = webtest.TestApp(counted(app.app, streams))
    headers = {"X-Identity-Status": "Confirmed", "X-Roles": "admin"}
    data = b'{"evacuate": {}}'
    assert app.post(ACTION_PATH, data, headers=headers, content_type=JSON).status_int == 200
    # The service got the client's own stream (a read would have replaced it), read only by the service.
    assert service.seen[0]["stream"] is streams[0]
    assert (streams[0].bytes_read, service.seen[0]["body"]) == (len(data), data)


def test_culls_log_the_rule_with_its_keys(caplog):
    app, _ = public()
    with caplog.at_level(logging.INFO, logger="tenancy_mw.admin_cull"):
        assert post_json(app, b'{"evacuate": {}}').status_int == 403
    (record,) = [r for r in caplog.records if r.name == "tenancy_mw.admin_cull"]
    assert ADMIN_ACTIONS in record.getMessage()


@pytest.mark.parametrize(
    "bad",
    [
        "POST /servers/*/action ()",
        "POST /servers/*/action (os migrateLive)",
        "POST /servers/*/action (evacuate) /more",
        "POST /servers/*/action(evacuate)",
    ],
)
def test_a_bad_action_key_list_fails_at_load_naming_the_rule(bad):
    with pytest.raises(ConfigError) as caught:
        AdminCull(BodyEcho(), {"rules": "PUT /fine/*\n" + bad})
    assert "rules" in str(caught.value)
    assert repr(bad) in str(caught.value)


# The reader alone.


def _environ(data: bytes) -> dict:
    return make_environ("POST", ACTION_PATH, (("Content-Type", JSON),), data)


def test_the_reader_caches_its_finding_with_the_stream_it_handed_on(monkeypatch):
    parses = counting_calls(monkeypatch, actions, "json_object_keys")
    data = b'{"Reboot": {}}'
    environ = _environ(data)
    environ["wsgi.input"] = stream = CountingInput(data)
    assert body_action_keys(environ) == {"reboot"}
    assert body_action_keys(environ) == {"reboot"}
    assert (stream.bytes_read, len(parses)) == (len(data), 1)
    assert environ[ACTION_KEYS_KEY] == (environ["wsgi.input"], frozenset({"reboot"}))
    assert environ["wsgi.input"].read() == data
    # A new stream (a filter that replaced the body) is read again.
    environ["wsgi.input"] = io.BytesIO(b'{"evacuate": 1}')
    environ["CONTENT_LENGTH"] = "15"
    assert body_action_keys(environ) == {"evacuate"}
    assert len(parses) == 2


def test_the_reader_refuses_rather_than_raising_anything_else():
    environ = _environ(b"[1]")
    with pytest.raises(UnreadableBody) as caught:
        body_action_keys(environ)
    assert (caught.value.status, caught.value.code) == (400, "tenancy.unreadable-body")
    assert isinstance(caught.value, ValueError)


_KEYS = st.one_of(
    st.sampled_from(["reboot", "evacuate", "os-migrateLive", "EVACUATE", " evacuate", "\uff45vacuate", ""]),
    st.text(max_size=12),
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_KEYS, _VALUES), max_size=6),
    st.booleans(),
    st.sampled_from(ENCODINGS),
)
def test_the_reader_sees_the_keys_json_loads_sees(pairs, ensure_ascii, encoding):
    # Written by hand so that duplicate keys stay in the text.
    text = "{%s}" % ", ".join(
        "%s: %s" % (json.dumps(key, ensure_ascii=ensure_ascii), json.dumps(value, ensure_ascii=ensure_ascii))
        for key, value in pairs
    )
    data = text.encode(encoding)
    expected = {fold_action_key(key) for key, _ in json.loads(data, object_pairs_hook=list)}
    assert json_object_keys(data) == expected
    environ = _environ(data)
    assert body_action_keys(environ) == expected
    assert environ["wsgi.input"].read() == data


def _reference_depth(value) -> int:
    """How deep arrays and objects nest in *value*, counted the plain recursive way."""
    if isinstance(value, dict):
        return 1 + max(map(_reference_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_reference_depth, value), default=0)
    return 0


_BRACKETY = st.text(alphabet='[]{}"\\ab', max_size=6)
_SMALL = st.recursive(
    st.none() | st.integers() | _BRACKETY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_BRACKETY, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["array", "object"]), min_size=MAX_DEPTH - 6, max_size=MAX_DEPTH + 2), _SMALL, _SMALL)
def test_nesting_is_refused_exactly_past_the_bound(wrappers, inner, sibling):
    # Brackets inside strings do not count; arrays and objects do, wherever they are.
    value = inner
    for kind in wrappers:
        value = [sibling, value] if kind == "array" else {"s": sibling, "k": value}
    body = {"reboot": value, "note": sibling}
    data = json.dumps(body).encode()
    if _reference_depth(body) > MAX_DEPTH:
        with pytest.raises(UnreadableBody) as caught:
            json_object_keys(data)
        assert "nested deeper than %d levels" % MAX_DEPTH in caught.value.detail
    else:
        assert json_object_keys(data) == {"reboot", "note"}


_BODIES = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda pairs: json.dumps(dict(pairs)).encode(), st.lists(st.tuples(_KEYS, _VALUES), max_size=4)),
    st.builds(
        lambda text, encoding: text.encode(encoding, "surrogatepass"), st.text(max_size=40), st.sampled_from(ENCODINGS)
    ),
)


@settings(max_examples=300, deadline=None)
@given(_BODIES, st.sampled_from([None, "same", "shorter", "longer", "chunked"]))
def test_any_body_is_judged_or_refused_never_an_error(data, framing):
    # Whatever the bytes and however they are framed: an answer in the JSON
    # error shape or a pass, and what passes carries no admin key.
    service = BodyEcho()
    environ = make_environ("POST", ACTION_PATH, (("Content-Type", JSON),), data)
    if framing is None:
        environ.pop("CONTENT_LENGTH", None)
    elif framing == "shorter":
        environ["CONTENT_LENGTH"] = str(max(len(data) - 3, 0))
    elif framing == "longer":
        environ["CONTENT_LENGTH"] = str(len(data) + 3)
    elif framing == "chunked":
        environ.pop("CONTENT_LENGTH", None)
        environ["wsgi.input_terminated"] = True
    status, _, body = call(AdminCull(service, {"rules": ADMIN_ACTIONS, "cull_status": "403"}), environ)
    assert status in (200, 400, 403), (status, body)
    if status == 200:
        (seen,) = service.seen
        if seen["body"]:
            assert json_object_keys(seen["body"]).isdisjoint({"os-migratelive", "evacuate", "os-resetstate"})
    else:
        assert service.seen == []
        assert json.loads(body)["errors"][0]["status"] == status


@st.composite
def _balanced(draw) -> bytes:
    """Balanced pairs of ( and ): many small mountains, a few deep ones, or both."""
    steps = draw(st.lists(st.sampled_from([1, 1, -1, -1, 3, -3, 40, -40]), max_size=60))
    out, depth = [], 0
    for step in steps:
        step = max(step, -depth)
        out.append(b"(" * step if step > 0 else b")" * -step)
        depth += step
    return b"".join(out) + b")" * depth


@settings(max_examples=400, deadline=None)
@given(_balanced(), st.integers(1, 400))
def test_the_bracket_depth_is_the_running_sums_peak(brackets, repeat):
    # _depth's last step takes levels off in passes, then sums mountains or
    # every step, whichever is cheaper: always the peak of the plain running sum.
    brackets = brackets * repeat
    depth = peak = 0
    for byte in brackets:
        depth += 1 if byte == ord("(") else -1
        peak = max(peak, depth)
    assert actions._bracket_depth(brackets) == peak


@pytest.mark.parametrize(
    "number",
    [b"1" * 5000, b"-" + b"9" * 4301, b"1." + b"5" * 5000, b"1e" + b"9" * 5000, b"NaN", b"-Infinity"],
    ids=["5000-digits", "4301-digits", "long-fraction", "long-exponent", "nan", "minus-infinity"],
)
def test_any_number_python_reads_is_read_however_long(number):
    # The C scanner converts integers itself; one too long for int() is read
    # again with numbers as text, as json.loads with parse_int=str reads it.
    data = b'{"evacuate": [' + number + b'], "reboot": 1}'
    assert json_object_keys(data) == {"evacuate", "reboot"}
    assert json_object_keys(b" \n" + data + b"\t") == {"evacuate", "reboot"}


# A declared charset: webob's Request.json (pecan's request.json, and any
# service reading req.json_body) decodes the body in the Content-Type's
# charset, so a body that names a member's action in UTF-8 may name an
# admin's in another charset.


class WebobJsonService:
    """A service reading its body as webob's ``Request.json`` does (in the declared charset); records its keys."""

    def __init__(self) -> None:
        self.keys: list[list[str]] = []

    def __call__(self, environ, start_response):
        import webob

        self.keys.append(list(webob.Request(environ).json))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def _utf7_smuggled(key: str) -> bytes:
    """A member's body in UTF-8 that, read as UTF-7, also names *key* (its quotes written as UTF-7 base64)."""
    import base64

    hidden = '","%s":{},"x":"' % key
    return b'{"reboot":"+' + base64.b64encode(hidden.encode("utf-16-be")).rstrip(b"=") + b'-"}'


def test_an_admin_key_hidden_in_a_declared_charset_is_culled():
    data = _utf7_smuggled("os-migrateLive")
    # What the service would do with it: the admin action.
    service = WebobJsonService()
    TestApp(service).post(ACTION_PATH, data, content_type="application/json; charset=utf-7")
    assert "os-migrateLive" in service.keys[0]
    service = WebobJsonService()
    app = TestApp(AdminCull(service, {"rules": ADMIN_ACTIONS, "cull_status": "403"}))
    for content_type in ("application/json; charset=utf-7", 'application/json;CHARSET="UTF-7"'):
        response = app.post(ACTION_PATH, data, content_type=content_type, expect_errors=True)
        assert response.status_int == 403, content_type
        assert error_code(response) == "tenancy.admin-call"
    assert service.keys == []


@pytest.mark.parametrize("charset", ["utf-8", "UTF8", "iso-8859-1", "utf-7", "cp1252"])
def test_a_member_body_in_a_declared_charset_reaches_the_service(charset):
    service = WebobJsonService()
    app = TestApp(AdminCull(service, {"rules": ADMIN_ACTIONS, "cull_status": "403"}))
    content_type = "application/json; charset=" + charset
    response = app.post(ACTION_PATH, b'{"reboot": {"type": "SOFT"}}', content_type=content_type)
    assert response.status_int == 200
    assert service.keys == [["reboot"]]


@pytest.mark.parametrize("charset", ["no-such-charset", "base64", "utf-16"])
def test_a_body_unreadable_in_its_declared_charset_is_refused(charset):
    app, service = public()
    response = app.post(
        ACTION_PATH, b'{"reboot": {}}', content_type="application/json; charset=" + charset, expect_errors=True
    )
    assert response.status_int == 400
    assert error_code(response) == "tenancy.unreadable-body"
    assert repr(charset) in response.json["errors"][0]["detail"]
    assert service.seen == []
