"""A removed tenant's resources go with it: the registry's delete, restore and purge with a TenantRemoval.

On SQLite, PostgreSQL and MariaDB: ``delete`` hides the resources and
``restore`` brings them back, both under the tenant's row lock and rolled
back together when the service fails; ``purge`` marks the tenant, has the
service delete its resources, then forgets it, so a purge stopped after
any step finishes on the next run and a restore racing it never leaves
half a tenant.  Then the filter: ``tenant_admin`` loads a removal named by
``move_provider`` and answers ``503`` when it fails.  The same through
the demo's real servers and a killed purge command:
tests/functional/test_demo_tenant_life.py.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
import webtest

from tenancy_mw import migrations
from tenancy_mw.tenants.admin import TenantAdmin
from tenancy_mw.tenants.moves import load_provider
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.registry import (
    ACTIVE,
    DELETED,
    PURGE_STEPS,
    TenantConflict,
    TenantRegistry,
    tenants_table,
)
from tenancy_mw.tenants.removal import RemovalFailed, TenantRemoval
from tests.support.widgets import WidgetService


class Shelf(TenantRemoval):
    """A service's resources in a dict: ``{tenant: {"items": [...], "hidden": bool}}``; fails when told to."""

    def __init__(self, application=None) -> None:
        self.tenants: dict[str, dict] = {}
        self.failing: set[str] = set()
        self.lock = threading.Lock()

    def add(self, tenant_id: str, *items: str) -> None:
        self.tenants.setdefault(tenant_id, {"items": [], "hidden": False})["items"].extend(items)

    def visible(self, tenant_id: str) -> list[str]:
        entry = self.tenants.get(tenant_id)
        return [] if entry is None or entry["hidden"] else list(entry["items"])

    def _fail_if_told(self, step: str) -> None:
        if step in self.failing:
            raise OSError("the %s disk is full" % step)

    def hide_resources(self, tenant_id):
        self._fail_if_told("hide")
        if tenant_id in self.tenants:
            self.tenants[tenant_id]["hidden"] = True

    def restore_resources(self, tenant_id):
        self._fail_if_told("restore")
        if tenant_id in self.tenants:
            self.tenants[tenant_id]["hidden"] = False

    def purge_resources(self, tenant_id):
        self._fail_if_told("purge")
        with self.lock:
            self.tenants.pop(tenant_id, None)


@pytest.fixture
def registry(sql_url):
    migrations.upgrade(sql_url, ["tenants"])
    registry = TenantRegistry(sql_url)
    yield registry
    registry.close()


def deleted_tenant(registry: TenantRegistry, shelf: Shelf, tenant_id: str, *items: str) -> None:
    registry.put(tenant_id, {})
    shelf.add(tenant_id, *items)
    registry.delete(tenant_id, shelf)


# Delete and restore ---------------------------------------------------------------------------


def test_delete_hides_the_resources_and_restore_brings_them_back(registry):
    shelf = Shelf()
    registry.put("acme", {})
    shelf.add("acme", "web1", "web2")
    assert registry.delete("acme", shelf).state == DELETED
    assert shelf.visible("acme") == []
    assert shelf.tenants["acme"]["items"] == ["web1", "web2"]  # kept: recoverable
    assert registry.restore("acme", shelf).state == ACTIVE
    assert shelf.visible("acme") == ["web1", "web2"]


@pytest.mark.parametrize(("step", "state"), [("hide", ACTIVE), ("restore", DELETED)])
def test_a_failing_removal_rolls_the_registry_back(registry, step, state):
    shelf = Shelf()
    registry.put("acme", {})
    shelf.add("acme", "web1")
    if step == "restore":
        registry.delete("acme", shelf)
    shelf.failing.add(step)
    call = registry.delete if step == "hide" else registry.restore
    with pytest.raises(RemovalFailed, match="disk is full") as caught:
        call("acme", shelf)
    assert (caught.value.tenant_id, caught.value.step) == ("acme", step)
    assert isinstance(caught.value.__cause__, OSError)
    assert registry.state("acme") == state
    shelf.failing.clear()
    call("acme", shelf)  # tried again, it works
    assert registry.state("acme") != state


# Purge ----------------------------------------------------------------------------------------


def test_purge_marks_then_removes_the_resources_then_the_row(registry):
    shelf = Shelf()
    deleted_tenant(registry, shelf, "gone", "web1")
    registry.put("dst", {})
    with registry.move_lock("gone", "dst") as (conn, _):
        registry.record_moves(conn, "dst", "gone", [(("servers", "1"), ("servers", "1"))])
    seen = []

    def check(step, tenant_id):
        tenant = registry.get(tenant_id)
        seen.append((step, tenant is not None and tenant.purge_started is not None, "gone" in shelf.tenants))
        if tenant is not None:
            with pytest.raises(TenantConflict) as caught:
                registry.restore(tenant_id, shelf)
            assert caught.value.reason == "purging"

    report = registry.purge(timedelta(0), removal=shelf, on_step=check)
    assert seen == [("marked", True, True), ("resources-removed", True, False), ("removed", False, False)]
    assert (report.tenants, report.moves, report.resumed, report.failed) == (["gone"], 1, [], {})
    assert report.removal == "%s.Shelf" % __name__
    assert "their resources removed by %s.Shelf" % __name__ in str(report)
    assert registry.get("gone") is None
    assert registry.put("gone", {}).created  # anew, and the service has nothing of the old one
    assert shelf.visible("gone") == []


