"""The filters' own answers under /v2.1 carry the version headers and Vary of the demo app's answers.

Through the demo's two real pipelines under gunicorn, as ``make demo`` serves
them (their filters' ``microversions`` option in tenancy_mw_demo.conf).  For
each kind of answer a filter gives in the service's place, a ``404`` for an
unknown tenant (``tenant_admin``), a culled call (``admin_cull``) and a
``400`` (``tag_query``, ``tenant_path``, ``id_resolver``), and for each way a
client names a version (none, either header, ``latest``, another service's,
malformed, out of range), the filter's answer carries the same
``OpenStack-API-Version``, ``X-OpenStack-Nova-API-Version`` and ``Vary`` as
the app's own answer to the same version headers.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.demo import serve_demo

#: How a client may name a version, and the version the app serves it at (None: it cannot).
VERSIONS = [
    ({}, "2.1"),
    ({"OpenStack-API-Version": "compute 2.26"}, "2.26"),
    ({"X-OpenStack-Nova-API-Version": "2.53"}, "2.53"),
    ({"OpenStack-API-Version": "compute latest"}, "2.53"),
    ({"OpenStack-API-Version": "compute 2.10", "X-OpenStack-Nova-API-Version": "2.30"}, "2.10"),
    ({"OpenStack-API-Version": "volume 3.5"}, "2.1"),
    ({"OpenStack-API-Version": "compute 2.x"}, None),
    ({"X-OpenStack-Nova-API-Version": "2.99"}, None),
]
VERSION_IDS = ["none", "standard", "legacy", "latest", "both", "another-service", "malformed", "out-of-range"]

#: Each kind of filter answer: (endpoint, method, target; {t} an active tenant, the code it answers with).
FILTER_ANSWERS = {
    "unknown-tenant": ("public", "GET", "/v2.1/nobody-{u}/servers", "tenancy.tenant-not-found"),
    "culled-tenant-admin-call": ("public", "DELETE", "/v2.1/{t}", "tenancy.not-found"),
    "culled-nova-admin-call": ("public", "DELETE", "/v2.1/os-services/3", "tenancy.not-found"),
    "tag-query-400": ("public", "GET", "/v2.1/{t}/servers?tags=a/b", "tenancy.invalid-tag-query.slash"),
    "bad-path-400": ("public", "GET", "/v2.1/{t}/servers/%2e%2e/x", "tenancy.bad-path.dot-segment"),
    "id-resolver-400": ("admin", "GET", "/v2.1/os-hypervisors/zzz", "tenancy.invalid-id."),
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``({"public": server, "admin": server}, tenant)``: the demo's pipelines and an active tenant."""
    with serve_demo(tmp_path_factory.mktemp("version-headers")) as servers:
        tenant = "t-" + uuid.uuid4().hex[:8]
        created = servers["admin"].request("PUT", "/v2.1/" + tenant, {"Content-Type": "application/json"}, b"{}")
        assert created.status == 201, created.body
        yield servers, tenant


def version_headers(answer) -> tuple[str | None, str | None, tuple[str, ...]]:
    """What an answer says of versions: its two version headers and its Vary tokens."""
    vary = tuple(sorted(token.strip() for token in answer.headers.get("vary", "").split(",") if token.strip()))
    return answer.headers.get("openstack-api-version"), answer.headers.get("x-openstack-nova-api-version"), vary


def apps_answer(servers, tenant: str, headers: dict):
    """The app's own answer to *headers*: its list of the tenant's servers (or its 400/406 for the version)."""
    return servers["public"].request("GET", "/v2.1/%s/servers" % tenant, headers)


@pytest.mark.parametrize(("headers", "served"), VERSIONS, ids=VERSION_IDS)
def test_the_apps_own_answers_say_the_version(demo, headers, served):
    """The reference: what the app says, nova's way (an out-of-range or malformed version names none)."""
    servers, tenant = demo
    answer = apps_answer(servers, tenant, headers)
    assert answer.status == (200 if served else (400 if "2.x" in json.dumps(headers) else 406)), answer.body
    vary = ("OpenStack-API-Version", "X-OpenStack-Nova-API-Version")
    expected = ("compute " + served, served, vary) if served else (None, None, vary)
    assert version_headers(answer) == expected
    # Its own errors say the same as its successes.
    missing = servers["public"].request("GET", "/v2.1/%s/flavors" % tenant, headers)
    assert missing.status in (404, 400, 406)
    assert version_headers(missing) == expected


@pytest.mark.parametrize("kind", list(FILTER_ANSWERS))
@pytest.mark.parametrize(("headers", "served"), VERSIONS, ids=VERSION_IDS)
def test_a_filters_answer_carries_the_apps_version_headers(demo, kind, headers, served):
    servers, tenant = demo
    endpoint, method, template, code = FILTER_ANSWERS[kind]
    target = template.format(t=tenant, u=uuid.uuid4().hex[:6])
    answer = servers[endpoint].request(method, target, headers)
    (error,) = answer.json()["errors"]
    if kind == "id-resolver-400" and served is None:
        # id_resolver reads the version itself: it refuses one it cannot serve as the app would.
        code = "tenancy.bad-version" if "2.x" in json.dumps(headers) else "tenancy.version-not-acceptable"
    assert error["code"].startswith(code), (kind, answer.status, error)  # the filter's answer, not the app's
    assert version_headers(answer) == version_headers(apps_answer(servers, tenant, headers)), (kind, headers)


def test_a_filters_answer_outside_v2_1_carries_none(demo):
    """As the app's root document: no version headers outside the microversioned mount."""
    servers, _ = demo
    refused = servers["public"].request("GET", "/x/%2e%2e/y")
    assert refused.status == 400
    assert refused.json()["errors"][0]["code"] == "tenancy.bad-path.dot-segment"
    root = servers["public"].request("GET", "/")
    assert version_headers(refused) == version_headers(root) == (None, None, ())
