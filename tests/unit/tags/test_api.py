"""The tag API component, mounted at a collection URL in process (SQLite; the demo tests run it on every backend)."""

from __future__ import annotations

import json

import pytest

from tenancy_mw.tags.api import TagAPI
from tenancy_mw.tags.store import TagStore
from tests.support.wsgi import call, make_environ

OWNED = {("acme", "srv1"), ("acme", "srv2"), ("other", "srv9")}
MOUNT = "/v1/acme/widgets"


def owns(environ, resource_id):
    return (environ.get("tenancy.tenant_id"), resource_id) in OWNED


@pytest.fixture
def api(tmp_path):
    store = TagStore("sqlite:///%s" % (tmp_path / "tags.sqlite"), max_tags=3, create_tables=True)
    yield TagAPI(store, owns, noun="widget")
    store.engine.dispose()


def request(api, method, path, body=None, tenant="acme", raw_body=None):
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else b"")
    headers = (("Content-Type", "application/json"),) if data else ()
    environ = make_environ(method, MOUNT + path, headers, data, script_name=MOUNT)
    environ["tenancy.tenant_id"] = tenant
    status, headers, out = call(api, environ)
    return status, headers, (json.loads(out) if out else None)


def error_of(result):
    status, _, body = result
    (error,) = body["errors"]
    return status, error["code"], error["detail"]


def test_the_whole_api(api):
    assert request(api, "GET", "/srv1/tags")[::2] == (200, {"tags": []})
    status, headers, _ = request(api, "PUT", "/srv1/tags/red")
    assert status == 201
    assert headers["Location"] == "http://127.0.0.1:8774/v1/acme/widgets/srv1/tags/red"
    assert request(api, "PUT", "/srv1/tags/red")[0] == 204
    assert request(api, "GET", "/srv1/tags/red")[0] == 204
    assert request(api, "HEAD", "/srv1/tags/red")[0] == 204
    assert request(api, "GET", "/srv1/tags/blue")[0] == 404
    assert request(api, "PUT", "/srv1/tags", {"tags": ["b", "a"]})[::2] == (200, {"tags": ["a", "b"]})
    assert request(api, "GET", "/srv1/tags")[::2] == (200, {"tags": ["a", "b"]})
    assert request(api, "DELETE", "/srv1/tags/a")[0] == 204
    assert error_of(request(api, "DELETE", "/srv1/tags/a"))[:2] == (404, "tenancy.tags.tag-not-found")
    assert request(api, "DELETE", "/srv1/tags")[0] == 204
    assert request(api, "GET", "/srv1/tags")[::2] == (200, {"tags": []})


def test_tags_in_urls_are_percent_decoded_once(api):
    status, headers, _ = request(api, "PUT", "/srv1/tags/%E2%88%91%20x")
    assert status == 201
    assert headers["Location"].endswith("/tags/%E2%88%91%20x")
    assert request(api, "GET", "/srv1/tags")[2] == {"tags": ["∑ x"]}
    assert request(api, "GET", "/srv1/tags/%E2%88%91%20x")[0] == 204


def test_the_limit_is_checked_after_already_there(api):
    request(api, "PUT", "/srv1/tags", {"tags": ["a", "b", "c"]})
    assert request(api, "PUT", "/srv1/tags/b")[0] == 204
    status, code, detail = error_of(request(api, "PUT", "/srv1/tags/d"))
    assert (status, code) == (400, "tenancy.tags.too-many")
    assert "at most 3" in detail
    status, code, _ = error_of(request(api, "PUT", "/srv1/tags", {"tags": ["a", "b", "c", "d"]}))
    assert (status, code) == (400, "tenancy.tags.too-many")
    assert request(api, "GET", "/srv1/tags")[2] == {"tags": ["a", "b", "c"]}