class Stopped(Exception):
    """The purge "killed" after a step (the real kill is in the functional test)."""


@pytest.mark.parametrize("stop_after", PURGE_STEPS)
def test_a_purge_stopped_after_any_step_finishes_on_the_next_run(registry, stop_after):
    shelf = Shelf()
    deleted_tenant(registry, shelf, "gone", "web1")
    deleted_tenant(registry, shelf, "later", "db1")

    def stop(step, tenant_id):
        if step == stop_after:
            raise Stopped()

    with pytest.raises(Stopped):
        registry.purge(timedelta(0), removal=shelf, on_step=stop)
    # Never forgotten while its resources remain; never restorable once marked.
    tenant = registry.get("gone")
    assert tenant is None or "gone" not in shelf.tenants or stop_after == "marked"
    assert tenant is None or tenant.purge_started is not None
    assert shelf.visible("later") == []
    assert "later" in shelf.tenants
    # Even a retention that purges nothing now finishes what was begun.
    again = registry.purge(timedelta(days=3650), removal=shelf)
    finished = [] if stop_after == "removed" else ["gone"]
    assert (again.tenants, again.resumed) == (finished, finished)
    assert registry.get("gone") is None
    assert "gone" not in shelf.tenants
    assert registry.state("later") == DELETED
    assert "later" in shelf.tenants
    assert registry.purge(timedelta(0), removal=shelf).tenants == ["later"]


@pytest.mark.parametrize("stall_after", ["marked", "resources-removed"])
def test_a_stalled_purge_never_purges_the_tenant_created_anew_under_the_id(registry, stall_after):
    # Run A stalls after a step; run B (cron, meanwhile) purges the tenant
    # whole; the id is created anew with resources of its own.  When A wakes
    # up, it must leave the new tenant and its resources alone.
    shelf = Shelf()
    deleted_tenant(registry, shelf, "acme", "old-web")
    meanwhile = {}

    def stall(step, tenant_id):
        if step == stall_after and not meanwhile:
            meanwhile["b"] = registry.purge(timedelta(0), removal=shelf)
            registry.put("acme", {"holder": "new"})
            shelf.add("acme", "new-web")

    report_a = registry.purge(timedelta(0), removal=shelf, on_step=stall)
    assert meanwhile["b"].tenants == ["acme"]
    assert report_a.tenants == []  # not counted as its own: B finished it
    assert registry.state("acme") == ACTIVE
    assert registry.get("acme").representation == {"holder": "new"}
    assert shelf.visible("acme") == ["new-web"]


def test_a_failing_removal_leaves_its_tenant_marked_and_the_others_go(registry):
    shelf = Shelf()
    for tenant_id in ("a", "b"):
        deleted_tenant(registry, shelf, tenant_id, "x")
    shelf.failing.add("purge")
    failed = registry.purge(timedelta(0), removal=shelf)
    assert failed.tenants == []
    assert set(failed.failed) == {"a", "b"}
    assert "FAILED 'a' (still marked purging)" in str(failed)
    assert registry.get("a").purge_started is not None
    shelf.failing.clear()
    dry = registry.purge(timedelta(days=3650), removal=shelf, dry_run=True)
    assert (dry.tenants, dry.resumed) == (["a", "b"], ["a", "b"])
    assert set(shelf.tenants) == {"a", "b"}  # a dry run removes nothing
    assert registry.purge(timedelta(days=3650), removal=shelf).tenants == ["a", "b"]
    assert shelf.tenants == {}


def test_without_a_removal_only_the_registry_is_purged_and_the_report_says_so(registry):
    registry.put("acme", {})
    registry.delete("acme")
    report = registry.purge(timedelta(0))
    assert report.tenants == ["acme"]
    assert report.removal is None
    assert "registry only (the service's resources were not touched)" in str(report)


def test_a_restore_racing_a_purge_never_leaves_half_a_tenant(registry, sql_url):
    """Restores and a purge of the same deleted tenants at once, from two connections: each tenant
    ends either active with all its resources or unknown with none."""
    shelf = Shelf()
    tenant_ids = ["t%02d" % n for n in range(12)]
    for tenant_id in tenant_ids:
        deleted_tenant(registry, shelf, tenant_id, tenant_id + "-a", tenant_id + "-b")
    restorer = TenantRegistry(sql_url)
    outcomes: dict[str, str] = {}
    start = threading.Barrier(2)

    def restore_all():
        start.wait()
        for tenant_id in reversed(tenant_ids):
            try:
                restorer.restore(tenant_id, shelf)
                outcomes[tenant_id] = "restored"
            except (TenantConflict, LookupError) as exc:
                outcomes[tenant_id] = type(exc).__name__

    thread = threading.Thread(target=restore_all)
    thread.start()
    try:
        start.wait()
        report = registry.purge(timedelta(0), removal=shelf)
    finally:
        thread.join(timeout=120)
        restorer.close()
    for tenant_id in tenant_ids:
        state = registry.state(tenant_id)
        if outcomes[tenant_id] == "restored":
            assert state == ACTIVE
            assert tenant_id not in report.tenants
            assert shelf.visible(tenant_id) == [tenant_id + "-a", tenant_id + "-b"]
        else:
            assert state == "unknown"
            assert tenant_id in report.tenants
            assert tenant_id not in shelf.tenants


