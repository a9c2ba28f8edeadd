"""The tenant registry on SQLite, PostgreSQL and MariaDB: migrations, exact ids, purge, moves, the row lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tenancy_mw import migrations
from tenancy_mw.tenants.registry import (
    TenantConflict,
    TenantGone,
    TenantNotFound,
    TenantRegistry,
    metadata,
    purge,
)
from tests.conftest import REPO_ROOT

TABLES = {"tenancy_tenants", "tenancy_tenant_moves"}


@pytest.fixture
def registry(sql_url):
    migrations.upgrade(sql_url, ["tenants"])
    registry = TenantRegistry(sql_url)
    yield registry
    registry.close()


def table_names(url):
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrations_up_down_and_match_the_runtime_tables(sql_url):
    assert migrations.upgrade(sql_url, ["tenants"]) == ["tenants"]
    assert TABLES <= table_names(sql_url)
    assert migrations.current(sql_url)["tenants"] == "tenants_0002"
    engine = sa.create_engine(sql_url)
    try:
        with engine.connect() as conn:
            options = {"compare_type": True, "version_table": migrations.VERSION_TABLE}
            context = MigrationContext.configure(conn, opts=options)
            diff = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert diff == [], diff
    migrations.upgrade(sql_url, ["tenants"])  # again: nothing to do
    migrations.downgrade(sql_url, "tenants")
    assert not TABLES & table_names(sql_url)
    assert "tenants" not in migrations.current(sql_url)


def test_ids_compare_exactly(registry):
    for tenant_id in ("acme", "Acme", "acme ", "ACME", "∑∞∆∏", "a" * 255, "a" * 254 + "∑"):
        assert registry.put(tenant_id, {"id": tenant_id}).created, tenant_id
    for tenant_id in ("acme", "Acme", "acme ", "ACME", "∑∞∆∏", "a" * 255, "a" * 254 + "∑"):
        assert registry.get(tenant_id).representation == {"id": tenant_id}
    assert registry.get("acme  ") is None
    assert registry.state("aCme") == "unknown"
    registry.delete("acme ")
    assert registry.state("acme") == "active"
    assert registry.state("acme ") == "deleted"


def test_representations_survive_every_backend(registry):
    big = {"notes": "é∑\U0001f600\ud800\x00" + "x" * 200_000, "n": [1.5, None, True]}
    registry.put("acme", big)
    assert registry.get("acme").representation == big


def test_lifecycle_errors(registry):
    with pytest.raises(TenantNotFound):
        registry.delete("nobody")
    with pytest.raises(TenantNotFound):
        registry.restore("nobody")
    registry.put("acme", {})
    with pytest.raises(TenantConflict) as caught:
        registry.restore("acme")
    assert caught.value.reason == "not-deleted"
    with pytest.raises(TenantConflict) as caught:
        registry.put("acme", {"a": 1}, updatable=False)
    assert caught.value.reason == "not-updatable"
    registry.delete("acme")
    with pytest.raises(TenantGone):
        registry.delete("acme")
    with pytest.raises(TenantConflict) as caught:
        registry.put("acme", {})
    assert caught.value.reason == "deleted"


def test_purge_respects_the_retention(registry, sql_url):
    for tenant_id in ("old", "recent", "alive", "dst"):
        registry.put(tenant_id, {})
    registry.delete("old")
    registry.delete("recent")
    with registry.move_lock("old", "dst") as (conn, _):
        registry.record_moves(conn, "old", "dst", [(("servers", "1"), ("servers", "1"))])
    later = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None) + timedelta(hours=2)
    # Pretend "recent" was deleted just now and "old" three hours ago.
    with registry.engine.begin() as conn:
        # Typed, so SQLAlchemy stores it (sqlite3's own datetime adapter is deprecated since Python 3.12).
        update = sa.text("UPDATE tenancy_tenants SET deleted = :t WHERE id = 'old'")
        conn.execute(update.bindparams(sa.bindparam("t", type_=sa.DateTime())), {"t": later - timedelta(hours=3)})
    report = registry.purge(timedelta(hours=2, minutes=30), now=later)
    assert report.tenants == ["old"]
    assert report.moves == 1
    assert registry.get("old") is None
    assert registry.state("recent") == "deleted"
    assert registry.state("alive") == "active"
    assert purge(sql_url, timedelta(0)).tenants == ["recent"]
    assert registry.find_move("old", ("servers", "1")) is None


def test_purge_leaves_a_tenant_restored_while_it_runs_whole(registry, sql_url):
    """A restore holds the tenant's row when a purge starts: the purge waits, then neither removes the
    tenant nor its move records, nor reports it."""
    import threading
    import time

    from tenancy_mw.tenants.registry import ACTIVE, tenants_table

    for tenant_id in ("back", "dst"):
        registry.put(tenant_id, {})
    with registry.move_lock("back", "dst") as (conn, _):
        registry.record_moves(conn, "back", "dst", [(("servers", "1"), ("servers", "1"))])
    registry.delete("back")
    restorer = TenantRegistry(sql_url)
    reports = []
    try:
        with restorer._write() as conn:  # what restore() does, held open
            assert restorer._locked_row(conn, "back")["state"] == "deleted"
            conn.execute(tenants_table.update().where(tenants_table.c.id == "back").values(state=ACTIVE, deleted=None))
            purger = threading.Thread(target=lambda: reports.append(registry.purge(timedelta(0))))
            purger.start()
            time.sleep(0.5)
        purger.join(timeout=60)
    finally:
        restorer.close()
    assert reports[0].tenants == []
    assert reports[0].moves == 0
    assert registry.state("back") == "active"
    assert registry.find_move("back", ("servers", "1")) is not None


def test_moves_are_found_by_prefix_and_never_chain(registry):
    for tenant_id in ("a", "b", "c"):
        registry.put(tenant_id, {})
    with registry.move_lock("a", "b") as (conn, tenants):
        assert set(tenants) == {"a", "b"}
        registry.record_moves(conn, "a", "b", [(("servers", "x"), ("servers", "x"))])
    record, rest = registry.find_move("a", ("servers", "x", "ips"))
    assert (record.dest_tenant, record.dest_path, rest) == ("b", ("servers", "x"), ("ips",))
    assert registry.find_move("A", ("servers", "x")) is None
    assert registry.find_move("a", ("servers",)) is None
    with registry.move_lock("b", "c") as (conn, _):
        registry.record_moves(conn, "b", "c", [(("servers", "x"), ("servers", "y"))])
    # a's record now points straight at c.
    assert registry.find_move("a", ("servers", "x"))[0].dest_tenant == "c"
    with registry.move_lock("c", "a") as (conn, _):
        registry.record_moves(conn, "c", "a", [(("servers", "y"), ("servers", "x"))])
    # Back home: a/servers/x is no longer a moved place.
    assert registry.find_move("a", ("servers", "x")) is None
    assert registry.find_move("b", ("servers", "x"))[0].dest_tenant == "a"


def test_a_move_lock_holds_off_other_processes(registry, sql_url, tmp_path):
    """Process 1 takes the lock and holds it; process 2 asks for it meanwhile and gets it only after."""
    registry.put("acme", {})
    registry.put("dst", {})
    log = tmp_path / "order.log"
    script = textwrap.dedent(
        """
        import os, sys, time
        from tenancy_mw.tenants.registry import TenantRegistry
        url, name, log, hold = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
        registry = TenantRegistry(url)
        if name == "second":
            while not os.path.exists(log):
                time.sleep(0.01)
        with registry.move_lock("acme", "dst") as (conn, tenants):
            with open(log, "a") as f:
                f.write(name + " locked\\n")
            time.sleep(hold)
            with open(log, "a") as f:
                f.write(name + " done\\n")
        registry.close()
        """
    )
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    first = subprocess.Popen([sys.executable, "-c", script, sql_url, "first", str(log), "1.0"], env=env)
    second = subprocess.Popen([sys.executable, "-c", script, sql_url, "second", str(log), "0"], env=env)
    assert first.wait(timeout=60) == 0
    assert second.wait(timeout=60) == 0
    assert log.read_text().split("\n")[:4] == ["first locked", "first done", "second locked", "second done"]


def test_concurrent_first_puts_of_one_id_create_it_once(registry, sql_url):
    """Eight threads PUT the same new tenant at once: one creates it, the others see it; no error."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    for round_ in range(3):
        tenant_id = "race-%d" % round_
        barrier = Barrier(8)

        def put(_, tenant_id=tenant_id, barrier=barrier):
            barrier.wait()
            return registry.put(tenant_id, {"tier": "gold"}).created

        with ThreadPoolExecutor(max_workers=8) as pool:
            created = list(pool.map(put, range(8)))
        assert sorted(created) == [False] * 7 + [True]
        assert registry.get(tenant_id).revision == 1


