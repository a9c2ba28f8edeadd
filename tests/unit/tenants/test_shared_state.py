"""Tenant states shared through memcached, in process: generations, the registry's hook, the cache, the filter.

Real memcached servers (tests/support/memcached.py); two ``tenant_admin``
filters in one process stand for two workers.  The same across real
gunicorn workers on two hosts is tests/functional/test_tenant_state_everywhere.py.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
import webtest

from tenancy_mw import migrations
from tenancy_mw.tenants.admin.filter import TenantAdmin
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.registry import TenantRegistry, TenantStateCache
from tenancy_mw.tenants.shared_state import MemcachedError, SharedTenantStates
from tests.support.servers import free_port
from tests.support.widgets import WidgetService


@pytest.fixture
def shared(memcached_cluster):
    states = SharedTenantStates([server.address for server in memcached_cluster], timeout=1)
    yield states
    states.close()


def _tenant_on(shared: SharedTenantStates, address: str, prefix: str = "t") -> str:
    """A tenant id whose generation lives on the server at *address*."""
    number = 0
    while shared.cluster.server_of(shared.key("%s%d" % (prefix, number))) != address:
        number += 1
    return "%s%d" % (prefix, number)


# Generations -----------------------------------------------------------------------


def test_a_generation_stays_until_a_change_replaces_it(shared):
    first = shared.generation("acme")
    assert shared.generation("acme") == first
    shared.changed(["acme"])
    second = shared.generation("acme")
    assert second != first
    assert shared.generation("other") not in (first, second)


def test_a_missing_generation_is_added_once_and_every_reader_gets_the_same(shared, memcached_cluster):
    other_worker = SharedTenantStates([server.address for server in memcached_cluster])
    try:
        tenant = "fresh-%d" % free_port()
        before = shared.round_trips
        added = shared.generation(tenant)
        assert shared.round_trips - before == 2  # the get that missed, then the add and its read
        assert other_worker.generation(tenant) == added
        before = shared.round_trips
        assert shared.generation(tenant) == added
        assert shared.round_trips - before == 1  # the usual case: one round trip
    finally:
        other_worker.close()


def test_a_generation_lost_with_a_restart_is_never_taken_for_unchanged(shared, memcached_cluster):
    """A restarted server comes back empty: the next reader adds a new, random generation."""
    victim = memcached_cluster[0]
    tenant = _tenant_on(shared, victim.address)
    kept = shared.generation(tenant)
    victim.kill()
    try:
        with pytest.raises(MemcachedError):
            shared.generation(tenant)
    finally:
        victim.start()
    assert shared.generation(tenant) != kept


@pytest.mark.parametrize("tenant", ["x" * 255, "Bob's Tenant", "caf\u00e9 \u2603", "a\tb\r\nc", "\ud800"])
def test_any_tenant_id_has_a_key(shared, tenant):
    key = shared.key(tenant)
    assert len(key) < 250
    assert key.isascii()
    assert " " not in key
    shared.changed([tenant])
    assert shared.generation(tenant) == shared.generation(tenant)


def test_changes_go_to_each_server_in_one_round_trip(shared, memcached_cluster):
    tenants = ["purged-%d" % number for number in range(150)]
    before = {tenant: shared.generation(tenant) for tenant in tenants}
    trips = shared.round_trips
    shared.changed(tenants)
    servers = {shared.cluster.server_of(shared.key(tenant)) for tenant in tenants}
    assert len(servers) == len(memcached_cluster)
    assert shared.round_trips - trips <= len(servers) * 2  # 100 commands at most per round trip
    assert all(shared.generation(tenant) != before[tenant] for tenant in tenants)


def test_announce_logs_what_it_could_not_share(caplog):
    shared = SharedTenantStates(["127.0.0.1:%d" % free_port()], timeout=0.5)
    with caplog.at_level(logging.ERROR, logger="tenancy_mw.tenant_admin"):
        assert shared.announce(["acme"]) is False
    assert "'acme'" in caplog.text
    assert "could not be shared through memcached" in caplog.text
    with pytest.raises(MemcachedError):
        shared.changed(["acme"])
    shared.close()


# The registry's hook, on every backend ------------------------------------------------


@pytest.fixture
def announced(sql_url):
    migrations.upgrade(sql_url, ["tenants"])
    calls: list[list[str]] = []
    registry = TenantRegistry(sql_url, on_change=calls.append)
    registry.calls = calls  # type: ignore[attr-defined]
    yield registry
    registry.close()


def test_every_state_change_is_announced_after_its_commit(announced):
    from tenancy_mw.tenants.registry import TenantGone, TenantNotFound

    calls = announced.calls
    announced.put("acme", {})
    announced.delete("acme")
    announced.restore("acme")
    announced.put("b2", {})
    with announced.move_lock("b2", "acme"):
        pass
    assert calls == [["acme"], ["acme"], ["acme"], ["b2"], ["acme", "b2"]]
    with pytest.raises(TenantNotFound):
        announced.delete("nobody")
    assert len(calls) == 5  # nothing there, nothing announced
    announced.delete("acme")
    announced.delete("b2")
    calls.clear()
    # Deleted again: nothing changes, but the state is announced again, so
    # repeating a call repairs an announcement memcached could not take.
    with pytest.raises(TenantGone):
        announced.delete("acme")
    assert calls == [["acme"]]
    calls.clear()
    assert announced.purge(timedelta(0), dry_run=True).tenants == ["acme", "b2"]
    assert calls == []
    announced.purge(timedelta(0))
    # Each tenant's three purge steps lock its row one after another, each announced.
    assert calls == [["acme"]] * 3 + [["b2"]] * 3


def test_an_announcement_sees_the_change_committed(sql_url):
    """The hook runs after the commit: what it reads (another connection) is the new state."""
    migrations.upgrade(sql_url, ["tenants"])
    reader = TenantRegistry(sql_url)
    seen = []
    writer = TenantRegistry(sql_url, on_change=lambda ids: seen.extend(reader.state(t) for t in ids))
    try:
        writer.put("acme", {})
        writer.delete("acme")
        assert seen == ["active", "deleted"]
    finally:
        writer.close()
        reader.close()


# The cache ----------------------------------------------------------------------------


def test_a_kept_state_is_used_only_while_its_generation_is_current():
    generations = {"acme": 1}
    loads = []
    cache = TenantStateCache(lambda t: loads.append(t) or "active", ttl=60, generation=generations.get)
    assert cache.state("acme") == "active"
    assert cache.state("acme") == "active"
    assert loads == ["acme"]
    generations["acme"] = 2
    cache.state("acme")
    assert loads == ["acme", "acme"]
    cache.remember("acme", "deleted")  # no generation: not current
    cache.state("acme")
    assert loads == ["acme"] * 3


def test_with_ttl_zero_the_generation_is_not_even_asked():
    asked = []
    cache = TenantStateCache(lambda t: "active", ttl=0, generation=lambda t: asked.append(t))
    assert cache.state("acme") == "active"
    assert asked == []


# The filter ----------------------------------------------------------------------------


@pytest.fixture
def registry_url(tmp_path):
    path = tmp_path / "tenants.sqlite"
    migrations.upgrade("sqlite:///%s" % path, ["tenants"])
    return "sqlite:///%s" % path


@pytest.fixture
def workers(registry_url, memcached_cluster):
    """An admin endpoint and two public workers sharing states through the cluster, cache_ttl 300."""
    servers = ",".join(server.address for server in memcached_cluster)
    built = []

    def build(**options):
        conf = {"connection": registry_url, "cache_ttl": "300", "state_memcached_servers": servers}
        conf.update(options)
        service = WidgetService()
        admin = TenantAdmin(service, conf)
        built.append(admin)
        app = webtest.TestApp(TenantPath(admin, {}))
        app.admin, app.service = admin, service
        return app

    yield build
    for admin in built:
        admin.close()


def test_every_worker_sees_a_change_on_its_next_request(workers):
    admin, one, two = workers(), workers(admin_api="false"), workers(admin_api="false")
    one.get("/v2.1/acme/widgets", status=404)  # kept as unknown for 300 s ...
    admin.put_json("/v2.1/acme", {}, status=201)
    one.get("/v2.1/acme/widgets", status=200)  # ... but the generation moved
    two.get("/v2.1/acme/widgets", status=200)
    admin.delete("/v2.1/acme", status=204)
    one.get("/v2.1/acme/widgets", status=410)
    two.get("/v2.1/acme/widgets", status=410)
    admin.post("/v2.1/acme/action/restore", status=200)
    one.get("/v2.1/acme/widgets", status=200)
    # One memcached round trip per request once the state is kept.
    before = one.admin.shared.round_trips
    for _ in range(5):
        one.get("/v2.1/acme/widgets", status=200)
    assert one.admin.shared.round_trips - before == 5


def _kill_owner(cluster, shared, tenant):
    address = shared.cluster.server_of(shared.key(tenant))
    (victim,) = [server for server in cluster if server.address == address]
    victim.kill()
    return victim


def test_fail_closed_is_503_for_the_tenants_of_a_down_server_only(workers, memcached_cluster, caplog):
    admin, public = workers(), workers(admin_api="false", state_store_timeout="0.5")
    doomed = _tenant_on(public.admin.shared, memcached_cluster[0].address, "doomed")
    safe = _tenant_on(public.admin.shared, memcached_cluster[1].address, "safe")
    for tenant in (doomed, safe):
        admin.put_json("/v2.1/%s" % tenant, {}, status=201)
        public.get("/v2.1/%s/widgets" % tenant, status=200)
    victim = _kill_owner(memcached_cluster, public.admin.shared, doomed)
    try:
        with caplog.at_level(logging.ERROR, logger="tenancy_mw.tenant_admin"):
            for _ in range(3):
                refused = public.get("/v2.1/%s/widgets" % doomed, status=503)
                assert refused.headers["Retry-After"] == "1"
                assert refused.json["errors"][0]["code"] == "tenancy.state-store-unavailable"
            public.get("/v2.1/%s/widgets" % safe, status=200)
            # The admin's write is made, and what it could not share is logged.
            admin.delete("/v2.1/%s" % doomed, status=204)
        assert public.service.calls == 3  # two before, the safe one during: none for the doomed tenant
        assert caplog.text.count("cannot be checked in memcached") == 1  # at most one line per LOG_INTERVAL
        assert "could not be shared through memcached" in caplog.text
    finally:
        victim.start()
    public.get("/v2.1/%s/widgets" % doomed, status=410)


def test_fail_open_checks_with_the_worker_cache_as_without_memcached(workers, memcached_cluster, caplog):
    admin = workers()
    public = workers(admin_api="false", on_state_store_error="fail_open", cache_ttl="0.5")
    tenant = _tenant_on(public.admin.shared, memcached_cluster[2].address, "open")
    admin.put_json("/v2.1/%s" % tenant, {}, status=201)
    public.get("/v2.1/%s/widgets" % tenant, status=200)
    victim = _kill_owner(memcached_cluster, public.admin.shared, tenant)
    try:
        with caplog.at_level(logging.ERROR, logger="tenancy_mw.tenant_admin"):
            public.get("/v2.1/%s/widgets" % tenant, status=200)  # read again from the registry, then kept
            admin.delete("/v2.1/%s" % tenant, status=204)
            public.get("/v2.1/%s/widgets" % tenant, status=200)  # as without memcached: within cache_ttl ...
            time.sleep(0.6)
            public.get("/v2.1/%s/widgets" % tenant, status=410)  # ... and not after it
        assert "fail_open" in caplog.text
    finally:
        victim.start()
    public.get("/v2.1/%s/widgets" % tenant, status=410)
