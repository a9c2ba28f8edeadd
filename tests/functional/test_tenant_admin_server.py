"""The tenant admin API over HTTP through the demo's two real api-paste.ini pipelines.

For each backend (SQLite, PostgreSQL, MariaDB) one pair of gunicorn
servers (2 workers each) runs for the whole module: the public pipeline
``main`` and the admin pipeline ``admin``, sharing one registry and one
servers database, exactly as ``make demo`` runs them (the registry URL and
a 1 s tenant cache reach the demo through oslo.config's
``OS_<GROUP>__<OPTION>`` environment variables).  Every test uses tenant
ids of its own.  Every status code the issue names is checked
here; the option variants (representations off, not updatable) are in
test_tenant_admin_options_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tests.conftest import require
from tests.functional.conftest import BACKENDS
from tests.support import databases
from tests.support.demo import DemoServers, serve_demo
from tests.support.registry import registry_snapshot
from tests.support.servers import call

#: The tenant cache TTL the servers run with, in seconds.
CACHE_TTL = 1.0
#: Each move waits this long before writing: the window the race test aims at.
MOVE_DELAY = 0.4
MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")


class Pair:
    """The public and admin servers of one backend, and the registry they share."""

    def __init__(self, servers: DemoServers) -> None:
        self.public = servers.public
        self.admin = servers.admin
        self.registry_url = servers.registry_url
        self.logs = servers.logs

    def snapshot(self):
        return registry_snapshot(self.registry_url)


@pytest.fixture(scope="module", params=BACKENDS)
def pair(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pair-" + request.param)
    environment = {"TENANCY_DEMO_MOVE_DELAY": str(MOVE_DELAY)}
    with databases.database_for(request.param, tmp, require) as database_url:
        with serve_demo(tmp, environment=environment, database_url=database_url, cache_ttl=CACHE_TTL) as servers:
            yield Pair(servers)


def fresh(name: str) -> str:
    """A tenant id no other test uses."""
    return "%s-%s" % (name, uuid.uuid4().hex[:8])




def code_of(response) -> str:
    (error,) = json.loads(response.body)["errors"]
    assert error["status"] == response.status
    return error["code"]


def after_cache_ttl() -> None:
    """Every worker's tenant cache has expired what it held before now."""
    time.sleep(CACHE_TTL + 0.2)


def statuses(server, method, target, times=6, body=None):
    """The statuses of *times* identical requests (they spread over the workers)."""
    return {call(server, method, target, body).status for _ in range(times)}


def create_server(pair, tenant: str, name: str = "web1") -> dict:
    created = call(pair.public, "POST", "/v2.1/%s/servers" % tenant, {"server": {"name": name}})
    assert created.status == 201, created.body
    return json.loads(created.body)["server"]


