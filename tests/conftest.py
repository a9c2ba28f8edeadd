"""Shared test fixtures: real servers, free ports, and the CI rule.

Under ``CI=true`` every backend must be reachable: :func:`require` fails the
test where it would otherwise skip, and :func:`pytest_sessionfinish` fails
the run if anything skipped at all.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import HealthCheck, settings

from tests.support import databases, memcached
from tests.support.servers import GunicornServer

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# `make test` runs its suites side by side on two cores, niced: there the
# time a property test takes measures the machine's load, not the code.
# Hypothesis's timing checks (each example's deadline, slow input
# generation) would fail at random: a fresh clone's run once failed
# test_paging's on "input generation is slow" (9 inputs in 1.03 s).
settings.register_profile("tenancy_mw", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tenancy_mw")


def require(available: bool, what: str) -> None:
    """Skip the calling test when *what* is missing, or fail it under ``CI=true``."""
    if available:
        return
    if IN_CI:
        pytest.fail("%s is required under CI=true but is not available" % what)
    pytest.skip("%s is not available on this machine" % what)


def pytest_sessionfinish(session, exitstatus):
    """Under CI=true a skipped test fails the run: nothing may skip silently."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if IN_CI and reporter is not None and reporter.stats.get("skipped") and exitstatus == 0:
        session.exitstatus = 1
        skipped = len(reporter.stats["skipped"])
        reporter.write_line("CI=true: %d test(s) skipped; every backend must be reachable." % skipped)


#: What `make test` leaves out on the other Pythons it tests (Makefile OTHER_PYTHONS), to keep CI under
#: 20 minutes: real servers (gunicorn, uWSGI, Chromium, bench/load.py's load run: any test using
#: ``quick_run``), builds in fresh virtualenvs, the OpenStack services and their virtualenv (any test using
#: ``openstack_venv``), and the PostgreSQL and MariaDB variants of SQL tests.  Their SQLite variants, and
#: everything else, still run there.  Slow tests are never niced (Makefile test-suites).
SLOW_MODULES = (
    "tests/openstack/",
    "tests/functional/",
    "tests/project/test_bench.py",
    "tests/project/test_bench_tags.py",
    "tests/project/test_bench_seen.py",
    "tests/project/test_makefile.py",
    "tests/project/test_no_extras.py",
    "tests/project/test_sdist.py",
)
SERVER_BACKENDS = {"postgresql", "mariadb"}
SERVER_FIXTURES = {"postgresql_url", "mariadb_url", "openstack_venv", "quick_run"}


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` what SLOW_MODULES and SERVER_BACKENDS name (``pytest -m 'not slow'`` leaves it out)."""
    for item in items:
        where = os.path.relpath(str(item.path), REPO_ROOT)
        params = getattr(item, "callspec", None)
        on_server = params is not None and SERVER_BACKENDS & {str(v) for v in params.params.values()}
        if where.startswith(SLOW_MODULES) or on_server or SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def serve_paste(tmp_path):
    """Start real gunicorn servers for paste configs; stop them after the test.

    Usage: ``server = serve_paste("examples/api-paste.ini", workers=2)``;
    ``server.url``, ``server.request(method, raw_target, headers, body)``.
    A relative *ini_path* is relative to the repository root, whatever *cwd*
    the server runs in.
    """
    started = []

    def _serve(ini_path: str, name: str = "main", workers: int = 2, env: dict | None = None, cwd: str | None = None):
        ini_path = os.path.join(REPO_ROOT, ini_path)  # an absolute ini_path stays as it is
        server = GunicornServer(ini_path, name=name, workers=workers, env=env, cwd=cwd or REPO_ROOT, log_dir=tmp_path)
        started.append(server)
        server.start()
        return server

    yield _serve
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def postgresql_url():
    """URL of a PostgreSQL database made for this test session (see :mod:`tests.support.databases`)."""
    yield from databases.server_database("postgresql", require)


@pytest.fixture(scope="session")
def mariadb_url():
    """URL of a MariaDB database made for this test session, server-default (case-insensitive) collation."""
    yield from databases.server_database("mariadb", require)


@pytest.fixture
def make_database(tmp_path):
    """Make fresh, empty databases: ``make_database("sqlite" | "postgresql" | "mariadb")`` returns a URL.

    Each is dropped at the end of the test.
    """
    made = []

    def _make(backend: str) -> str:
        if backend == "sqlite":
            return databases.sqlite_url(tmp_path / ("db%d.sqlite" % len(made)))
        generator = databases.server_database(backend, require)
        made.append(generator)
        return next(generator)

    yield _make
    for generator in made:
        generator.close()  # runs the generator's finally: drops the database


@pytest.fixture(params=databases.BACKENDS)
def sql_url(request, make_database):
    """A fresh, empty database on each backend in turn (SQLite, PostgreSQL, MariaDB)."""
    return make_database(request.param)


@pytest.fixture(scope="module")
def memcached_server():
    """One real memcached server (tests/support/memcached.py) for the test module."""
    (server,) = memcached.start_servers(1, require)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def memcached_cluster():
    """Three real memcached servers for the test module; a test may kill and restart them."""
    servers = memcached.start_servers(3, require)
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="module", params=databases.BACKENDS)
def module_sql_url(request, tmp_path_factory):
    """A database of the module's own on each backend in turn, kept for the module's tests, then dropped.

    For modules whose tests share tables (one ``create_all`` or migration
    per backend) without sharing the session's databases with other modules.
    """
    if request.param == "sqlite":
        yield databases.sqlite_url(tmp_path_factory.mktemp("module-db") / "db.sqlite")
    else:
        yield from databases.server_database(request.param, require)


@pytest.fixture(scope="session")
def openstack_venv():
    """The services' virtualenv (nova, cinder, Keystone and their clients; :mod:`tests.support.openstack`).

    ``make test`` builds it before pytest runs; here it is built if missing
    (a minute or two), or the test skips (fails under ``CI=true``) where no
    package index can be reached.
    """
    from tests.support.openstack import ensure_venv

    try:
        return ensure_venv()
    except (OSError, subprocess.CalledProcessError) as exc:
        require(False, "the OpenStack virtualenv (%s)" % exc)
