"""cinder 29.0.0, unmodified, with the filters in its own ``api-paste.ini``.

cinder's URLs are the tenants spec's own layout, ``/v3/{project_id}/...``;
from microversion 3.67 it serves every route without the project id too.
No volume backend runs here: cinder-api records a new volume and casts
to a scheduler that never answers, which is all an idempotency check needs.
"""

from __future__ import annotations

import re
import uuid

import pytest

from tests.openstack.test_clients import openstack
from tests.support.openstack import OTHER_REGION, REGION, admin_only_routes

#: admin_cull's refusal in cinder's error shape (nova's legacy fault body, error_format = nova).
CULLED = {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
PLACEHOLDER = re.compile(r"\{[^}]+\}")
#: Microversion 3.67: URLs without the project id.
TENANTLESS = {"OpenStack-API-Version": "volume 3.67"}


def _headers(cloud, who: str, **extra: str) -> dict:
    return {"X-Auth-Token": cloud.token(who), "Accept": "application/json", **TENANTLESS, **extra}


def _fill(path: str, project_id: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(0)
        return project_id if "tenant" in name or "project" in name else "1"

    return PLACEHOLDER.sub(value, path)


def _answer(resp) -> tuple[int, object]:
    return resp.status, resp.json() if resp.body else None


def test_cinder_admin_only_calls_are_culled_on_the_public_endpoint(cloud, cinder_endpoints):
    public, admin = cinder_endpoints
    routes = admin_only_routes(cloud.venv, "cinder")
    assert len(routes) > 20, routes
    project = cloud.people["admin"].project_id
    unserved = []
    for name, method, path in routes:
        # cinder documents its paths with /v3/{project_id} already, or without a version.
        tail = re.sub(r"^/v3(/\{project_id\})?", "", path)
        body = {} if method in ("POST", "PUT") else None
        for prefix in ("/v3", "/v3/" + project):
            target = prefix + _fill(tail, project)
            served = _answer(admin.request(method, target, _headers(cloud, "admin"), body))
            answer = _answer(public.request(method, target, _headers(cloud, "admin"), body))
            assert answer == (404, CULLED), (name, method, target, answer)
            if served == (404, CULLED):
                unserved.append((method, target))  # cinder's own router has no such route
    # The cull's 404 looks like cinder's "no such route"; almost every call here is one cinder routes.
    assert len(unserved) <= len(routes) * 2 // 10, unserved


@pytest.mark.parametrize("prefix", ["/v3/{own}", "/v3"])
def test_a_member_lists_its_volumes_in_both_layouts(cloud, cinder_endpoints, prefix):
    public, _ = cinder_endpoints
    prefix = prefix.replace("{own}", cloud.people["alice"].project_id)
    resp = public.request("GET", prefix + "/volumes", _headers(cloud, "alice"))
    assert resp.status == 200, resp.body
    assert "volumes" in resp.json()


def test_a_project_in_the_path_must_be_the_tokens(cloud, cinder_endpoints):
    public, _ = cinder_endpoints
    beta = cloud.people["bob"].project_id
    other = public.request("GET", "/v3/%s/volumes" % beta, _headers(cloud, "alice"))
    assert other.status == 403
    assert beta in other.json()["forbidden"]["message"]
    # An admin passes tenant_path's check; cinder itself refuses a URL project that is not the token's.
    as_admin = public.request("GET", "/v3/%s/volumes" % beta, _headers(cloud, "admin"))
    assert as_admin.status == 400
    assert as_admin.json()["badRequest"]["message"] == "Malformed request url"


@pytest.mark.parametrize("layout", ["tenant-less", "project-in-path"])
def test_a_retried_volume_create_creates_one_volume(cloud, cinder_endpoints, layout):
    public, _ = cinder_endpoints
    alice, bob = cloud.people["alice"], cloud.people["bob"]

    def path(person) -> str:
        return "/v3/volumes" if layout == "tenant-less" else "/v3/%s/volumes" % person.project_id

    name, token = "vol-" + uuid.uuid4().hex[:8], str(uuid.uuid4())
    body = {"volume": {"size": 1, "name": name}}
    first = public.request("POST", path(alice), _headers(cloud, "alice", **{"X-Client-Token": token}), body)
    assert first.status == 202, first.body
    again = public.request("POST", path(alice), _headers(cloud, "alice", **{"X-Client-Token": token}), body)
    assert again.status == 202
    assert again.body == first.body
    listed = public.request("GET", path(alice), _headers(cloud, "alice")).json()["volumes"]
    assert [v["name"] for v in listed].count(name) == 1
    theirs = public.request("POST", path(bob), _headers(cloud, "bob", **{"X-Client-Token": token}), body)
    assert theirs.status == 202, theirs.body
    assert theirs.json()["volume"]["id"] != first.json()["volume"]["id"]
    other = public.request(
        "POST",
        path(alice),
        _headers(cloud, "alice", **{"X-Client-Token": token}),
        {"volume": {"size": 2, "name": name}},
    )
    assert other.status == 409, other.body


def test_volume_types_are_made_on_the_admin_endpoint_only(cloud, cinder_endpoints):
    public, admin = cinder_endpoints
    project = cloud.people["admin"].project_id
    body = {"volume_type": {"name": "type-" + uuid.uuid4().hex[:8]}}
    assert _answer(public.request("POST", "/v3/%s/types" % project, _headers(cloud, "admin"), body)) == (404, CULLED)
    made = admin.request("POST", "/v3/%s/types" % project, _headers(cloud, "admin"), body)
    assert made.status == 200, made.body
    listed = public.request("GET", "/v3/%s/types" % cloud.people["alice"].project_id, _headers(cloud, "alice"))
    assert body["volume_type"]["name"] in {t["name"] for t in listed.json()["volume_types"]}


@pytest.mark.parametrize("region", [REGION, OTHER_REGION])
def test_the_openstack_command_line_drives_cinder(cloud, cinder_endpoints, region):
    name = "cli-vol-" + uuid.uuid4().hex[:8]
    created = openstack(cloud, "alice", region, "volume", "create", "--size", "1", name)
    assert created["name"] == name
    assert name in {v["Name"] for v in openstack(cloud, "alice", region, "volume", "list")}
    assert isinstance(openstack(cloud, "alice", region, "volume", "type", "list"), list)
    assert openstack(cloud, "alice", region, "quota", "show", "--volume")
    services = openstack(cloud, "admin", region, "volume", "service", "list", interface="admin")
    assert isinstance(services, list)
