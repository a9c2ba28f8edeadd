"""The version headers of the filters' own answers (tenancy_mw.core.microversions, every filter's ``microversions``).

The functional side, each kind of filter answer against the demo's own
answers through its real servers, is tests/functional/test_demo_version_headers.py.
"""

from __future__ import annotations

import re

import pytest
import webtest
from microversion_parse import Version

from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.core.base import ConfigError
from tenancy_mw.core.microversions import Microversions, add_headers
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder

NOVA = "v2.1 compute 2.1 2.53 X-OpenStack-Nova-API-Version"
VARY = ("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")


def served_at(version: str) -> list[tuple[str, str]]:
    return [("OpenStack-API-Version", "compute " + version), ("X-OpenStack-Nova-API-Version", version), VARY]


# The option's value -------------------------------------------------------------------------------


def test_the_value_names_segment_service_range_and_legacy_header():
    assert Microversions.parse(NOVA) == Microversions(
        "v2.1", "compute", Version(2, 1), Version(2, 53), "X-OpenStack-Nova-API-Version"
    )
    cinder = Microversions.parse("  v3   volume 3.0 3.70 ")
    assert (cinder.segment, cinder.service_type, cinder.legacy_header) == ("v3", "volume", None)
    assert cinder.vary == ("Vary", "OpenStack-API-Version")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("v2.1 compute 2.1", "not of the form VERSION_SEGMENT SERVICE_TYPE MIN MAX [LEGACY_HEADER]"),
        ("v2.1 compute 2.1 2.53 X-Nova extra", "not of the form"),
        ("v2.1/x compute 2.1 2.53", "not one path segment"),
        ("v%32.1 compute 2.1 2.53", "not one path segment"),
        ("v2.1 Compute 2.1 2.53", "'Compute' is not a service type"),
        ("v2.1 compute 2 2.53", "'2' is not a version of the form X.Y"),
        ("v2.1 compute 2.1 latest", "'latest' is not a version"),
        ("v2.1 compute 2.53 2.1", "the minimum 2.53 is above the maximum 2.1"),
        ("v2.1 compute 2.1 2.53 X-Nova:Version", "'X-Nova:Version' is not the name of a service's own version"),
        ("v2.1 compute 2.1 2.53 openstack-api-version", "is not the name of a service's own version header"),
    ],
)
def test_a_bad_value_is_refused_saying_why(value, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        Microversions.parse(value)


@pytest.mark.parametrize("filter_class", [TenantPath, AdminCull, TagQueryFilter])
def test_a_filter_refuses_a_bad_value_when_it_loads(filter_class):
    with pytest.raises(ConfigError) as refused:
        filter_class(Recorder(), {"microversions": "v2.1 compute 2.9 2.1"})
    message = str(refused.value)
    assert "option microversions = 'v2.1 compute 2.9 2.1' is invalid" in message
    assert "the minimum 2.9 is above the maximum 2.1" in message


# Which version an answer says ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, served_at("2.1")),
        ({"HTTP_OPENSTACK_API_VERSION": "compute 2.26"}, served_at("2.26")),
        ({"HTTP_X_OPENSTACK_NOVA_API_VERSION": "2.53"}, served_at("2.53")),
        ({"HTTP_OPENSTACK_API_VERSION": "compute latest"}, served_at("2.53")),
        # The standard header wins over the legacy one; another service's version is not this one's.
        (
            {"HTTP_OPENSTACK_API_VERSION": "compute 2.10", "HTTP_X_OPENSTACK_NOVA_API_VERSION": "2.30"},
            served_at("2.10"),
        ),
        ({"HTTP_OPENSTACK_API_VERSION": "volume 3.5"}, served_at("2.1")),
        # A version the service cannot serve: no version named, the answer still varies on them.
        ({"HTTP_OPENSTACK_API_VERSION": "compute 2.x"}, [VARY]),
        ({"HTTP_OPENSTACK_API_VERSION": "compute 2.54"}, [VARY]),
        ({"HTTP_X_OPENSTACK_NOVA_API_VERSION": "2.0"}, [VARY]),
    ],
)
def test_an_answer_says_the_version_the_service_would_serve_the_request_at(headers, expected):
    environ = dict(headers, PATH_INFO="/v2.1/acme/servers")
    assert Microversions.parse(NOVA).answer_headers(environ) == expected


