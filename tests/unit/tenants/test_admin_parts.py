"""The parts of the tenant_admin package that stand alone: the sub-request, the state cache, the routes, the old paths.

The filter's behaviour through them is tests/unit/tenants/test_admin_filter.py's.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
import warnings

import pytest

from tenancy_mw.core.subrequest import LOCATING_KEYS, call_application, plain_get
from tenancy_mw.tenants import admin
from tenancy_mw.tenants.admin import routes
from tenancy_mw.tenants.admin.state import StateCache

# The sub-request (tenancy_mw.core.subrequest) ----------------------------------------


def test_a_plain_get_keeps_only_what_locates_the_service():
    client = {
        "REQUEST_METHOD": "PUT",
        "QUERY_STRING": "a=1",
        "CONTENT_LENGTH": "12",
        "HTTP_X_AUTH_TOKEN": "secret",
        "HTTP_COOKIE": "session=1",
        "HTTP_IF_MATCH": '"x"',
        "HTTP_OPENSTACK_API_VERSION": "compute 2.90",
        "HTTP_X_TENANT_ID": "acme",
        "HTTP_HOST": "api:8774",
        "HTTP_X_FORWARDED_PROTO": "https",
        "openstack.request_id": "req-1",
        "wsgi.url_scheme": "https",
    }
    sub = plain_get(client, "/compute", "/v2.1")
    assert sub["REQUEST_METHOD"] == "GET"
    assert sub["QUERY_STRING"] == ""
    assert (sub["SCRIPT_NAME"], sub["PATH_INFO"], sub["HTTP_ACCEPT"]) == ("/compute", "/v2.1", "application/json")
    assert sub["wsgi.input"].read() == b""
    kept = {key for key in client if sub.get(key) == client[key]}
    assert kept == {"HTTP_HOST", "HTTP_X_FORWARDED_PROTO", "openstack.request_id", "wsgi.url_scheme"}
    assert kept - {"wsgi.url_scheme"} <= LOCATING_KEYS


def test_call_application_reads_the_write_callable_the_last_status_and_closes():
    closed = []

    class Body(list):
        def close(self):
            closed.append(True)

    def service(environ, start_response):
        start_response("500 Internal Server Error", [])
        write = start_response("200 OK", [], None)
        write(b"ab")
        return Body([b"c", b"d"])

    assert call_application(service, plain_get({}, "", "/v1"), limit=10) == ("200 OK", b"abcd")
    assert closed == [True]


def test_call_application_stops_past_its_limit_and_still_closes():
    closed = []

    class Endless:
        def __iter__(self):
            while True:
                yield b"x" * 1000

        def close(self):
            closed.append(True)

    def service(environ, start_response):
        start_response("200 OK", [])
        return Endless()

    with pytest.raises(ValueError, match="over 4096 bytes"):
        call_application(service, plain_get({}, "", "/"), limit=4096)
    assert closed == [True]


def test_call_application_without_a_status_says_nothing():
    assert call_application(lambda environ, start_response: [], {}, limit=1) == ("nothing", b"")


# The state cache -----------------------------------------------------------------


def test_fresh_tells_a_kept_state_until_it_expires_and_never_loads():
    loads = []
    cache = StateCache(lambda tenant_id: loads.append(tenant_id) or "active", ttl=0.05, max_entries=10)
    assert cache.fresh("acme") is None
    assert loads == []
    assert cache.state("acme") == "active"
    assert cache.fresh("acme") == "active"
    cache.remember("gone", "deleted")
    assert cache.fresh("gone") == "deleted"
    time.sleep(0.06)
    assert cache.fresh("acme") is None
    assert loads == ["acme"]


def test_with_ttl_zero_nothing_is_fresh():
    cache = StateCache(lambda tenant_id: "active", ttl=0, max_entries=10)
    assert cache.state("acme") == "active"
    assert cache.fresh("acme") is None


# The routes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rest", "moves", "action"),
    [
        ((), False, routes.TENANT),
        (("action", "restore"), False, routes.RESTORE),
        (("action", "move"), True, routes.MOVE),
        (("servers", "1", "action", "move"), True, routes.MOVE),
        (("action", "move"), False, None),
        (("servers",), True, None),
        (("servers", "action", "restore"), True, None),
    ],
)
def test_action_of_the_segments_after_the_tenant(rest, moves, action):
    assert routes.action_of(rest, moves) == action


def test_every_action_has_its_methods_and_an_answer_for_the_others():
    methods: dict[str, set[str]] = {}
    for method, action in routes.HANDLERS:
        methods.setdefault(action, set()).add(method)
    assert methods == {
        routes.TENANT: {"GET", "HEAD", "PUT", "DELETE"},
        routes.RESTORE: {"POST"},
        routes.MOVE: {"GET", "HEAD", "POST"},
    }
    assert set(routes.NOT_ALLOWED) == set(methods)


# The old paths ---------------------------------------------------------------------


def test_admin_filter_hands_on_the_packages_names_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = importlib.import_module("tenancy_mw.tenants.admin_filter")
    for name in [*old.__all__, "OPTS", "DISCOVERY_MEMBER", "DISCOVERY_BODY_LIMIT"]:
        assert getattr(old, name) is getattr(admin, name)
    assert old.__all__ == ["TenantAdmin", "list_opts", "parse_if_match", "set_defaults"]


def test_the_01_path_is_the_package_with_a_warning_naming_it():
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "always",
            "-c",
            "import tenancy_mw.tenant_admin as old, tenancy_mw.tenants.admin as new; "
            "print(old is new, old.TenantAdmin.__module__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["True", "tenancy_mw.tenants.admin.filter"]
    assert "tenancy_mw.tenant_admin moved to tenancy_mw.tenants.admin in tenancy_mw 0.2.0" in done.stderr


def test_the_options_module_lists_what_the_filter_lists_without_importing_it():
    # A fresh interpreter, where the filter (and so the registry's SQL) is not imported.
    code = (
        "import sys\n"
        "from tenancy_mw.tenants.admin import options\n"
        "listed = options.list_opts()\n"
        "assert 'tenancy_mw.tenants.admin.filter' not in sys.modules\n"
        "print(repr([(g, [(o.dest, o.default, o.help) for o in opts]) for g, opts in listed]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from tenancy_mw.tenants.admin.filter import TenantAdmin

    expected = [(g, [(o.dest, o.default, o.help) for o in opts]) for g, opts in TenantAdmin.list_opts()]
    assert done.stdout.strip() == repr(expected)


def test_a_registry_failure_is_the_core_refusal_503_with_retry_after():
    from tenancy_mw.core.errors import Refusal
    from tenancy_mw.tenants.admin.answers import RegistryDown

    down = RegistryDown()
    assert isinstance(down, Refusal)
    assert (down.status, down.code, down.headers) == (503, "tenancy.registry-unavailable", (("Retry-After", "5"),))


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_redirect_is_not_an_error_its_body_names_the_location(method):
    import json

    from tenancy_mw.core.errors import Refusal
    from tenancy_mw.tenants.admin.answers import Redirect, redirect

    moved = Redirect(301, "http://api/v2.1/beta/widgets/1")
    assert not isinstance(moved, Refusal)
    seen = {}
    body = b"".join(
        redirect(
            {"REQUEST_METHOD": method},
            lambda status, headers: seen.update(status=status, headers=dict(headers)),
            moved.status,
            moved.location,
        )
    )
    assert seen["status"] == "301 Moved Permanently"
    assert seen["headers"]["Location"] == moved.location
    assert body == (b"" if method == "HEAD" else json.dumps({"location": moved.location}).encode())
