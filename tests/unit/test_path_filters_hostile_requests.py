"""Both path filters, admin_cull and tenant_path, against hostile targets and environs.

A target over ``max_target_length`` is answered 414 by each, and the
option is each one's; an environ that breaks PEP 3333 (a path that is not
latin-1, a value that is not a string) is answered 400, never an exception,
and never reaches the app.
"""

from __future__ import annotations

import json

import pytest

from tenancy_mw.core.base import ConfigError
from tenancy_mw.core.paths import DEFAULT_MAX_TARGET_LENGTH
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.wsgi import call, make_environ

FORM = (("Content-Type", "application/x-www-form-urlencoded"),)


# Long targets: 414 beyond max_target_length.


@pytest.mark.parametrize("factory", [AdminCull, TenantPath], ids=["admin_cull", "tenant_path"])
@pytest.mark.parametrize("raw_key", ["RAW_URI", "REQUEST_URI", None])
def test_targets_over_the_limit_are_answered_414(factory, raw_key):
    recorder = Recorder()
    app = factory(recorder, {})
    long_path = "/v2.1/acme/" + "%C3%A1\\action\\move" * (DEFAULT_MAX_TARGET_LENGTH // 14 + 1)
    status, _, body = call(app, make_environ("GET", long_path, raw_key=raw_key))
    assert status == 414
    assert json.loads(body)["errors"][0]["code"] == "tenancy.bad-path.target-too-long"
    long_query = "/v2.1/acme/servers?" + "a;" * (DEFAULT_MAX_TARGET_LENGTH // 2)
    assert call(app, make_environ("GET", long_query, raw_key=raw_key))[0] == 414
    assert recorder.seen == []
    fits = "/v2.1/acme/servers?" + "a" * (DEFAULT_MAX_TARGET_LENGTH - 40)
    assert call(app, make_environ("GET", fits, raw_key=raw_key))[0] == 200


def test_max_target_length_is_an_option_of_both():
    for factory in (AdminCull, TenantPath):
        app = factory(Recorder(), {"max_target_length": "300"})
        assert call(app, make_environ("GET", "/v2.1/acme/" + "x" * 290))[0] == 414
        with pytest.raises(ConfigError, match="max_target_length"):
            factory(Recorder(), {"max_target_length": "10"})


# Environs that break PEP 3333: 400, never an exception.


BROKEN = ["/v2.1/\u0100cme/servers", "/v2.1/acme/\ud800", "/v2.1/\udcff/x", "/v2.1/\u2211"]


@pytest.mark.parametrize("factory", [AdminCull, TenantPath], ids=["admin_cull", "tenant_path"])
@pytest.mark.parametrize("path", BROKEN, ids=ascii)
@pytest.mark.parametrize("raw", ["same", "none", "ascii"])
def test_non_latin1_environ_is_a_400(factory, path, raw):
    recorder = Recorder()
    environ = make_environ("DELETE", "/v2.1/acme/servers", raw_key=None)
    environ["PATH_INFO"] = path
    if raw == "same":
        environ["RAW_URI"] = path
    elif raw == "ascii":
        environ["REQUEST_URI"] = "/v2.1/acme/servers"
    status, _, body = call(factory(recorder, {}), environ)
    assert status == 400
    assert json.loads(body)["errors"][0]["code"] == "tenancy.bad-path.not-latin-1"
    assert recorder.seen == []


def _plain_app(environ, start_response):
    _plain_app.seen.append(environ)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"reached"]


_plain_app.seen = []


_NOT_STRINGS = [None, b"_method=DELETE", 5]


@pytest.mark.parametrize("factory", [AdminCull, TenantPath], ids=["admin_cull", "tenant_path"])
@pytest.mark.parametrize(
    "key",
    [
        "QUERY_STRING",
        "HTTP_ACCEPT",
        "CONTENT_TYPE",
        "REQUEST_METHOD",
        "CONTENT_LENGTH",
        "RAW_URI",
        "HTTP_X_HTTP_METHOD_OVERRIDE",
    ],
)
@pytest.mark.parametrize("value", _NOT_STRINGS, ids=repr)
def test_environ_values_that_are_not_strings_are_a_400_never_an_exception(factory, key, value):
    _plain_app.seen = []
    environ = make_environ("POST", "/v2.1/acme", FORM, b"a=1")
    environ[key] = value
    status, _, body = call(factory(_plain_app, {}), environ)
    assert status in (200, 400), status
    if status == 400:
        code = json.loads(body)["errors"][0]["code"]
        assert code in ("tenancy.bad-environ", "tenancy.bad-path.not-latin-1", "tenancy.unreadable-form"), code
        assert _plain_app.seen == []