def test_another_tenants_resource_is_not_found_for_every_method(api):
    request(api, "PUT", "/srv9/tags/secret", tenant="other")
    for method, path, body in [
        ("GET", "/srv9/tags", None),
        ("PUT", "/srv9/tags", {"tags": ["mine"]}),
        ("DELETE", "/srv9/tags", None),
        ("PUT", "/srv9/tags/mine", None),
        ("GET", "/srv9/tags/secret", None),
        ("DELETE", "/srv9/tags/secret", None),
        ("GET", "/nothing/tags", None),
    ]:
        status, code, detail = error_of(request(api, method, path, body))
        assert (status, code) == (404, "tenancy.tags.resource-not-found"), (method, path)
        assert "secret" not in detail
    assert request(api, "GET", "/srv9/tags", tenant="other")[2] == {"tags": ["secret"]}


@pytest.mark.parametrize(
    ("raw", "code", "fragment"),
    [
        (b"", "tenancy.tags.bad-body", "empty"),
        (b"{nope", "tenancy.tags.bad-json", "not valid JSON"),
        (b'["a"]', "tenancy.tags.bad-body", "not of the form"),
        (b'{"tag": ["a"]}', "tenancy.tags.bad-body", "not of the form"),
        (b'{"tags": ["a"], "x": 1}', "tenancy.tags.bad-body", "unknown key 'x'"),
        (b'{"tags": "a,b"}', "tenancy.tags.bad-body", "not a list"),
        (b'{"tags": ["a", 5]}', "tenancy.tags.invalid-tag.not-a-string", "tags[1]"),
        (b'{"tags": ["a", "a"]}', "tenancy.tags.duplicate-tag", "twice"),
        (b'{"tags": ["a/b"]}', "tenancy.tags.invalid-tag.slash", "'a/b'"),
        (b'{"tags": [""]}', "tenancy.tags.invalid-tag.empty", "empty"),
        (b'{"tags": ["' + b"x" * 61 + b'"]}', "tenancy.tags.invalid-tag.too-long", "61 bytes"),
        (b'{"tags": ["\\u00e9\\u00e9"]}' + b" " * 70000, "tenancy.tags.body-too-large", "over"),
    ],
)
def test_bodies_are_checked(api, raw, code, fragment):
    request(api, "PUT", "/srv1/tags", {"tags": ["keep"]})
    status, got_code, detail = error_of(request(api, "PUT", "/srv1/tags", raw_body=raw))
    assert status in (400, 413)
    assert got_code == code
    assert fragment in detail
    assert request(api, "GET", "/srv1/tags")[2] == {"tags": ["keep"]}


@pytest.mark.parametrize("tag", ["a%2Cb", "%2E%2E", "%252F", "x" * 61])
def test_bad_tags_in_urls(api, tag):
    status = request(api, "PUT", "/srv1/tags/" + tag)[0]
    assert status == 400


def test_an_id_too_long_for_the_table_is_not_found_even_if_the_service_says_yes(tmp_path):
    store = TagStore("sqlite:///%s" % (tmp_path / "t.sqlite"), create_tables=True)
    api = TagAPI(store, lambda environ, resource_id: True)
    status, code, _ = error_of(request(api, "PUT", "/%s/tags/a" % ("x" * 256)))
    assert (status, code) == (404, "tenancy.tags.resource-not-found")
    assert request(api, "PUT", "/%s/tags/a" % ("x" * 255))[0] == 201
    store.close()


def test_methods_and_paths(api):
    status, headers, _ = request(api, "POST", "/srv1/tags")
    assert status == 405
    assert headers["Allow"] == "DELETE, GET, HEAD, PUT"
    assert request(api, "GET", "/srv1")[0] == 404
    assert request(api, "GET", "/srv1/tags/a/b")[0] == 404


def test_store_down_is_503_without_traceback(tmp_path):
    store = TagStore("postgresql+psycopg2://root@127.0.0.1:1/nothing")
    api = TagAPI(store, owns)
    status, code, detail = error_of(request(api, "GET", "/srv1/tags"))
    assert (status, code) == (503, "tenancy.tags.store-unavailable")
    assert "Traceback" not in detail
