"""Every endpoint of the demo through both real pipelines of api-paste.ini, under gunicorn.

One public and one admin gunicorn (2 workers each) over one SQLite app, as
``make demo`` runs them: version documents, servers (create with
``X-Client-Token``, list, list detail, show, delete), server tags,
``os-services`` and ``os-hypervisors`` in two cells, each checked on both
endpoints; the router's 405 and its matching on the canonical path.
"""

from __future__ import annotations

import uuid

import pytest

from tests.functional.conftest import DEMO_INI, EXAMPLES_DIR, demo_server_env, migrated_registry, sqlite_url
from tests.support.servers import GunicornServer, call

ENDPOINTS = ["public", "admin"]
V226 = {"OpenStack-API-Version": "compute 2.26"}
V253 = {"OpenStack-API-Version": "compute 2.53"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """``{"public": server, "admin": server}``, both over one database, registry and pair of cells."""
    tmp = tmp_path_factory.mktemp("endpoints")
    database_url = sqlite_url(tmp / "demo.sqlite")
    env = demo_server_env(database_url, migrated_registry(database_url, tmp), tmp)
    started = {
        endpoint: GunicornServer(DEMO_INI, name=name, workers=2, env=env, cwd=EXAMPLES_DIR, log_dir=tmp)
        for endpoint, name in (("public", "main"), ("admin", "admin"))
    }
    try:
        for server in started.values():
            server.start()
        yield started
        logs = "".join(server.log() for server in started.values())
        assert "Traceback" not in logs
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture
def tenant(servers):
    """A tenant of the test's own, created as the demo says: PUT on the admin endpoint."""
    name = "t-" + uuid.uuid4().hex[:8]
    assert call(servers["admin"], "PUT", "/v2.1/" + name, {"tier": "gold"}).status == 201
    return name


def served_at(answer) -> str:
    """The microversion an answer was served at; both headers must say it, with Vary on both."""
    legacy = answer.headers["x-openstack-nova-api-version"]
    assert answer.headers["openstack-api-version"] == "compute " + legacy
    assert {part.strip() for part in answer.headers["vary"].split(",")} >= {
        "OpenStack-API-Version",
        "X-OpenStack-Nova-API-Version",
    }
    return legacy


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_version_documents(servers, endpoint):
    server = servers[endpoint]
    root = call(server, "GET", "/")
    assert root.status == 200
    (listed,) = root.json()["versions"]
    assert (listed["id"], listed["status"], listed["min_version"], listed["version"]) == (
        "v2.1",
        "CURRENT",
        "2.1",
        "2.53",
    )
    assert listed["links"] == [{"rel": "self", "href": server.url + "/v2.1/"}]
    # As nova's, the root document is not under microversion control: no
    # version headers, and a version out of range does not matter there.
    assert "openstack-api-version" not in root.headers
    assert call(server, "GET", "/", headers={"X-OpenStack-Nova-API-Version": "2.0"}).status == 200
    for target in ("/v2.1", "/v2.1/"):
        # Not a tenant: neither tenant_path nor tenant_admin takes "v2.1/" for one.
        answer = call(server, "GET", target)
        assert answer.status == 200, answer.body
        version = answer.json()["version"]
        assert (version["id"], version["status"], version["min_version"], version["version"]) == (
            "v2.1",
            "CURRENT",
            "2.1",
            "2.53",
        )
        assert version["links"][0]["href"] == server.url + "/v2.1/"
        assert version["media-types"][0]["base"] == "application/json"
        assert served_at(answer) == "2.1"
    assert served_at(call(server, "GET", "/v2.1", headers=V226)) == "2.26"
    assert served_at(call(server, "GET", "/v2.1", headers={"X-OpenStack-Nova-API-Version": "2.53"})) == "2.53"
    assert served_at(call(server, "GET", "/v2.1/", headers={"OpenStack-API-Version": "compute latest"})) == "2.53"
    too_new = call(server, "GET", "/v2.1", headers={"OpenStack-API-Version": "compute 2.54"})
    assert too_new.status == 406
    assert "2.53" in too_new.json()["errors"][0]["detail"]
    assert call(server, "GET", "/v2.1", headers={"X-OpenStack-Nova-API-Version": "2.0"}).status == 406
    assert call(server, "GET", "/v2.1", headers={"OpenStack-API-Version": "compute two"}).status == 400


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_servers(servers, tenant, endpoint):
    server = servers[endpoint]
    base = "/v2.1/%s/servers" % tenant
    token = {"X-Client-Token": uuid.uuid4().hex}
    created = call(server, "POST", base, {"server": {"name": "web1"}}, token)
    assert created.status == 201, created.body
    made = created.json()["server"]
    assert created.headers["location"] == made["links"][0]["href"]
    # The same token again: the same server, not a second one.
    retried = call(server, "POST", base, {"server": {"name": "web1"}}, token)
    assert retried.status == 201
    assert retried.json()["server"]["id"] == made["id"]
    assert retried.headers["idempotent-replayed"] == "true"
    other = call(server, "POST", base, {"server": {"name": "web2"}}).json()["server"]
    listed = call(server, "GET", base).json()["servers"]
    assert sorted(s["id"] for s in listed) == sorted([made["id"], other["id"]])
    detailed = call(server, "GET", base + "/detail").json()["servers"]
    assert sorted(s["name"] for s in detailed) == ["web1", "web2"]
    assert call(server, "GET", "%s/%s" % (base, made["id"])).json()["server"] == made
    assert call(server, "DELETE", "%s/%s" % (base, made["id"])).status == 204
    assert call(server, "GET", "%s/%s" % (base, made["id"])).status == 404
    assert [s["id"] for s in call(server, "GET", base).json()["servers"]] == [other["id"]]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_server_tags(servers, tenant, endpoint):
    server = servers[endpoint]
    base = "/v2.1/%s/servers" % tenant
    web = call(server, "POST", base, {"server": {"name": "web"}}).json()["server"]["id"]
    db = call(server, "POST", base, {"server": {"name": "db"}}).json()["server"]["id"]
    assert call(server, "PUT", "%s/%s/tags/blue" % (base, web), headers=V226).status == 201
    assert call(server, "PUT", "%s/%s/tags" % (base, db), {"tags": ["red", "blue"]}, V226).status == 200
    assert call(server, "GET", "%s/%s/tags" % (base, db), headers=V226).json() == {"tags": ["blue", "red"]}
    assert call(server, "GET", "%s/%s/tags/red" % (base, web), headers=V226).status == 404

    def names(query):
        answer = call(server, "GET", base + query, headers=V226)
        assert answer.status == 200, answer.body
        return sorted(s["name"] for s in answer.json()["servers"])

    assert names("?tags=blue") == ["db", "web"]
    assert names("?tags=blue,red") == ["db"]
    assert names("?tags-any=red") == ["db"]
    assert names("/detail?not-tags=red") == ["web"]
    assert names("?not-tags-any=blue,red") == ["web"]
    assert call(server, "GET", "%s/%s" % (base, db), headers=V226).json()["server"]["tags"] == ["blue", "red"]
    assert call(server, "DELETE", "%s/%s/tags/blue" % (base, db), headers=V226).status == 204
    assert names("?tags=blue") == ["web"]
    # Below 2.26 there are no tags.
    assert call(server, "GET", "%s/%s/tags" % (base, db)).status == 404


def test_services_in_two_cells_on_both_endpoints(servers):
    for endpoint in ENDPOINTS:
        # Below 2.53 the integer ids repeat across the two cells; the list is public.
        legacy = call(servers[endpoint], "GET", "/v2.1/os-services").json()["services"]
        assert [s["id"] for s in legacy].count(2) == 2
    # 2 is ambiguous: the admin endpoint's id_resolver refuses to guess.
    assert call(servers["admin"], "DELETE", "/v2.1/os-services/2").status == 400
    # The admin endpoint deletes a conductor by uuid; the public one sees it gone (one app behind both).
    listed = call(servers["admin"], "GET", "/v2.1/os-services", headers=V253)
    assert served_at(listed) == "2.53"
    (doomed,) = [s["id"] for s in listed.json()["services"] if s["host"] == "cell1-conductor"]
    assert call(servers["admin"], "DELETE", "/v2.1/os-services/" + doomed, headers=V253).status == 204
    after = call(servers["public"], "GET", "/v2.1/os-services", headers=V253).json()["services"]
    assert "cell1-conductor" not in {s["host"] for s in after}
    assert call(servers["admin"], "DELETE", "/v2.1/os-services/" + doomed, headers=V253).status == 404


def culled(answer) -> bool:
    """Whether *answer* is admin_cull's: the 404 of a missing resource, from the filter."""
    return answer.status == 404 and answer.json()["errors"][0]["code"] == "tenancy.not-found"


def test_the_public_endpoint_culls_novas_admin_calls_and_the_admin_endpoint_serves_them(servers, tenant):
    """examples/tenancy_mw_demo.conf's [admin_cull] rules: what README.rst's example culls (PUT and
    DELETE of os-services, nova's legacy actions included), and every os-hypervisors call."""
    public, admin = servers["public"], servers["admin"]
    services = call(admin, "GET", "/v2.1/os-services", headers=V253).json()["services"]
    (victim,) = [s["id"] for s in services if s["host"] == "cell2-conductor"]
    hypervisor = call(admin, "GET", "/v2.1/os-hypervisors", headers=V253).json()["hypervisors"][0]["id"]
    legacy = {"host": "compute3", "binary": "nova-compute"}
    for scope in ("/v2.1", "/v2.1/" + tenant):
        for method, target, body, headers in (
            ("PUT", "/os-services/disable", legacy, {}),
            ("PUT", "/os-services/force-down", dict(legacy, forced_down=True), {}),
            ("PUT", "/os-services/" + victim, {"status": "disabled"}, V253),
            ("DELETE", "/os-services/" + victim, None, V253),
            ("DELETE", "/os-services/3", None, {}),
            ("GET", "/os-hypervisors", None, V253),
            ("GET", "/os-hypervisors/detail", None, V253),
            ("GET", "/os-hypervisors/" + hypervisor, None, V253),
            ("HEAD", "/os-hypervisors/%s/uptime" % hypervisor, None, V253),
            ("GET", "/os-hypervisors/compute/search", None, {}),
        ):
            answer = call(public, method, scope + target, body, headers)
            assert answer.status == 404, (method, scope + target, answer.status, answer.body)
            assert method == "HEAD" or culled(answer), answer.body
    # Nothing of it reached the app: the service is still there, enabled.
    still = call(admin, "GET", "/v2.1/os-services", headers=V253).json()["services"]
    assert [s["status"] for s in still if s["id"] == victim] == ["enabled"]
    assert {s["host"]: s["status"] for s in call(admin, "GET", "/v2.1/os-services").json()["services"]}[
        "compute3"
    ] == "enabled"
    # The admin endpoint serves every one of them.
    assert call(admin, "PUT", "/v2.1/os-services/disable", legacy).json()["service"]["status"] == "disabled"
    assert call(admin, "PUT", "/v2.1/os-services/enable", legacy).json()["service"]["status"] == "enabled"
    updated = call(admin, "PUT", "/v2.1/os-services/" + victim, {"status": "disabled"}, V253)
    assert updated.json()["service"]["status"] == "disabled"
    assert call(admin, "GET", "/v2.1/os-hypervisors/%s/uptime" % hypervisor, headers=V253).status == 200
    assert call(admin, "DELETE", "/v2.1/os-services/" + victim, headers=V253).status == 204


def test_the_public_endpoint_still_lists_services(servers, tenant):
    """The services list is not culled (README.rst's example leaves it public)."""
    for target in ("/v2.1/os-services", "/v2.1/%s/os-services" % tenant):
        listed = call(servers["public"], "GET", target, headers=V253)
        assert listed.status == 200, listed.body
        assert served_at(listed) == "2.53"
        assert "nova-compute" in {s["binary"] for s in listed.json()["services"]}


def test_hypervisors_in_two_cells(servers):
    server = servers["admin"]
    hypervisors = call(server, "GET", "/v2.1/os-hypervisors", headers=V253).json()["hypervisors"]
    by_name = {h["hypervisor_hostname"]: h["id"] for h in hypervisors}
    assert set(by_name) == {"compute1.cell1.example", "compute2.cell1.example", "compute3.cell2.example"}
    shown = call(server, "GET", "/v2.1/os-hypervisors/" + by_name["compute3.cell2.example"], headers=V253)
    assert shown.json()["hypervisor"]["host_ip"] == "198.51.100.13"
    uptime = call(server, "GET", "/v2.1/os-hypervisors/%s/uptime" % by_name["compute1.cell1.example"], headers=V253)
    assert "up 93 days" in uptime.json()["hypervisor"]["uptime"]
    found = call(server, "GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=cell2", headers=V253)
    assert [h["id"] for h in found.json()["hypervisors"]] == [by_name["compute3.cell2.example"]]
    detail = call(server, "GET", "/v2.1/os-hypervisors/detail", headers=V253).json()["hypervisors"]
    assert len(detail) == 3
    # nova's search below 2.53, and the integer id cell2's only node shares with cell1's first.
    searched = call(server, "GET", "/v2.1/os-hypervisors/compute2/search").json()["hypervisors"]
    assert [h["hypervisor_hostname"] for h in searched] == ["compute2.cell1.example"]
    assert call(server, "GET", "/v2.1/os-hypervisors/1").status == 400
    assert call(server, "GET", "/v2.1/os-hypervisors/compute2/search", headers=V253).status == 404


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_the_router_answers_405_with_allow(servers, tenant, endpoint):
    server = servers[endpoint]
    for target, allow in (
        ("/v2.1/%s/servers" % tenant, "GET, HEAD, POST"),
        ("/v2.1/%s/servers/detail" % tenant, "GET, HEAD"),
        ("/v2.1/%s/servers/%s" % (tenant, uuid.uuid4()), "DELETE, GET, HEAD"),
        ("/v2.1/os-services", "GET, HEAD"),
    ):
        answer = call(server, "PATCH", target)
        assert answer.status == 405, (target, answer.body)
        assert answer.headers["allow"] == allow
        assert answer.json()["errors"][0]["code"] == "demo.method-not-allowed"
    # The tag URLs offer the tag API's methods only, whatever the method asked (found by the fuzzer:
    # an OPTIONS was answered Allow: DELETE, GET, HEAD, PATCH, POST, PUT, and POST is refused there).
    server_id = uuid.uuid4()
    for target in (
        "/v2.1/%s/servers/%s/tags" % (tenant, server_id),
        "/v2.1/%s/servers/%s/tags/web" % (tenant, server_id),
    ):
        for method in ("OPTIONS", "POST", "PATCH"):
            answer = call(server, method, target, headers=V226)
            assert (answer.status, answer.headers["allow"]) == (405, "DELETE, GET, HEAD, PUT"), (method, target)
    assert call(server, "GET", "/v2.1/%s/nothing-here" % tenant).status == 404


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_the_router_matches_the_canonical_path(servers, tenant, endpoint):
    server = servers[endpoint]
    made = call(server, "POST", "/v2.1/%s/servers" % tenant, {"server": {"name": "web1"}}).json()["server"]
    # Percent-encoded letters are the same path once decoded, for the filters and the router alike.
    listed = call(server, "GET", "/v2.1/%s/%%73ervers" % tenant)
    assert [s["id"] for s in listed.json()["servers"]] == [made["id"]]
    assert call(server, "GET", "/v2.1/%s/servers/%s" % (tenant, made["id"].replace("-", "%2D"))).status == 200
    # A dot segment is refused before any route is looked at.
    dotted = call(server, "GET", "/v2.1/%s/servers/%%2E%%2E/detail" % tenant)
    assert dotted.status == 400
    assert "dot segment" in dotted.json()["errors"][0]["detail"]