def test_tenant_lifecycle(pair):
    tenant = fresh("life")
    url = "/v2.1/" + tenant
    for method in ("GET", "HEAD"):
        assert call(pair.admin, method, url).status == 404
    assert code_of(call(pair.admin, "DELETE", url)) == "tenancy.tenant-not-found"
    assert code_of(call(pair.admin, "POST", url + "/action/restore")) == "tenancy.tenant-not-found"

    created = call(pair.admin, "PUT", url, {"tier": "gold", "notes": "∑ tenant"})
    assert created.status == 201, created.body
    assert created.headers["location"] == pair.admin.url + url
    etag = created.headers["etag"]
    again = call(pair.admin, "PUT", url, {"notes": "∑ tenant", "tier": "gold"})
    assert again.status == 202
    assert again.headers["etag"] == etag  # idempotent: nothing changed

    shown = call(pair.admin, "GET", url)
    assert shown.status == 200
    representation = json.loads(shown.body)
    # The demo turns on version_discovery: the app's version document rides along.
    assert representation.pop("version")["version"] == "2.53"
    assert representation == {"tier": "gold", "notes": "∑ tenant"}
    assert shown.headers["etag"] == etag
    head = call(pair.admin, "HEAD", url)
    assert head.status == 204
    assert head.body == b""
    for name in ("etag", "last-modified", "x-tenant-state", "x-tenant-created", "x-tenant-updated"):
        assert head.headers[name] == shown.headers[name], name

    modified = call(pair.admin, "PUT", url, {"tier": "silver"})
    assert modified.status == 202
    assert modified.headers["etag"] != etag
    assert json.loads(call(pair.admin, "GET", url).body).keys() == {"tier", "version"}
    assert json.loads(call(pair.admin, "GET", url).body)["tier"] == "silver"

    server = create_server(pair, tenant)
    # The public endpoint cannot create, delete or restore tenants: admin_cull culls those.
    before = pair.snapshot()
    for method, target in (("PUT", url), ("DELETE", url), ("POST", url + "/action/restore")):
        assert call(pair.public, method, target, {"tier": "x"} if method == "PUT" else None).status == 404
    assert pair.snapshot() == before

    assert call(pair.admin, "DELETE", url).status == 204
    assert code_of(call(pair.admin, "DELETE", url)) == "tenancy.tenant-deleted"
    assert call(pair.admin, "GET", url).status == 410
    assert call(pair.admin, "HEAD", url).status == 410
    assert code_of(call(pair.admin, "PUT", url, {"tier": "x"})) == "tenancy.tenant-deleted"
    after_cache_ttl()
    server_url = "/v2.1/%s/servers/%s" % (tenant, server["id"])
    assert statuses(pair.public, "GET", server_url) == {410}
    assert statuses(pair.public, "POST", "/v2.1/%s/servers" % tenant, body=b'{"server": {"name": "x"}}') == {410}
    assert statuses(pair.admin, "GET", "/v2.1/%s/servers" % tenant) == {410}

    restored = call(pair.admin, "POST", url + "/action/restore")
    assert restored.status == 200
    assert json.loads(restored.body) == {"tier": "silver"}
    assert code_of(call(pair.admin, "POST", url + "/action/restore")) == "tenancy.tenant-not-deleted"
    after_cache_ttl()
    assert statuses(pair.public, "GET", server_url) == {200}

    # Deleted again, then purged by the console command: unknown (404), and creatable anew.
    assert call(pair.admin, "DELETE", url).status == 204
    kept = call(pair.admin, "GET", url)
    assert kept.status == 410
    # The registry alone here; the purge that removes the demo's servers too: test_demo_tenant_life.py.
    purge = subprocess.run([MANAGE, "tenants", "purge", "--url", pair.registry_url, "--registry-only", "--retention",
                            "1h"],
                           capture_output=True, text=True, timeout=60)
    assert purge.returncode == 0, purge.stderr
    assert repr(tenant) not in purge.stdout
    assert call(pair.admin, "GET", url).status == 410
    purge = subprocess.run([MANAGE, "tenants", "purge", "--url", pair.registry_url, "--registry-only", "--retention",
                            "0"],
                           capture_output=True, text=True, timeout=60)
    assert purge.returncode == 0, purge.stderr
    assert repr(tenant) in purge.stdout
    assert purge.stdout.startswith("purged ")
    assert call(pair.admin, "GET", url).status == 404
    after_cache_ttl()
    assert statuses(pair.public, "GET", server_url) == {404}
    assert call(pair.admin, "PUT", url, {"tier": "new"}).status == 201


def test_bad_input_is_4xx_and_leaves_the_registry_unchanged(pair):
    tenant, other = fresh("bad"), fresh("bad-dst")
    assert call(pair.admin, "PUT", "/v2.1/" + tenant, {"tier": "gold"}).status == 201
    assert call(pair.admin, "PUT", "/v2.1/" + other, {}).status == 201
    server = create_server(pair, tenant)
    before = pair.snapshot()
    json_type = {"Content-Type": "application/json"}
    cases = [
        ("PUT", "/v2.1/" + tenant, b"{bad", json_type, 400, "tenancy.representation-not-json"),
        ("PUT", "/v2.1/" + fresh("new"), b"{bad", json_type, 400, "tenancy.representation-not-json"),
        ("PUT", "/v2.1/" + tenant, b"[1, 2]", json_type, 400, "tenancy.representation-not-an-object"),
        ("PUT", "/v2.1/" + tenant, b'"gold"', json_type, 400, "tenancy.representation-not-an-object"),
        ("PUT", "/v2.1/" + tenant, b'{"a": "' + b"x" * 70000 + b'"}', json_type, 413,
         "tenancy.representation-too-large"),
        ("PUT", "/v2.1/" + "a" * 256, b"{}", json_type, 400, "tenancy.invalid-tenant-id.too-long"),
        ("PUT", "/v2.1/a%2Fb", b"{}", json_type, 400, "tenancy.bad-path.encoded-slash"),
        ("PUT", "/v2.1/%2E%2E", b"{}", json_type, 400, "tenancy.bad-path.dot-segment"),
        ("PUT", "/v2.1/a%00b", b"{}", json_type, 400, "tenancy.bad-path.nul"),
    ]
    move = "/v2.1/%s/servers/%s/action/move" % (tenant, server["id"])
    for method in ("GET", "POST"):
        cases += [
            (method, move, None, {}, 400, "tenancy.move-missing-dest"),
            (method, move + "?dest=", None, {}, 400, "tenancy.move-invalid-dest.empty"),
            (method, move + "?dest=" + "d" * 256, None, {}, 400, "tenancy.move-invalid-dest.too-long"),
            (method, move + "?dest=a%2Fb", None, {}, 400, "tenancy.move-invalid-dest.slash"),
            (method, move + "?dest=" + tenant, None, {}, 400, "tenancy.move-same-tenant"),
            (method, "/v2.1/%s/action/move?dest=%s" % (tenant, tenant), None, {}, 400, "tenancy.move-same-tenant"),
            (method, move + "?dest=" + fresh("nobody"), None, {}, 404, "tenancy.move-destination-not-found"),
        ]
    for garbage in ("abc", '"unterminated', "W/abc", '"a" "b"'):
        cases.append(("POST", move + "?dest=" + other, None, {"If-Match": garbage}, 400, "tenancy.bad-if-match"))
    wrong = []
    for method, target, body, headers, status, code in cases:
        answer = call(pair.admin, method, target, body, headers)
        if answer.status != status or code_of(answer) != code:
            wrong.append((method, target[:60], status, answer.status, answer.body[:200]))
    assert wrong == []
    assert pair.snapshot() == before
    assert call(pair.public, "GET", "/v2.1/%s/servers/%s" % (tenant, server["id"])).status == 200