# The migration ----------------------------------------------------------------------------------


def test_the_purge_started_column_migrates_up_and_down_keeping_every_tenant(sql_url):
    migrations.upgrade(sql_url, ["tenants"])
    migrations.downgrade(sql_url, "tenants", "tenants_0001")
    assert migrations.current(sql_url)["tenants"] == "tenants_0001"
    engine = sa.create_engine(sql_url)
    try:
        assert "purge_started" not in {c["name"] for c in sa.inspect(engine).get_columns("tenancy_tenants")}
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO tenancy_tenants (id, representation, state, revision, created, updated)"
                    " VALUES ('old', '{}', 'deleted', 2, '2026-01-01 00:00:00', '2026-01-02 00:00:00')"
                )
            )
        migrations.upgrade(sql_url, ["tenants"])
        assert migrations.current(sql_url)["tenants"] == "tenants_0002"
        registry = TenantRegistry(sql_url)
        try:
            old = registry.get("old")
            assert (old.state, old.revision, old.purge_started) == (DELETED, 2, None)
            with registry.engine.begin() as conn:
                conn.execute(tenants_table.update().values(purge_started=sa.func.now()))
            assert registry.get("old").purge_started is not None
        finally:
            registry.close()
        migrations.downgrade(sql_url, "tenants", "tenants_0001")
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT id, state FROM tenancy_tenants")).all() == [("old", "deleted")]
    finally:
        engine.dispose()


# The filter -------------------------------------------------------------------------------------


class RemovalOnly(Shelf):
    """A TenantRemoval with no moves, as ``move_provider`` loads it: called with the wrapped app."""

    instances: list[RemovalOnly] = []

    def __init__(self, application) -> None:
        super().__init__(application)
        RemovalOnly.instances.append(self)


@pytest.fixture
def registry_url(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "tenants.sqlite")
    migrations.upgrade(url, ["tenants"])
    return url


def test_load_provider_takes_a_removal_alone():
    assert isinstance(load_provider("%s:RemovalOnly" % __name__, WidgetService()), RemovalOnly)


def test_the_filter_hides_on_delete_restores_and_answers_503_when_the_service_fails(registry_url):
    admin = TenantAdmin(WidgetService(), {"connection": registry_url, "move_provider": "%s:RemovalOnly" % __name__})
    try:
        shelf = RemovalOnly.instances[-1]
        assert admin.removal is shelf
        assert admin.provider is None
        app = webtest.TestApp(TenantPath(admin, {}))
        app.put_json("/v1/acme", {})
        shelf.add("acme", "w1")
        shelf.failing.add("hide")
        refused = app.delete("/v1/acme", status=503)
        assert refused.json["errors"][0]["code"] == "tenancy.removal-failed"
        assert "'acme' was not deleted" in refused.json["errors"][0]["detail"]
        assert refused.headers["Retry-After"] == "5"
        assert app.get("/v1/acme").status_int == 200
        assert shelf.visible("acme") == ["w1"]
        shelf.failing.clear()
        app.delete("/v1/acme", status=204)
        assert shelf.visible("acme") == []
        app.post("/v1/acme/action/restore", status=200)
        assert shelf.visible("acme") == ["w1"]
        app.delete("/v1/acme", status=204)
        admin.registry.purge(timedelta(0), removal=admin.removal, on_step=lambda step, tenant_id: check_purging(app))
        assert app.get("/v1/acme", status=404)
        assert shelf.tenants == {}
    finally:
        admin.close()


def check_purging(app) -> None:
    """While a purge holds it marked, the tenant is 410 with its purge time, and restore is 409."""
    shown = app.get("/v1/acme", expect_errors=True)
    if shown.status_int == 404:
        return  # the last step: gone
    assert shown.status_int == 410
    assert shown.headers["X-Tenant-Purge-Started"].endswith("Z")
    refused = app.post("/v1/acme/action/restore", status=409)
    assert refused.json["errors"][0]["code"] == "tenancy.tenant-purging"


def test_a_move_provider_without_removal_is_loaded_with_a_warning(registry_url, caplog):
    with caplog.at_level("WARNING", logger="tenancy_mw.tenant_admin"):
        admin = TenantAdmin(
            WidgetService(), {"connection": registry_url, "move_provider": "tests.support.widgets:WidgetMoves"}
        )
    try:
        assert admin.provider is not None
        assert admin.removal is None
        assert "is no tenancy_mw.tenants.removal.TenantRemoval" in caplog.text
    finally:
        admin.close()
