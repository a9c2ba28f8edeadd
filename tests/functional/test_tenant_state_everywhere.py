"""Deleted means deleted on every worker and host: measured through real gunicorn servers on two loopback hosts.

For each registry backend (SQLite, PostgreSQL, MariaDB), the module starts,
all sharing one registry:

- an admin endpoint (``tenant_admin`` with the admin API, 1 worker, on
  127.0.0.1), whose writes are shared through a memcached cluster of three;
- the public pipeline of ``bench/seen_everywhere.py`` (``tenant_path``,
  ``tenant_admin`` with ``admin_api = false``) on 127.0.0.1 and on
  127.0.0.2, 3 workers each, ``cache_ttl = 2``, without memcached: the
  ``ttl`` pair;
- the same with ``state_memcached_servers`` and ``cache_ttl = 300``: the
  ``shared`` pair.  Without memcached its workers would keep a state five
  minutes, so any answer it gives from a stale state shows.

Clients ask every worker of both hosts without pause (each answer names its
worker); a change is made through the admin endpoint (or ``tenancy-mw-manage
tenants purge``), and :func:`seen_everywhere.broken_bound` lists every
request sent after the bound that still got the old answer, and every worker
no request reached after it.  The bounds: ``cache_ttl`` plus
:data:`MARGIN` without memcached (a worker keeps a state at most
``cache_ttl`` from when it began reading it, before the delete committed);
the very next request with it.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid

import pytest

from tests.conftest import REPO_ROOT, require
from tests.support import databases
from tests.support.servers import GunicornServer, http_request

sys.path.insert(0, str(REPO_ROOT) + "/bench")
seen_everywhere = importlib.import_module("seen_everywhere")

#: The ttl pair's cache_ttl, and the margin the test allows above it (clock reads, nothing else).
CACHE_TTL = 2.0
MARGIN = 0.25
#: The shared pair's cache_ttl: long enough that a stale state would show.
SHARED_TTL = 300.0
WORKERS = 3


class Hosts:
    """The servers of one backend: ``ttl`` and ``shared`` lists of (host, port), the admin (host, port)."""

    def __init__(self, ttl, shared, admin, registry_url, cluster, servers) -> None:
        self.ttl = ttl
        self.shared = shared
        self.admin = admin
        self.registry_url = registry_url
        self.cluster = cluster
        self.servers = servers

    def logs(self) -> str:
        return "".join(server.log() for server in self.servers)


def _start(ini, name, host, workers, tmp) -> GunicornServer:
    server = GunicornServer(
        ini, name=name, workers=workers, env=seen_everywhere.server_env(), cwd=REPO_ROOT, log_dir=tmp, host=host
    )
    server.start()
    seen_everywhere.wait_serving(host, server.port)
    return server


@pytest.fixture(scope="module", params=databases.BACKENDS)
def hosts(request, memcached_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seen-" + request.param)
    made = None
    if request.param == "sqlite":
        url = databases.sqlite_url(tmp / "tenants.sqlite")
    else:
        made = databases.server_database(request.param, require)
        url = next(made)
    from tenancy_mw import migrations

    migrations.upgrade(url, ["tenants"])
    cluster = ",".join(server.address for server in memcached_cluster)
    (tmp / "ttl").mkdir()
    (tmp / "shared").mkdir()
    ttl_ini = seen_everywhere.write_config(tmp / "ttl", url, CACHE_TTL, "", admin_servers=cluster)
    shared_ini = seen_everywhere.write_config(tmp / "shared", url, SHARED_TTL, cluster)
    servers = []
    try:
        servers.append(_start(ttl_ini, "admin", "127.0.0.1", 1, tmp))
        for ini in (ttl_ini, shared_ini):
            for host in seen_everywhere.HOSTS:
                servers.append(_start(ini, "public", host, WORKERS, tmp))
        places = [(server.host, server.port) for server in servers]
        yield Hosts(places[1:3], places[3:5], places[0], url, memcached_cluster, servers)
        assert "Traceback" not in "".join(server.log() for server in servers)
    finally:
        for server in servers:
            server.stop()
        if made is not None:
            made.close()


def fresh() -> str:
    return "seen-%s" % uuid.uuid4().hex[:10]


def create(hosts: Hosts, tenant: str) -> None:
    seen_everywhere.admin_call(hosts.admin, "PUT", tenant, 201, b"{}")()


def watch(pair, tenant, change, before=(200,), after=seen_everywhere.GONE, settle=0.3):
    return seen_everywhere.watch(pair, WORKERS, tenant, change, before, after, per_host=4, settle=settle)


def test_without_memcached_a_delete_is_seen_everywhere_within_cache_ttl(hosts):
    """Every worker of both hosts refuses the tenant once cache_ttl (+ MARGIN) has passed since the DELETE's 204."""
    # The delete lands late in the workers' entries' lives: they were read
    # as the clients began, and the delete comes 1.5 s later.
    result, seen = seen_everywhere.measure_round(
        hosts.ttl, hosts.admin, WORKERS, settle=CACHE_TTL * 0.75, until=CACHE_TTL + MARGIN
    )
    assert seen_everywhere.broken_bound(seen, CACHE_TTL + MARGIN) == []
    assert result.served_after_refusal == 0
    assert result.other_statuses == {}
    assert sorted(result.workers) == list(seen_everywhere.HOSTS)
    assert all(len(pids) == WORKERS for pids in result.workers.values())
    assert result.everywhere > 0