def test_resource_move(pair):
    source, dest = fresh("src"), fresh("dst")
    for tenant in (source, dest):
        assert call(pair.admin, "PUT", "/v2.1/" + tenant, {}).status == 201
    server = create_server(pair, source)
    old = "/v2.1/%s/servers/%s" % (source, server["id"])
    new = "/v2.1/%s/servers/%s" % (dest, server["id"])
    action = call(pair.admin, "GET", old + "/action/move?dest=" + dest)
    assert action.status == 200
    document = json.loads(action.body)["move"]
    assert document["resource"]["state"]["name"] == "web1"
    assert document["source"]["id"] == source
    assert document["destination"]["id"] == dest
    etag = action.headers["etag"]
    assert etag.startswith('"')
    assert etag.endswith('"')

    moved = call(pair.admin, "POST", old + "/action/move?dest=" + dest, headers={"If-Match": etag})
    assert moved.status == 303, moved.body
    assert moved.headers["location"] == pair.admin.url + new
    shown = call(pair.public, "GET", new)
    assert shown.status == 200
    assert json.loads(shown.body)["server"]["tenant_id"] == dest
    for server_ in (pair.public, pair.admin):
        redirect = call(server_, "GET", old)
        assert redirect.status == 301
        assert redirect.headers["location"] == server_.url + new
    second = call(pair.admin, "POST", old + "/action/move?dest=" + dest)
    assert second.status == 301
    assert second.headers["location"] == pair.admin.url + new + "/action/move?dest=" + dest
    # The same POST with the (now stale) ETag: 412, nothing moves again.
    assert call(pair.admin, "POST", old + "/action/move?dest=" + dest, headers={"If-Match": etag}).status == 412

    missing = "/v2.1/%s/servers/%s/action/move?dest=%s" % (source, uuid.uuid4(), dest)
    assert code_of(call(pair.admin, "POST", missing)) == "tenancy.move-resource-not-found"
    assert code_of(call(pair.admin, "GET", missing)) == "tenancy.move-resource-not-found"
    doomed = create_server(pair, source, "doomed")
    assert call(pair.public, "DELETE", "/v2.1/%s/servers/%s" % (source, doomed["id"])).status == 204
    deleted = "/v2.1/%s/servers/%s/action/move?dest=%s" % (source, doomed["id"], dest)
    assert code_of(call(pair.admin, "POST", deleted)) == "tenancy.move-resource-deleted"
    assert call(pair.admin, "GET", deleted).status == 410
    # Moves out of a deleted tenant: 410.
    gone = fresh("gone")
    assert call(pair.admin, "PUT", "/v2.1/" + gone, {}).status == 201
    gone_server = create_server(pair, gone)
    assert call(pair.admin, "DELETE", "/v2.1/" + gone).status == 204
    target = "/v2.1/%s/servers/%s/action/move?dest=%s" % (gone, gone_server["id"], dest)
    assert call(pair.admin, "POST", target).status == 410
    assert call(pair.admin, "POST", "/v2.1/%s/action/move?dest=%s" % (gone, dest)).status == 410
    # Into a tenant that does not exist: 404; from one that does not: 404.
    assert call(pair.admin, "POST", "/v2.1/%s/action/move?dest=%s" % (source, fresh("none"))).status == 404
    assert call(pair.admin, "POST", "/v2.1/%s/action/move?dest=%s" % (fresh("none"), dest)).status == 404


