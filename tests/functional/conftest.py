"""Fixtures of the demo's functional tests: databases made per session, demo servers.

The session's PostgreSQL and MariaDB databases are the ``postgresql_url``
and ``mariadb_url`` fixtures of ``tests/conftest.py``
(:mod:`tests.support.databases`).
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import unquote

import pytest
import sqlalchemy as sa

from tests.conftest import REPO_ROOT
from tests.support import databases

#: The folder of the demo, its api-paste.ini and its ``demo_compute`` package.
EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples")
#: The demo's paste config, as ``make demo`` serves it.
DEMO_INI = os.path.join(EXAMPLES_DIR, "api-paste.ini")

# The demo is not an installed package: gunicorn finds it through its
# --chdir, the tests through sys.path.
if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

#: The three backends every storage test runs on.
BACKENDS = list(databases.BACKENDS)
sqlite_url = databases.sqlite_url


def empty_servers_table(url: str) -> None:
    """Delete every row of the demo's ``servers`` table in *url*'s database, if it has one."""
    engine = sa.create_engine(url)
    try:
        if sa.inspect(engine).has_table("servers"):
            with engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM servers"))
    finally:
        engine.dispose()


def pytest_terminal_summary(terminalreporter):
    """The demo fuzzer's numbers (tests/functional/test_demo_fuzz.py), at the end of the run, when it ran."""
    from tests.support.fuzz import RESULTS

    if RESULTS:
        terminalreporter.section("demo fuzzer (schemathesis)")
        for line in RESULTS:
            terminalreporter.write_line(line)


@pytest.fixture(params=BACKENDS)
def database_url(request, tmp_path):
    """A URL per backend: a fresh SQLite file, or the session's PostgreSQL/MariaDB database, emptied."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "demo.sqlite")
    url = request.getfixturevalue(request.param + "_url")
    empty_servers_table(url)
    return url


@pytest.fixture
def store(database_url):
    """A :class:`demo_compute.storage.ServerStore` on each backend."""
    from demo_compute.storage import ServerStore

    server_store = ServerStore(database_url)
    yield server_store
    server_store.close()


class DemoClient:
    """Talks to a demo served by gunicorn, as curl would: JSON in, JSON out.

    Targets are sent exactly as given, percent-encoding and all.
    """

    def __init__(self, server, registry_url: str | None = None) -> None:
        self.server = server
        #: The tenant registry the demo's tenant_admin filters use.
        self.registry_url = registry_url

    def add_tenants(self, *raw_tenants: str) -> None:
        """Create tenants (still-encoded segments, as in URLs) in the registry, as the admin PUT would."""
        from tenancy_mw.tenants.registry import TenantRegistry

        registry = TenantRegistry(self.registry_url)
        try:
            for raw in raw_tenants:
                registry.put(unquote(raw), {})
        finally:
            registry.close()

    def request(self, method: str, target: str, body=None, headers: dict | None = None):
        """Send one request; a dict *body* is sent as JSON, bytes as they are."""
        headers = dict(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        return self.server.request(method, target, headers, body)

    def create(self, tenant: str, name: str, headers: dict | None = None):
        """POST a server named *name* under the still-encoded tenant segment *tenant*."""
        return self.request("POST", "/v2.1/%s/servers" % tenant, {"server": {"name": name}}, headers)

    def list(self, tenant: str, headers: dict | None = None):
        """GET the server list of the still-encoded tenant segment *tenant*."""
        return self.request("GET", "/v2.1/%s/servers" % tenant, headers=headers)

    def log(self) -> str:
        """What gunicorn and the app wrote so far."""
        return self.server.log()


def demo_server_env(database_url: str, registry_url: str, state_dir, cache_ttl: float = 1.0) -> dict:
    """The environment that points a demo gunicorn at *database_url*, the registry *registry_url*
    and two cell databases, SQLite files in *state_dir* (not those of examples/state/).

    oslo.config's environment variables (``OS_<GROUP>__<OPTION>``) override
    the demo's tenancy_mw_demo.conf, as examples/README.rst tells operators:
    the app's database and the idempotency store's, the registry and its
    cache TTL, the cells of the ``id_resolver`` filter (which the app reads too).
    """
    cells = "cell1=%s, cell2=%s" % tuple(sqlite_url(os.path.join(str(state_dir), "cell%d.sqlite" % n)) for n in (1, 2))
    return {
        "OS_DEMO_COMPUTE__DATABASE_URL": database_url,
        "OS_IDEMPOTENCY__CONNECTION": database_url,
        "OS_TENANT_ADMIN__CONNECTION": registry_url,
        "OS_TENANT_ADMIN__CACHE_TTL": str(cache_ttl),
        "OS_ID_RESOLVER__CELLS": cells,
    }


def migrated_registry(database_url: str, sqlite_dir) -> str:
    """The registry URL for a demo on *database_url*, its tables made: the same database on a
    server, a file of its own beside it on SQLite (a move holds the registry's write lock there).

    The idempotency store's table is made in *database_url*, as ``make demo``
    does (``python -m demo_compute.config``).
    """
    from tenancy_mw import migrations

    if database_url.startswith("sqlite"):
        registry_url = sqlite_url(os.path.join(str(sqlite_dir), "tenants.sqlite"))
        migrations.upgrade(registry_url, ["tenants"])
        migrations.upgrade(database_url, ["idempotency"])
    else:
        registry_url = database_url
        migrations.upgrade(registry_url, ["tenants", "idempotency"])
    return registry_url


@pytest.fixture
def start_demo(serve_paste, tmp_path):
    """Start the public pipeline of examples/api-paste.ini under gunicorn, 2 workers, on a database URL.

    Usage: ``client = start_demo(database_url)``; create tenants with
    ``client.add_tenants("acme")`` before using them.  Its registry and cell
    databases are of the test's own, not those of examples/state/.
    """

    def _start(database_url: str) -> DemoClient:
        registry_url = migrated_registry(database_url, tmp_path)
        env = demo_server_env(database_url, registry_url, tmp_path)
        server = serve_paste(DEMO_INI, workers=2, env=env, cwd=EXAMPLES_DIR)
        return DemoClient(server, registry_url)

    return _start


@pytest.fixture
def demo_db(tmp_path):
    """The SQLite file the :func:`demo` fixture's server keeps its servers in."""
    return tmp_path / "demo.sqlite"


@pytest.fixture
def demo(start_demo, demo_db):
    """The demo under gunicorn, 2 workers, on a SQLite file of its own."""
    return start_demo(sqlite_url(demo_db))
