"""A tenant's whole life on the demo, through its two real pipelines and the real purge command.

For each backend (SQLite, PostgreSQL, MariaDB) the public and admin
pipelines of examples/api-paste.ini run under gunicorn (2 workers each),
and ``tenancy-mw-manage tenants purge --paste api-paste.ini#admin`` runs
in ``examples/`` as an operator runs it, with the servers' settings.
What a user checks: after ``DELETE`` and restore every server is back,
tags and all; after ``DELETE``, purge and a new ``PUT`` of the same id the
tenant starts empty, and its old servers are gone from the database; a
purge killed (``SIGKILL``) after any of its steps leaves a tenant that is
still deleted and never restorable half-way, and the next run finishes
it; restores racing a purge leave every tenant whole, restored or gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime

import pytest
import sqlalchemy as sa

from tenancy_mw.core import sql
from tenancy_mw.tenants.registry import PURGE_STEPS, TenantRegistry
from tests.conftest import require
from tests.functional.conftest import BACKENDS, EXAMPLES_DIR
from tests.support import databases
from tests.support.demo import DemoServers, serve_demo
from tests.support.servers import call

#: The tenant cache TTL the servers run with, in seconds.
CACHE_TTL = 1.0
MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")
V226 = {"OpenStack-API-Version": "compute 2.26"}
SERVER_ID = "0b9f6f1e-3c3b-4c9e-9a57-1f1d6c1e0a11"


@pytest.fixture(scope="module", params=BACKENDS)
def demo(request, tmp_path_factory):
    """The demo's public and admin servers on a database of the backend's own."""
    tmp = tmp_path_factory.mktemp("life-" + request.param)
    with databases.database_for(request.param, tmp, require) as database_url:
        with serve_demo(tmp, database_url=database_url, cache_ttl=CACHE_TTL) as servers:
            yield servers


def code_of(response) -> str:
    (error,) = json.loads(response.body)["errors"]
    return error["code"]


def new_tenant(demo: DemoServers, servers: int = 2) -> tuple[str, list[dict]]:
    """A tenant of the test's own with *servers* servers, the first tagged ``web``; the servers as listed."""
    tenant = "life-%s" % uuid.uuid4().hex[:8]
    assert call(demo.admin, "PUT", "/v2.1/" + tenant, {"tier": "gold"}).status == 201
    for number in range(servers):
        created = call(demo.public, "POST", "/v2.1/%s/servers" % tenant, {"server": {"name": "web%d" % number}})
        assert created.status == 201, created.body
    listed = server_list(demo.admin, tenant)
    tagged = call(demo.admin, "PUT", "/v2.1/%s/servers/%s/tags/web" % (tenant, listed[0]["id"]), headers=V226)
    assert tagged.status == 201, tagged.body
    return tenant, server_list(demo.admin, tenant)


def server_list(server, tenant: str) -> list[dict]:
    """The tenant's servers as a client sees them at 2.26 (tags included): ``[{id, name, tags}]``."""
    answer = call(server, "GET", "/v2.1/%s/servers" % tenant, headers=V226)
    assert answer.status == 200, (answer.status, answer.body)
    return [{key: s[key] for key in ("id", "name", "tags")} for s in answer.json()["servers"]]


def stored(demo: DemoServers, tenant: str) -> dict:
    """What the demo's database holds of *tenant*: server ids (hidden or not), tags, tombstones."""
    engine = sa.create_engine(demo.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT id, tenant_deleted FROM servers WHERE tenant_id = :t"), {"t": tenant}
            ).all()
            ids = sorted(row[0] for row in rows)
            tags = conn.execute(sa.text("SELECT resource_id FROM tenancy_mw_tags")).all()
            tombstones = conn.execute(
                sa.text("SELECT id FROM deleted_servers WHERE tenant_id = :t"), {"t": tenant}
            ).all()
    finally:
        engine.dispose()
    return {
        "servers": ids,
        "hidden": sorted(row[0] for row in rows if row[1] is not None),
        "tags": sorted(row[0] for row in tags if row[0] in ids),
        "tombstones": len(tombstones),
    }


