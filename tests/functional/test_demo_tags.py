"""Tags on the demo's servers, through examples/api-paste.ini (tag_query in the pipeline) under real gunicorn.

One SQLite demo walks the whole tag API and the list filters; the same
flow, with the exact-comparison and concurrency checks, then runs on
PostgreSQL and MariaDB.
"""

from __future__ import annotations

import threading
import uuid
from urllib.parse import quote, urlsplit

import pytest

from tests.functional.conftest import sqlite_url

V226 = {"OpenStack-API-Version": "compute 2.26"}


def server_ids(response):
    assert response.status == 200, response.body
    return sorted(server["id"] for server in response.json()["servers"])


def put_tag(demo, tenant, server_id, tag, headers=V226):
    return demo.request("PUT", "/v2.1/%s/servers/%s/tags/%s" % (tenant, server_id, quote(tag, safe="")),
                        headers=headers)


def error_code(response, status):
    assert response.status == status, (response.status, response.body)
    (error,) = response.json()["errors"]
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    return error["code"], error["detail"]


def make_servers(demo, tenant, tag_sets):
    """One server per tag set, tagged through the API; returns their ids in order."""
    ids = []
    for number, tags in enumerate(tag_sets):
        created = demo.create(tenant, "s%d" % number)
        assert created.status == 201, created.body
        server_id = created.json()["server"]["id"]
        answer = demo.request("PUT", "/v2.1/%s/servers/%s/tags" % (tenant, server_id), {"tags": list(tags)}, V226)
        assert answer.status == 200, answer.body
        assert answer.json() == {"tags": sorted(tags)}
        ids.append(server_id)
    return ids


def check_filters(demo, tenant, ids):
    """ids: servers tagged [], [red], [blue], [red, blue], [green]."""
    none, red, blue, both, green = ids

    def listed(query):
        return server_ids(demo.request("GET", "/v2.1/%s/servers?%s" % (tenant, query), headers=V226))

    assert listed("tags=red,blue") == [both]
    assert listed("tags-any=red,blue") == sorted([red, blue, both])
    assert listed("not-tags=red,blue") == sorted([none, green])
    assert listed("not-tags-any=red,blue") == sorted([none, red, blue, green])
    assert listed("tags=red&tags=blue") == [both]  # a repeated parameter is merged
    assert listed("tags=red&not-tags=red") == []  # contradictory: valid, nothing
    assert listed("tags-any=red,green&not-tags-any=red,blue") == sorted([red, green])
    assert listed("") == sorted(ids)


