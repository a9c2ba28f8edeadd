"""Real databases for the tests: SQLite files, and PostgreSQL/MariaDB databases made on demand.

PostgreSQL (127.0.0.1:5432, user root, trust auth) and MariaDB
(127.0.0.1:3306, root, empty password) are used when reachable.  Every
database made here has a unique name, ``tenancy_<pid>_<random>``, so test
runs of several checkouts on one machine never meet, and is dropped when its
fixture ends.  An unreachable server skips its tests, or fails them under
``CI=true`` (:func:`tests.conftest.require`).  The admin URLs can be changed
with ``TENANCY_TEST_POSTGRES_URL`` and ``TENANCY_TEST_MARIADB_URL``.

Fixtures (in ``tests/conftest.py``, so every test can use them):

- ``postgresql_url``, ``mariadb_url``: one database per test session.
- ``sql_url``: parametrised over ``sqlite``, ``postgresql``, ``mariadb``;
  a fresh, empty database for each test.
- ``make_database``: ``make_database("postgresql")`` returns the URL of a
  fresh database, dropped at the end of the test.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

POSTGRES_ADMIN_URL = os.environ.get("TENANCY_TEST_POSTGRES_URL", "postgresql+psycopg2://root@127.0.0.1:5432/test")
MARIADB_ADMIN_URL = os.environ.get("TENANCY_TEST_MARIADB_URL", "mysql+pymysql://root:@127.0.0.1:3306/test")

#: The three backends every SQL feature is tested on.
BACKENDS = ("sqlite", "postgresql", "mariadb")

# template0: the database is UTF8 whatever template1's encoding is.  FORCE:
# a connection some failed test left open must not keep the database.
# MariaDB's is made with the server's default, case-insensitive collation on
# purpose: the library must make its own columns compare exactly.
_SERVERS = {
    "postgresql": (
        POSTGRES_ADMIN_URL,
        "PostgreSQL",
        "CREATE DATABASE %s ENCODING 'UTF8' TEMPLATE template0",
        "DROP DATABASE IF EXISTS %s WITH (FORCE)",
    ),
    "mariadb": (
        MARIADB_ADMIN_URL,
        "MariaDB",
        "CREATE DATABASE %s CHARACTER SET utf8mb4",
        "DROP DATABASE IF EXISTS %s",
    ),
}


def admin_engine(admin_url: str) -> sa.Engine | None:
    """An AUTOCOMMIT engine on the server's admin database, or ``None`` if unreachable."""
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except sa.exc.DBAPIError:
        engine.dispose()
        return None
    return engine


def postgres_jit_loaded(conn: sa.Connection, require) -> bool:
    """Whether the PostgreSQL backend serving *conn* has loaded its JIT provider (LLVM): its memory map says.

    The server must run on this machine and its processes be readable
    (*require* skips, or fails under ``CI=true``, otherwise).
    """
    pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    try:
        maps = Path("/proc/%d/maps" % pid).read_text()
    except OSError:  # another machine's server, or another user's process
        maps = ""
    require("postgres" in maps, "the PostgreSQL server's processes on this machine, readable")
    return "llvmjit" in maps


def sqlite_url(path) -> str:
    """The SQLAlchemy URL of the SQLite file *path*."""
    return "sqlite:///" + str(path)


def server_database(backend: str, require) -> Iterator[str]:
    """Create a database with a unique name on *backend*'s server, yield its URL, drop it.

    *require* is :func:`tests.conftest.require` (skip, or fail under CI).
    """
    admin_url, what, create_sql, drop_sql = _SERVERS[backend]
    engine = admin_engine(admin_url)
    require(engine is not None, "%s at %s" % (what, sa.make_url(admin_url).render_as_string(hide_password=True)))
    name = "tenancy_%d_%s" % (os.getpid(), secrets.token_hex(4))
    with engine.connect() as conn:
        conn.execute(sa.text(create_sql % name))
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(drop_sql % name))
        engine.dispose()


@contextlib.contextmanager
def database_for(backend: str, sqlite_dir, require) -> Iterator[str]:
    """The URL of a fresh database on *backend*: a new SQLite file in *sqlite_dir*, or a server
    database of :func:`server_database`, dropped on exit."""
    if backend == "sqlite":
        yield sqlite_url(os.path.join(str(sqlite_dir), "demo.sqlite"))
        return
    made = server_database(backend, require)
    try:
        yield next(made)
    finally:
        made.close()
