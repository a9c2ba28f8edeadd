"""nova 34.0.0, unmodified, with the filters in its own ``api-paste.ini``.

The filters come from the library's recipe (``tenancy-mw-manage paste
add --service nova``), in both of nova's composites (``/v2.1`` and the
legacy ``/v2``); every request carries a real Keystone token.  Each check
runs in both URL layouts nova serves: with the project id after the
version and without it.
"""

from __future__ import annotations

import re
import uuid

import pytest

from tests.support.openstack import admin_only_routes

#: The body nova's error shape gives admin_cull's refusal on the public endpoint.
CULLED = {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
PLACEHOLDER = re.compile(r"\{[^}]+\}")


def _headers(cloud, who: str, **extra: str) -> dict:
    return {"X-Auth-Token": cloud.token(who), "Accept": "application/json", **extra}


def _answer(resp) -> tuple[int, object]:
    return resp.status, resp.json() if resp.body else None


def _prefixes(project_id: str) -> list[str]:
    """Every way nova's paste file routes the API: both composites, with and without the project id."""
    return ["/v2.1", "/v2.1/" + project_id, "/v2", "/v2/" + project_id]


def _fill(path: str, project_id: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(0)
        return project_id if "tenant" in name or "project" in name else "1"

    return PLACEHOLDER.sub(value, path)


def test_nova_admin_only_calls_are_culled_on_the_public_endpoint_in_both_composites(
    cloud, nova_public, nova_admin, nova_plain
):
    routes = admin_only_routes(cloud.venv, "nova")
    assert len(routes) > 40, routes  # flavors, os-services, os-hypervisors, os-aggregates, quota sets...
    names = {name.split(":")[1] for name, _, _ in routes}
    assert {"os-flavor-manage", "os-services", "os-hypervisors", "os-aggregates", "os-quota-sets"} <= names
    project = cloud.people["admin"].project_id
    unserved = []
    for name, method, path in routes:
        body = {} if method in ("POST", "PUT") else None
        for prefix in _prefixes(project):
            target = prefix + _fill(path, project)
            # nova's own file first: what nova answers an admin there, the admin endpoint answers too
            # (no admin_cull); the public endpoint answers the cull's 404.
            plain = _answer(nova_plain.request(method, target, _headers(cloud, "admin"), body))
            admin = _answer(nova_admin.request(method, target, _headers(cloud, "admin"), body))
            public = _answer(nova_public.request(method, target, _headers(cloud, "admin"), body))
            assert public == (404, CULLED), (name, method, target, public)
            assert admin[0] == plain[0] or plain[0] == 204, (name, method, target, admin, plain)
            if plain == (404, CULLED):
                unserved.append((method, target))  # nova's own router has no such route: nothing to tell
    # The cull's 404 looks like nova's "no such route"; almost every call here is one nova routes.
    assert len(unserved) <= len(routes) * 4 // 10, unserved


@pytest.mark.parametrize(
    ("method", "target", "headers"),
    [
        ("POST", "/v2.1/FLAVORS", {}),
        ("POST", "/v2.1//flavors", {}),
        ("POST", "/v2.1/flavors;x=1", {}),
        ("POST", "/v2.1/flavors.json", {}),
        ("POST", "/v2.1/%66lavors", {}),
        ("POST", "/v2.1/./flavors", {}),
        ("POST", "/v2.1/x/../flavors", {}),
        ("POST", "/v2.1/{project}/flavors/", {}),
        ("POST", "/v2/{project}/flavors", {}),
        ("GET", "/v2.1/flavors", {"X-HTTP-Method-Override": "POST"}),
        ("POST", "/v2.1/flavors?_method=GET", {}),
    ],
)
def test_a_flavor_is_never_created_through_the_public_endpoint(cloud, nova_public, nova_admin, method, target, headers):
    name = "tricky-" + uuid.uuid4().hex[:8]
    body = {"flavor": {"name": name, "ram": 64, "vcpus": 1, "disk": 1}}
    target = target.replace("{project}", cloud.people["admin"].project_id)
    resp = nova_public.request(method, target, _headers(cloud, "admin", **headers), body)
    assert resp.status in (400, 404, 405), resp.body
    listed = nova_admin.request("GET", "/v2.1/flavors/detail?is_public=None", _headers(cloud, "admin"))
    assert name not in {f["name"] for f in listed.json()["flavors"]}


def test_the_admin_endpoint_creates_flavors(cloud, nova_admin):
    name = "admin-made-" + uuid.uuid4().hex[:8]
    body = {"flavor": {"name": name, "ram": 64, "vcpus": 1, "disk": 1}}
    for prefix in ("/v2.1", "/v2/" + cloud.people["admin"].project_id):
        created = nova_admin.request("POST", prefix + "/flavors", _headers(cloud, "admin"), body)
        assert created.status == 200, created.body
        flavor = created.json()["flavor"]
        deleted = nova_admin.request("DELETE", prefix + "/flavors/" + flavor["id"], _headers(cloud, "admin"))
        assert deleted.status == 202, deleted.body


@pytest.mark.parametrize("prefix", ["/v2.1", "/v2"])
def test_a_project_in_the_path_must_be_the_tokens(cloud, nova_public, prefix):
    alpha, beta = cloud.people["alice"].project_id, cloud.people["bob"].project_id
    own = nova_public.request("GET", "%s/%s/servers" % (prefix, alpha), _headers(cloud, "alice"))
    assert own.status == 200, own.body
    other = nova_public.request("GET", "%s/%s/servers" % (prefix, beta), _headers(cloud, "alice"))
    assert other.status == 403
    assert beta in other.json()["forbidden"]["message"]
    # An admin passes tenant_path's check; nova itself refuses a URL project that is not the token's.
    as_admin = nova_public.request("GET", "%s/%s/servers" % (prefix, beta), _headers(cloud, "admin"))
    assert as_admin.status == 400, as_admin.body
    assert "doesn't match Context's project_id" in as_admin.json()["badRequest"]["message"]


@pytest.mark.parametrize("collection", ["servers", "flavors", "os-keypairs", "limits", "os-server-groups"])
def test_a_collection_after_the_version_is_not_a_tenant(cloud, nova_public, collection):
    # With check_token_project on, a collection read as a tenant would be 403 for every member.
    resp = nova_public.request("GET", "/v2.1/" + collection, _headers(cloud, "alice"))
    assert resp.status == 200, resp.body


def _keypair(name: str) -> dict:
    return {"keypair": {"name": name}}


@pytest.mark.parametrize("layout", ["tenant-less", "project-in-path"])
def test_a_retried_keypair_create_returns_the_same_private_key_and_creates_it_once(cloud, nova_public, layout):
    alice, bob = cloud.people["alice"], cloud.people["bob"]
    name, token = "key-" + uuid.uuid4().hex[:8], str(uuid.uuid4())

    def path(person) -> str:
        return "/v2.1/os-keypairs" if layout == "tenant-less" else "/v2.1/%s/os-keypairs" % person.project_id

    first = nova_public.request(
        "POST", path(alice), _headers(cloud, "alice", **{"X-Client-Token": token}), _keypair(name)
    )
    assert first.status == 200, first.body
    again = nova_public.request(
        "POST", path(alice), _headers(cloud, "alice", **{"X-Client-Token": token}), _keypair(name)
    )
    assert again.status == 200
    assert again.body == first.body
    assert again.headers.get("idempotent-replayed") == "true"
    listed = nova_public.request("GET", path(alice), _headers(cloud, "alice")).json()["keypairs"]
    assert [k["keypair"]["name"] for k in listed].count(name) == 1
    # Bob's project sends the same token and body: his own keypair, never alice's private key.
    theirs = nova_public.request("POST", path(bob), _headers(cloud, "bob", **{"X-Client-Token": token}), _keypair(name))
    assert theirs.status == 200, theirs.body
    assert theirs.json()["keypair"]["private_key"] != first.json()["keypair"]["private_key"]
    assert "idempotent-replayed" not in theirs.headers
    # The same token with another body: refused.
    other = nova_public.request(
        "POST", path(alice), _headers(cloud, "alice", **{"X-Client-Token": token}), _keypair(name + "-other")
    )
    assert other.status == 409, other.body


def test_another_projects_path_never_replays_its_answer(cloud, nova_public):
    # Bob's answer stays in bob's scope: neither a member nor an admin of another project gets it back
    # by sending his client token and body to his path.
    bob = cloud.people["bob"]
    token, name = str(uuid.uuid4()), "scope-" + uuid.uuid4().hex[:8]
    target = "/v2.1/%s/os-keypairs" % bob.project_id
    bobs = nova_public.request("POST", target, _headers(cloud, "bob", **{"X-Client-Token": token}), _keypair(name))
    assert bobs.status == 200, bobs.body
    for who, status in (("alice", 403), ("admin", 400)):
        theirs = nova_public.request("POST", target, _headers(cloud, who, **{"X-Client-Token": token}), _keypair(name))
        assert theirs.status == status, theirs.body
        assert b"PRIVATE KEY" not in theirs.body
        assert "idempotent-replayed" not in theirs.headers


@pytest.mark.parametrize("prefix", ["/v2.1", "/v2.1/{project}"])
def test_a_retried_server_group_create_creates_one_group(cloud, nova_public, prefix):
    prefix = prefix.replace("{project}", cloud.people["alice"].project_id)
    name, token = "group-" + uuid.uuid4().hex[:8], str(uuid.uuid4())
    body = {"server_group": {"name": name, "policies": ["affinity"]}}
    headers = _headers(cloud, "alice", **{"X-Client-Token": token})
    first = nova_public.request("POST", prefix + "/os-server-groups", headers, body)
    again = nova_public.request("POST", prefix + "/os-server-groups", headers, body)
    assert first.status == again.status == 200, (first.body, again.body)
    assert again.json()["server_group"]["id"] == first.json()["server_group"]["id"]
    groups = nova_public.request("GET", prefix + "/os-server-groups", _headers(cloud, "alice")).json()
    assert [g["name"] for g in groups["server_groups"]].count(name) == 1


def test_nova_s_own_file_serves_admin_calls_on_every_route_and_replays_nothing(cloud, nova_plain):
    # What the recipe changes: nova's installed file creates a flavor through the legacy /v2 route, and a
    # retried keypair create with a client token is a second create (nova refuses the duplicate name).
    body = {"flavor": {"name": "plain-" + uuid.uuid4().hex[:8], "ram": 64, "vcpus": 1, "disk": 1}}
    created = nova_plain.request(
        "POST", "/v2/%s/flavors" % cloud.people["admin"].project_id, _headers(cloud, "admin"), body
    )
    assert created.status == 200, created.body
    headers = _headers(cloud, "alice", **{"X-Client-Token": str(uuid.uuid4())})
    name = "plain-key-" + uuid.uuid4().hex[:8]
    assert nova_plain.request("POST", "/v2.1/os-keypairs", headers, _keypair(name)).status == 200
    assert nova_plain.request("POST", "/v2.1/os-keypairs", headers, _keypair(name)).status == 409