@pytest.mark.parametrize(
    ("script_name", "path_info"),
    [
        ("", "/v2.1/acme/servers"),
        ("", "/v2.1"),
        ("/v2.1", "/acme/servers"),  # nova's urlmap mounts the app at its version
        ("/compute", "/v2.1/acme/servers"),  # below a mount
        ("", "//v2.1//acme"),  # empty segments are not segments
        ("", "/v2.1/acme/servers/%2e%2e/x"),  # no canonical form: read as it is
    ],
)
def test_answers_under_the_version_segment_carry_them(script_name, path_info):
    environ = {"SCRIPT_NAME": script_name, "PATH_INFO": path_info}
    assert Microversions.parse(NOVA).answer_headers(environ) == served_at("2.1")


@pytest.mark.parametrize("path_info", ["/", "/v2/acme/servers", "/v2.10/acme", "/acme/v2.1", "/V2.1/acme"])
def test_answers_elsewhere_carry_none(path_info):
    assert Microversions.parse(NOVA).answer_headers({"PATH_INFO": path_info}) == []


def test_added_headers_replace_their_namesakes_and_vary_lists_every_token_once():
    merged = add_headers(
        [
            ("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version"),
            ("Retry-After", "2"),
            ("OpenStack-API-Version", "compute 2.99"),
        ],
        served_at("2.26"),
    )
    assert merged == (
        ("Retry-After", "2"),
        ("OpenStack-API-Version", "compute 2.26"),
        ("X-OpenStack-Nova-API-Version", "2.26"),
        VARY,
    )
    assert add_headers([("Allow", "GET")], []) == (("Allow", "GET"),)


# Through the filters ----------------------------------------------------------------------------


def _one(response, name: str) -> str:
    (value,) = [v for k, v in response.headerlist if k.lower() == name.lower()]
    return value


@pytest.mark.parametrize(
    ("make", "request_", "status"),
    [
        # tenant_path's 400 for a path with no canonical form.
        (lambda opts: TenantPath(Recorder(), opts), ("GET", "/v2.1/acme/servers/%2e%2e/x"), 400),
        # admin_cull's 404 for a culled call.
        (lambda opts: AdminCull(Recorder(), opts), ("DELETE", "/v2.1/acme"), 404),
        # tag_query's 400 for a bad tag.
        (lambda opts: TagQueryFilter(Recorder(), opts), ("GET", "/v2.1/acme/servers?tags=a/b"), 400),
    ],
)
def test_each_filters_answers_carry_them_when_the_option_is_set(make, request_, status):
    method, target = request_
    headers = {"X-OpenStack-Nova-API-Version": "2.26"}
    with_option = webtest.TestApp(make({"microversions": NOVA}))
    answer = with_option.request(target, method=method, headers=headers, expect_errors=True)
    assert answer.status_int == status
    assert _one(answer, "OpenStack-API-Version") == "compute 2.26"
    assert _one(answer, "X-OpenStack-Nova-API-Version") == "2.26"
    assert _one(answer, "Vary") == VARY[1]
    # Unset (the default): the answers stay as they were.
    without = webtest.TestApp(make({})).request(target, method=method, headers=headers, expect_errors=True)
    assert without.status_int == status
    assert "OpenStack-API-Version" not in without.headers
    assert "Vary" not in without.headers


def test_id_resolvers_own_vary_is_not_repeated():
    resolver = IdResolver(
        Recorder(),
        {
            "cells": "cell1=sqlite://",
            "resources": "/os-services/{id} services id uuid",
            "uuid_microversion": "compute 2.53",
            "max_microversion": "2.53",
            "min_microversion": "2.1",
            "legacy_version_header": "X-OpenStack-Nova-API-Version",
            "microversions": NOVA,
        },
    )
    try:
        answer = webtest.TestApp(resolver).get(
            "/v2.1/os-services/five", headers={"OpenStack-API-Version": "compute 2.26"}, status=400
        )
        assert [k for k, _ in answer.headerlist].count("Vary") == 1
        assert _one(answer, "Vary") == VARY[1]
        assert _one(answer, "OpenStack-API-Version") == "compute 2.26"
    finally:
        resolver.lookup.close()


def test_a_header_that_is_not_a_string_is_not_read():
    """An environ PEP 3333 does not allow (bytes for a header) still gets an answer: as if it named no version."""
    environ = {"PATH_INFO": "/v2.1/acme", "HTTP_OPENSTACK_API_VERSION": b"compute 2.26"}
    assert Microversions.parse(NOVA).answer_headers(environ) == served_at("2.1")