def test_with_memcached_a_delete_is_seen_on_the_next_request(hosts):
    result, seen = seen_everywhere.measure_round(hosts.shared, hosts.admin, WORKERS, settle=0.3)
    assert seen_everywhere.broken_bound(seen, 0.0) == []
    assert result.last_served < 0  # nothing sent after the 204 was served
    assert result.served_after_refusal == 0
    assert all(len(pids) == WORKERS for pids in result.workers.values())


def test_with_memcached_a_create_and_a_restore_are_seen_on_the_next_request(hosts):
    tenant = fresh()
    # Every worker has the id cached as unknown (for SHARED_TTL seconds) when it is created.
    created = watch(
        hosts.shared,
        tenant,
        seen_everywhere.admin_call(hosts.admin, "PUT", tenant, 201, b"{}"),
        before=(404,),
        after=(200,),
    )
    assert seen_everywhere.broken_bound(created, 0.0, after=(200,)) == []
    seen_everywhere.admin_call(hosts.admin, "DELETE", tenant, 204)()
    restored = watch(
        hosts.shared,
        tenant,
        seen_everywhere.admin_call(hosts.admin, "POST", tenant + "/action/restore", 200),
        before=(410,),
        after=(200,),
    )
    assert seen_everywhere.broken_bound(restored, 0.0, after=(200,)) == []


def test_purge_with_the_memcached_servers_is_seen_on_the_next_request(hosts):
    tenant = fresh()
    create(hosts, tenant)
    seen_everywhere.admin_call(hosts.admin, "DELETE", tenant, 204)()
    cluster = ",".join(server.address for server in hosts.cluster)

    def purge() -> None:
        # python -m from the checkout: the code under test, not an installed copy.
        command = [
            sys.executable,
            "-m",
            "tenancy_mw.manage",
            "tenants",
            "purge",
            "--url",
            hosts.registry_url,
            "--registry-only",
            "--retention",
            "0",
            "--state-memcached-servers",
            cluster,
        ]
        done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert repr(tenant) in done.stdout
        assert done.stderr == ""

    purged = watch(hosts.shared, tenant, purge, before=(410,), after=(404,))
    assert seen_everywhere.broken_bound(purged, 0.0, after=(404,)) == []


def _statuses(pair, tenant: str, times: int = 4) -> set[int]:
    return {
        http_request(port, "GET", "/v2.1/%s/servers" % tenant, host=host).status
        for _ in range(times)
        for host, port in pair
    }


def test_with_memcached_down_every_shared_worker_answers_503_then_sees_what_changed(hosts):
    """fail_closed (the default): 503 with Retry-After rather than a state memcached cannot vouch for.

    While the cluster is down the tenant is deleted (the admin logs that it
    could not tell memcached); every worker of the shared hosts answers 503;
    once the cluster is back (empty, as a restarted memcached is), every
    worker refuses the tenant on its next request.
    """
    tenant, other = fresh(), fresh()
    create(hosts, tenant)
    create(hosts, other)
    assert _statuses(hosts.shared, tenant) == {200}
    for server in hosts.cluster:
        server.kill()
    seen_everywhere.admin_call(hosts.admin, "DELETE", tenant, 204)()
    # The hosts without memcached go on serving from their registry and cache.
    assert _statuses(hosts.ttl, other) == {200}
    response = http_request(hosts.shared[0][1], "GET", "/v2.1/%s/servers" % other, host=hosts.shared[0][0])
    assert response.status == 503
    assert response.headers["retry-after"] == "1"
    assert json.loads(response.body)["errors"][0]["code"] == "tenancy.state-store-unavailable"

    def restart() -> None:
        for server in hosts.cluster:
            server.start()

    try:
        back = watch(hosts.shared, tenant, restart, before=(503,), after=(410,))
    finally:
        restart_missing(hosts.cluster)
    # Every worker answered 503 while the cluster was down, and 410 to every request sent once it was back.
    assert seen_everywhere.broken_bound(back, 0.0, after=(410,)) == []
    assert _statuses(hosts.shared, other) == {200}
    assert "could not be shared through memcached" in hosts.logs()


def restart_missing(cluster) -> None:
    """Start again the servers of *cluster* that are not running (a test that failed half-way)."""
    for server in cluster:
        if not server.running:
            server.start()