def start_purge(demo: DemoServers, *args: str, pipeline: str = "admin", **env: str) -> subprocess.Popen:
    """``tenants purge --paste api-paste.ini#PIPELINE ARGS`` in examples/, as an operator runs it, with the
    servers' settings (and *env*)."""
    return subprocess.Popen(
        [MANAGE, "tenants", "purge", "--paste", "api-paste.ini#" + pipeline, *args],
        cwd=EXAMPLES_DIR,
        env=dict(os.environ, **demo.env, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def purge(demo: DemoServers, *args: str, pipeline: str = "admin") -> subprocess.CompletedProcess:
    """Run the purge to its end."""
    process = start_purge(demo, *args, pipeline=pipeline)
    out, err = process.communicate(timeout=180)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def after_cache_ttl() -> None:
    """Every worker's tenant cache has expired what it held before now."""
    time.sleep(CACHE_TTL + 0.2)


def assert_gone_and_new_starts_empty(demo: DemoServers, tenant: str, old: list[dict]) -> None:
    """*tenant* is unknown, nothing of it is stored, and created again it has no server."""
    assert call(demo.admin, "GET", "/v2.1/" + tenant).status == 404
    assert stored(demo, tenant) == {"servers": [], "hidden": [], "tags": [], "tombstones": 0}
    assert call(demo.admin, "PUT", "/v2.1/" + tenant, {"tier": "new"}).status == 201
    after_cache_ttl()
    for server in (demo.admin, demo.public):
        assert server_list(server, tenant) == []
        for each in old:
            assert call(server, "GET", "/v2.1/%s/servers/%s" % (tenant, each["id"])).status == 404


# Delete and restore ------------------------------------------------------------------------------


def test_delete_hides_every_server_and_restore_brings_all_back(demo):
    tenant, servers = new_tenant(demo)
    assert servers[0]["tags"] == ["web"]
    assert call(demo.admin, "DELETE", "/v2.1/" + tenant).status == 204
    kept = stored(demo, tenant)
    # Recoverable: kept in the database, hidden.
    assert kept["servers"] == kept["hidden"] == sorted(s["id"] for s in servers)
    assert kept["tags"] == [servers[0]["id"]]
    after_cache_ttl()
    assert call(demo.admin, "GET", "/v2.1/%s/servers" % tenant).status == 410
    restored = call(demo.admin, "POST", "/v2.1/%s/action/restore" % tenant)
    assert restored.status == 200, restored.body
    assert stored(demo, tenant)["hidden"] == []
    after_cache_ttl()
    for server in (demo.admin, demo.public):
        assert server_list(server, tenant) == servers


# Purge ------------------------------------------------------------------------------------------


def test_after_delete_purge_and_create_again_the_tenant_starts_empty(demo):
    tenant, servers = new_tenant(demo)
    assert call(demo.admin, "DELETE", "/v2.1/" + tenant).status == 204
    dry = purge(demo, "--retention", "0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would have purged ")
    assert repr(tenant) in dry.stdout
    assert stored(demo, tenant)["hidden"] == sorted(s["id"] for s in servers)
    assert call(demo.admin, "GET", "/v2.1/" + tenant).status == 410
    done = purge(demo, "--retention", "0")
    assert done.returncode == 0, done.stderr
    assert repr(tenant) in done.stdout
    assert "their resources removed by demo_compute.moves.ServerMoves" in done.stdout
    assert_gone_and_new_starts_empty(demo, tenant, servers)
    # Deleted and restored, the new tenant still has none of the old servers.
    assert call(demo.admin, "DELETE", "/v2.1/" + tenant).status == 204
    assert call(demo.admin, "POST", "/v2.1/%s/action/restore" % tenant).status == 200
    assert stored(demo, tenant)["servers"] == []
    after_cache_ttl()
    assert server_list(demo.admin, tenant) == []


def test_purge_without_the_services_removal_is_refused(demo):
    refused = subprocess.run(
        [MANAGE, "tenants", "purge", "--url", demo.registry_url, "--retention", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--paste FILE#PIPELINE" in refused.stderr
    public = purge(demo, "--retention", "0", pipeline="main")
    assert public.returncode == 1
    assert "pipeline 'main' of api-paste.ini has no tenant_admin (admin_api = true)" in public.stderr
    both = purge(demo, "--registry-only")
    assert both.returncode == 2
    assert "give it --url, not --paste" in both.stderr
    elsewhere = purge(demo, "--url", "sqlite:////nonexistent/other.sqlite")
    assert elsewhere.returncode == 1
    assert "names another database than the pipeline's tenant_admin connection" in elsewhere.stderr
    assert "Traceback" not in refused.stderr + public.stderr + both.stderr + elsewhere.stderr


def stopped_purge(demo: DemoServers, step: str) -> tuple[subprocess.Popen, threading.Thread]:
    """A purge command stopped (waiting to be killed) after *step* of its first tenant, and its stderr reader."""
    process = start_purge(demo, "--retention", "0", TENANCY_MW_TEST_PURGE_STOP_AT=step)
    said: list[str] = []
    stopped = threading.Event()

    def read() -> None:
        for line in process.stderr:
            said.append(line)
            if "stopped after step %s" % step in line:
                stopped.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not stopped.wait(timeout=180):
        process.kill()
        process.wait()
        raise AssertionError("the purge did not stop after %s: %s" % (step, "".join(said)))
    return process, reader


def check_while_stopped(demo: DemoServers, tenant: str, step: str, servers: list[dict]) -> None:
    """The state a purge stopped after *step* leaves: never forgotten while servers remain, never restorable."""
    held = stored(demo, tenant)
    if step == "removed":
        assert call(demo.admin, "GET", "/v2.1/" + tenant).status == 404
        assert held["servers"] == []
        return
    shown = call(demo.admin, "GET", "/v2.1/" + tenant)
    assert shown.status == 410
    assert shown.headers["x-tenant-purge-started"].endswith("Z")
    restore = call(demo.admin, "POST", "/v2.1/%s/action/restore" % tenant)
    assert (restore.status, code_of(restore)) == (409, "tenancy.tenant-purging")
    assert code_of(call(demo.admin, "PUT", "/v2.1/" + tenant, {})) == "tenancy.tenant-deleted"
    if step == "marked":
        assert held["hidden"] == sorted(s["id"] for s in servers)
    else:
        assert held == {"servers": [], "hidden": [], "tags": [], "tombstones": 0}


@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_killed_after_each_step_is_finished_by_the_next_run(demo, step):
    tenant, servers = new_tenant(demo)
    assert call(demo.admin, "DELETE", "/v2.1/" + tenant).status == 204
    process, reader = stopped_purge(demo, step)
    try:
        check_while_stopped(demo, tenant, step, servers)
    finally:
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
        reader.join(timeout=60)
        process.stdout.close()
        process.stderr.close()
    # The next run finishes it, whatever its retention.
    again = purge(demo, "--retention", "30d")
    assert again.returncode == 0, again.stderr
    if step == "removed":
        assert again.stdout.startswith("purged 0 tenants")
    else:
        assert "resumed the stopped purge of %r" % tenant in again.stdout
    assert_gone_and_new_starts_empty(demo, tenant, servers)


def test_restores_racing_a_purge_leave_every_tenant_whole(demo):
    """A purge (each tenant's servers deleted after a 0.5 s wait) and restores of the same tenants at
    once: each tenant ends restored with all its servers, or unknown with none stored."""
    made = sorted((new_tenant(demo) for _ in range(6)), key=lambda pair: pair[0])
    for tenant, _ in made:
        assert call(demo.admin, "DELETE", "/v2.1/" + tenant).status == 204
    process = start_purge(demo, "--retention", "0", TENANCY_DEMO_MOVE_DELAY="0.5")
    answers = {}
    try:
        wait_until_marked(demo, made[0][0])
        # Last first: those the purge has not reached yet come back; the one it holds is 409.
        threads = [threading.Thread(target=restore_into, args=(demo, t, answers)) for t, _ in reversed(made)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    after_cache_ttl()
    for tenant, servers in made:
        if answers[tenant] == 200:
            assert repr(tenant) not in out
            assert server_list(demo.admin, tenant) == servers
        else:
            assert answers[tenant] in (404, 409), answers
            assert repr(tenant) in out
            assert_gone_and_new_starts_empty(demo, tenant, servers)
    # Which of the others the purge reached before their restore depends on
    # the machine's load; each must be whole either way (above).
    assert answers[made[0][0]] != 200  # marked before any restore was sent


def restore_into(demo: DemoServers, tenant: str, answers: dict) -> None:
    answers[tenant] = call(demo.admin, "POST", "/v2.1/%s/action/restore" % tenant).status


def wait_until_marked(demo: DemoServers, tenant: str) -> None:
    """Wait until the purge has marked *tenant* (read from the registry, as an operator's tenants show would)."""
    registry = TenantRegistry(demo.registry_url)
    try:
        deadline = time.monotonic() + 180
        while True:
            found = registry.get(tenant)
            if found is None or found.purge_started is not None:
                return
            assert time.monotonic() < deadline, "the purge never marked %r" % tenant
            time.sleep(0.05)
    finally:
        registry.close()


# The demo's database from before ------------------------------------------------------------------


def test_a_servers_table_from_before_gets_its_column_and_keeps_every_server(sql_url):
    """A demo database made before tenants could be deleted (examples/state/ is kept between runs)."""
    from demo_compute.storage import ServerStore

    old = sa.Table(  # the table as the demo made it until then
        "servers",
        sa.MetaData(),
        sa.Column("id", sql.ExactString(36), primary_key=True),
        sa.Column("tenant_id", sql.ExactString(255), nullable=False, index=True),
        sa.Column("name", sql.ExactString(255), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        **sql.table_options(),
    )
    engine = sa.create_engine(sql_url)
    try:
        old.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(old.insert().values(id=SERVER_ID, tenant_id="acme", name="old", created=datetime(2026, 1, 1)))
    finally:
        engine.dispose()
    stores = [ServerStore(sql_url), ServerStore(sql_url)]  # a second worker finds the column there
    try:
        store = stores[0]
        assert [s["name"] for s in store.list_servers("acme")] == ["old"]
        assert store.hide_tenant("acme") == 1
        assert store.list_servers("acme") == []
        assert store.restore_tenant("acme") == 1
        assert [s["name"] for s in stores[1].list_servers("acme")] == ["old"]
    finally:
        for store in stores:
            store.close()