def test_purge_and_show_commands(tmp_path):
    """``tenancy-mw-manage tenants purge|show`` as an operator runs them (SQLite; the SQL is tested above)."""
    manage = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")
    url = "sqlite:///%s" % (tmp_path / "tenants.sqlite")

    def run(*args):
        return subprocess.run([manage, *args], capture_output=True, text=True, timeout=60)

    assert run("db", "upgrade", "--url", url, "--component", "tenants").returncode == 0
    registry = TenantRegistry(url)
    registry.put("gone", {"tier": "gold"})
    registry.put("kept", {})
    registry.delete("gone")
    registry.close()
    shown = run("tenants", "show", "--url", url, "gone")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"] == "deleted"
    assert json.loads(shown.stdout)["representation"] == {"tier": "gold"}
    missing = run("tenants", "show", "--url", url, "nobody")
    assert missing.returncode == 1
    assert "'nobody'" in missing.stderr
    bad = run("tenants", "purge", "--url", url, "--registry-only", "--retention", "soon")
    assert bad.returncode == 2
    assert "'soon'" in bad.stderr
    unsafe = run("tenants", "purge", "--url", url, "--retention", "0")
    assert unsafe.returncode == 2
    assert "--paste FILE#PIPELINE" in unsafe.stderr
    assert "--registry-only" in unsafe.stderr
    dry = run("tenants", "purge", "--url", url, "--registry-only", "--retention", "0", "--dry-run")
    assert dry.stdout.startswith("would have purged 1 tenant")
    assert run("tenants", "show", "--url", url, "gone").returncode == 0
    kept = run("tenants", "purge", "--url", url, "--registry-only", "--retention", "7d")
    assert kept.stdout.startswith("purged 0 tenants")
    done = run("tenants", "purge", "--url", url, "--registry-only", "--retention", "0")
    assert done.returncode == 0
    assert "'gone'" in done.stdout
    assert run("tenants", "show", "--url", url, "gone").returncode == 1
    assert run("tenants", "show", "--url", url, "kept").returncode == 0
    assert "Traceback" not in bad.stderr + missing.stderr