def test_the_tag_api_and_filters_through_the_demo(start_demo, tmp_path):
    demo = start_demo(sqlite_url(tmp_path / "demo.sqlite"))
    demo.add_tenants("acme", "other")
    ids = make_servers(demo, "acme", [[], ["red"], ["blue"], ["red", "blue"], ["green"]])
    check_filters(demo, "acme", ids)
    server = ids[1]
    base = "/v2.1/acme/servers/%s/tags" % server

    added = put_tag(demo, "acme", server, "∑ web")
    assert added.status == 201
    assert urlsplit(added.headers["location"]).path == base + "/%E2%88%91%20web"
    assert put_tag(demo, "acme", server, "∑ web").status == 204
    assert demo.request("GET", base + "/%E2%88%91%20web", headers=V226).status == 204
    assert demo.request("GET", base + "/nope", headers=V226).status == 404
    assert demo.request("GET", base, headers=V226).json() == {"tags": ["red", "∑ web"]}
    assert demo.request("DELETE", base + "/red", headers=V226).status == 204
    assert error_code(demo.request("DELETE", base + "/red", headers=V226), 404)[0] == "tenancy.tags.tag-not-found"

    # Tags in show and list from 2.26, not before.
    shown = demo.request("GET", "/v2.1/acme/servers/%s" % server, headers=V226).json()["server"]
    assert shown["tags"] == ["∑ web"]
    assert "tags" not in demo.request("GET", "/v2.1/acme/servers/%s" % server).json()["server"]
    listed = demo.request("GET", "/v2.1/acme/servers", headers={"OpenStack-API-Version": "compute latest"})
    assert {s["id"]: s["tags"] for s in listed.json()["servers"]}[ids[3]] == ["blue", "red"]
    assert all("tags" not in s for s in demo.list("acme").json()["servers"])
    # Below 2.26 the tag URLs do not exist and the filters are ignored, as in nova.
    assert demo.request("GET", base).status == 404
    assert server_ids(demo.request("GET", "/v2.1/acme/servers?tags=red")) == sorted(ids)

    # A bad filter is refused by tag_query before the app, naming the tag.
    code, detail = error_code(demo.request("GET", "/v2.1/acme/servers?tags-any=ok,a%2Fb", headers=V226), 400)
    assert code == "tenancy.invalid-tag-query.slash"
    assert "'a/b'" in detail
    code, detail = error_code(demo.request("GET", "/v2.1/acme/servers?not-tags=", headers=V226), 400)
    assert code == "tenancy.invalid-tag-query.empty"
    code, _ = error_code(demo.request("PUT", base + "/a%2Cb", headers=V226), 400)
    assert code == "tenancy.tags.invalid-tag.comma"

    # Another tenant can neither read nor write acme's tags, nor see its servers by tag.
    other = make_servers(demo, "other", [["red"]])
    for method, path, body in [("GET", base, None), ("PUT", base, {"tags": ["x"]}), ("DELETE", base, None),
                               ("PUT", base + "/x", None), ("GET", base + "/red", None),
                               ("DELETE", base + "/%E2%88%91%20web", None)]:
        answer = demo.request(method, path.replace("/acme/", "/other/"), body, V226)
        assert error_code(answer, 404)[0] == "tenancy.tags.resource-not-found", (method, path)
    assert demo.request("GET", base, headers=V226).json() == {"tags": ["∑ web"]}
    assert server_ids(demo.request("GET", "/v2.1/other/servers?tags=red", headers=V226)) == other

    # The limit: 50, counted after "already there".
    full = ids[0]
    answer = demo.request("PUT", "/v2.1/acme/servers/%s/tags" % full, {"tags": ["t%02d" % n for n in range(50)]}, V226)
    assert answer.status == 200
    assert put_tag(demo, "acme", full, "t07").status == 204
    code, detail = error_code(put_tag(demo, "acme", full, "t50"), 400)
    assert code == "tenancy.tags.too-many"
    assert "at most 50" in detail
    answer = demo.request("PUT", "/v2.1/acme/servers/%s/tags" % full, {"tags": ["t%02d" % n for n in range(51)]}, V226)
    assert error_code(answer, 400)[0] == "tenancy.tags.too-many"
    assert len(demo.request("GET", "/v2.1/acme/servers/%s/tags" % full, headers=V226).json()["tags"]) == 50

    # Deleting a server removes its tags.
    assert demo.request("DELETE", "/v2.1/acme/servers/%s" % ids[3]).status == 204
    assert ids[3] not in server_ids(demo.request("GET", "/v2.1/acme/servers?tags-any=blue", headers=V226))


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_tags_on_database_servers(start_demo, backend, request):
    demo = start_demo(request.getfixturevalue(backend + "_url"))
    # The session's database is shared with other tests: a tenant of our own.
    tenant = "tags-" + uuid.uuid4().hex[:8]
    demo.add_tenants(tenant)
    ids = make_servers(demo, tenant, [[], ["red"], ["blue"], ["red", "blue"], ["green"]])
    check_filters(demo, tenant, ids)

    # Exact comparison: 'Red', 'red' and 'red ' are three tags (nova's MySQL table lost 'Foo').
    server = ids[4]
    for tag in ("Red", "red", "red "):
        assert put_tag(demo, tenant, server, tag).status == 201, tag
    assert demo.request("GET", "/v2.1/%s/servers/%s/tags" % (tenant, server), headers=V226).json() == {
        "tags": ["Red", "green", "red", "red "]}
    assert ids[4] not in server_ids(demo.request("GET", "/v2.1/%s/servers?tags=RED" % tenant, headers=V226))

    # The server id is compared exactly too (a MariaDB String column ignores
    # case and trailing spaces): a variant of it reaches no tags.
    for variant in (server.upper(), server + "%20"):
        answer = demo.request("GET", "/v2.1/%s/servers/%s/tags" % (tenant, variant), headers=V226)
        assert error_code(answer, 404)[0] == "tenancy.tags.resource-not-found", variant

    # Eight clients add eight new tags at once to a server with 47: three fit.
    target = ids[0]
    demo.request("PUT", "/v2.1/%s/servers/%s/tags" % (tenant, target), {"tags": ["k%02d" % n for n in range(47)]}, V226)
    barrier = threading.Barrier(8)
    statuses = []

    def client(number):
        barrier.wait()
        statuses.append(put_tag(demo, tenant, target, "new%d" % number).status)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] * 3 + [400] * 5
    assert len(demo.request("GET", "/v2.1/%s/servers/%s/tags" % (tenant, target), headers=V226).json()["tags"]) == 50