def test_tenant_move(pair):
    source, dest = fresh("whole"), fresh("into")
    for tenant in (source, dest):
        assert call(pair.admin, "PUT", "/v2.1/" + tenant, {"tier": "gold"}).status == 201
    servers = [create_server(pair, source, "web%d" % i) for i in range(3)]
    url = "/v2.1/%s/action/move?dest=%s" % (source, dest)
    action = call(pair.admin, "GET", url)
    assert action.status == 200
    resources = json.loads(action.body)["move"]["resources"]
    assert resources["count"] == 3
    assert sorted(r["state"]["name"] for r in resources["list"]) == ["web0", "web1", "web2"]
    etag = action.headers["etag"]
    create_server(pair, source, "late")  # the state changes: the old ETag is stale
    assert code_of(call(pair.admin, "POST", url, headers={"If-Match": etag})) == "tenancy.move-precondition-failed"
    etag = call(pair.admin, "GET", url).headers["etag"]
    moved = call(pair.admin, "POST", url, headers={"If-Match": etag})
    assert moved.status == 303
    assert moved.headers["location"] == pair.admin.url + "/v2.1/" + dest
    # The source tenant stays, empty; its servers are in the destination.
    assert call(pair.admin, "GET", "/v2.1/" + source).status == 200
    assert json.loads(call(pair.public, "GET", "/v2.1/%s/servers" % source).body)["servers"] == []
    names = sorted(s["name"] for s in json.loads(call(pair.public, "GET", "/v2.1/%s/servers" % dest).body)["servers"])
    assert names == ["late", "web0", "web1", "web2"]
    old = call(pair.public, "GET", "/v2.1/%s/servers/%s" % (source, servers[0]["id"]))
    assert old.status == 301
    assert old.headers["location"] == "%s/v2.1/%s/servers/%s" % (pair.public.url, dest, servers[0]["id"])


RACER = textwrap.dedent(
    """
    import http.client, os, sys, time
    port, target, etag, ready, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.connect()
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    conn.request("POST", target, headers={"If-Match": etag, "Content-Length": "0"})
    print(conn.getresponse().status)
    """
)


def race(pair, tmp_path, target: str, etag: str) -> list[int]:
    """Two client processes POST *target* with If-Match *etag* at the same moment; their statuses."""
    go = tmp_path / ("go-" + uuid.uuid4().hex)
    readies = [tmp_path / ("ready-%d-%s" % (i, uuid.uuid4().hex)) for i in range(2)]
    racers = [
        subprocess.Popen([sys.executable, "-c", RACER, str(pair.admin.port), target, etag, str(ready), str(go)],
                         stdout=subprocess.PIPE, text=True)
        for ready in readies
    ]
    deadline = time.monotonic() + 30
    while not all(ready.exists() for ready in readies) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    return sorted(int(racer.communicate(timeout=60)[0]) for racer in racers)


def test_two_processes_race_a_conditional_move_exactly_one_wins(pair, tmp_path):
    source, dest = fresh("race"), fresh("race-dst")
    for tenant in (source, dest):
        assert call(pair.admin, "PUT", "/v2.1/" + tenant, {}).status == 201
    for _ in range(2):
        server = create_server(pair, source)
        target = "/v2.1/%s/servers/%s/action/move?dest=%s" % (source, server["id"], dest)
        etag = call(pair.admin, "GET", target).headers["etag"]
        assert race(pair, tmp_path, target, etag) == [303, 412]
        assert json.loads(call(pair.public, "GET", "/v2.1/%s/servers/%s" % (dest, server["id"])).body)
    create_server(pair, source, "last")
    target = "/v2.1/%s/action/move?dest=%s" % (source, dest)
    etag = call(pair.admin, "GET", target).headers["etag"]
    assert race(pair, tmp_path, target, etag) == [303, 412]
    assert json.loads(call(pair.public, "GET", "/v2.1/%s/servers" % source).body)["servers"] == []
    moves = [m for m in pair.snapshot()[1] if m[1] == source]
    assert len(moves) == 3  # one record per server moved, none twice