class _Clock:
    """A stand-in for time.monotonic that a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_state_cache_never_serves_a_state_older_than_its_ttl(monkeypatch):
    """A slow read (a busy registry): the state it read is kept ttl seconds from the read, not from its end."""
    from tenancy_mw.tenants import registry as tenant_registry

    clock = _Clock()
    monkeypatch.setattr(tenant_registry.time, "monotonic", clock)
    states = iter(["active", "deleted"])

    def slow_load(tenant_id):
        state = next(states)  # read at the start of the call...
        clock.now += 4.0  # ...which takes 4 s to come back
        return state

    cache = tenant_registry.TenantStateCache(slow_load, ttl=5, max_entries=10)
    assert cache.state("acme") == "active"
    clock.now += 1.5  # 5.5 s after the read
    assert cache.state("acme") == "deleted"


def test_the_state_cache_is_bounded_and_drops_expired_entries_first(monkeypatch):
    from tenancy_mw.tenants import registry as tenant_registry

    clock = _Clock()
    monkeypatch.setattr(tenant_registry.time, "monotonic", clock)
    loads = []
    cache = tenant_registry.TenantStateCache(lambda t: loads.append(t) or "unknown", ttl=5, max_entries=100)
    for i in range(50):
        cache.state("old-%d" % i)
    clock.now += 6  # every entry so far has expired
    cache.state("new-0")
    # Expired entries go as soon as anything new is kept, not only once the cache is full.
    assert list(cache._entries) == ["new-0"]
    for i in range(1, 1000):
        cache.state("new-%d" % i)
        assert len(cache._entries) <= 100
    # The newest are kept, the oldest went first.
    assert list(cache._entries)[-1] == "new-999"
    assert "new-899" not in cache._entries
    before = len(loads)
    cache.state("new-950")
    assert len(loads) == before  # still cached


@pytest.mark.parametrize("retention", ["99999999999w", "200000w", "400000d"])
def test_a_retention_beyond_the_calendar_is_a_usage_error(tmp_path, capsys, retention):
    from tenancy_mw import manage

    url = "sqlite:///%s" % (tmp_path / "tenants.sqlite")
    with pytest.raises(SystemExit) as caught:
        manage.main(["tenants", "purge", "--url", url, "--registry-only", "--retention", retention])
    assert caught.value.code == 2
    assert repr(retention) in capsys.readouterr().err


def test_purge_with_a_retention_older_than_any_date_removes_nothing(registry):
    registry.put("gone", {})
    registry.delete("gone")
    report = registry.purge(timedelta(days=999_999_999))
    assert report.tenants == []
    assert registry.state("gone") == "deleted"


def test_canonical_document_json_is_compact_sorted_ascii_and_refuses_nan():
    from tenancy_mw.tenants import registry

    assert registry.canonical_document_json({"b": [1, 2], "a": "é"}) == '{"a":"\\u00e9","b":[1,2]}'
    with pytest.raises(ValueError, match="JSON compliant"):
        registry.canonical_document_json({"a": float("nan")})


def test_canonical_json_is_the_old_name_of_canonical_document_json_and_warns():
    from tenancy_mw.tenants import registry

    with pytest.warns(DeprecationWarning, match=r"registry\.canonical_document_json"):
        old = registry.canonical_json
    assert old is registry.canonical_document_json
    with pytest.warns(DeprecationWarning, match="canonical_document_json"):
        from tenancy_mw.tenants.registry import canonical_json  # noqa: F401
    with pytest.raises(AttributeError):
        registry.no_such_name  # noqa: B018
