"""SQL building blocks shared by the tables tenancy_mw owns.

Pure SQLAlchemy, no WSGI: the tenant registry, the idempotency store and
the tag table all need the same three things.

- :class:`ExactString`, a text column that compares exactly (case and
  trailing spaces included) on every backend.  SQLite and PostgreSQL
  compare text that way already.  MySQL and MariaDB do not: their default
  collations ignore case, and even ``utf8mb4_bin`` is a PAD SPACE collation
  (``'acme' = 'acme '``), which would let tenant ``acme `` read tenant
  ``acme``'s rows.  There the column gets the binary NO PAD collation,
  ``utf8mb4_nopad_bin`` on MariaDB and ``utf8mb4_0900_bin`` on MySQL 8.
- :func:`create_engine`, an engine fit for several worker processes: on
  SQLite a busy timeout and WAL, so writers from two processes queue
  instead of failing; on servers a pre-ping, since they close idle
  connections; on MySQL/MariaDB the ``utf8mb4`` connection charset.
- :func:`table_options`, the table options that make MySQL/MariaDB tables
  InnoDB (row locks, transactions) and ``utf8mb4``.
- :func:`is_retryable`, whether a failed transaction may simply run again
  (a deadlock victim, a serialization failure, a lock wait timeout).

Example::

    >>> import sqlalchemy as sa
    >>> from tenancy_mw.core.sql import ExactString, create_engine, table_options
    >>> metadata = sa.MetaData()
    >>> tenants = sa.Table("example_tenants", metadata,
    ...                    sa.Column("id", ExactString(255), primary_key=True),
    ...                    **table_options())
    >>> engine = create_engine("sqlite://")
    >>> metadata.create_all(engine)
    >>> with engine.begin() as conn:
    ...     _ = conn.execute(tenants.insert(), [{"id": "acme"}, {"id": "acme "}, {"id": "ACME"}])
    ...     conn.execute(sa.select(sa.func.count()).select_from(tenants)).scalar()
    3
    >>> engine.dispose()
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any

from tenancy_mw.extras import missing_extra

# The one place tenancy_mw imports SQLAlchemy (tests/project/test_house.py
# holds every other module to it): a missing sql extra is named one way.
try:
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql, postgresql, sqlite  # noqa: F401 - for the other modules
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.ext.compiler import compiles  # noqa: F401 - for the other modules
    from sqlalchemy.sql.expression import ColumnElement  # noqa: F401 - for the other modules
    from sqlalchemy.sql.visitors import InternalTraversal  # noqa: F401 - for the other modules
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

__all__ = [
    "EXACT_COLLATIONS",
    "ExactString",
    "create_engine",
    "error_summary",
    "is_mysql",
    "is_retryable",
    "missing_table",
    "table_options",
]

MARIADB_EXACT_COLLATION = "utf8mb4_nopad_bin"
MYSQL_EXACT_COLLATION = "utf8mb4_0900_bin"
#: The MySQL/MariaDB collations under which strings compare exactly.
EXACT_COLLATIONS = frozenset({MARIADB_EXACT_COLLATION, MYSQL_EXACT_COLLATION})

#: How long a SQLite writer waits for another process's write, in seconds.
SQLITE_BUSY_TIMEOUT = 30


def is_mysql(dialect: sa.engine.Dialect) -> bool:
    """True for MySQL and MariaDB, whatever the driver (``mysql+pymysql`` names both ``mysql``)."""
    return dialect.name in ("mysql", "mariadb")


class ExactString(sa.types.TypeDecorator):
    """``VARCHAR(length)`` that compares exactly on every backend (see the module doc).

    Use it for every column that holds an identifier a client chose: tenant
    ids, tags, tokens.  ``ExactString(255)`` holds 255 characters (code
    points) on every backend.
    """

    impl = sa.String
    cache_ok = True

    @property
    def length(self) -> int | None:
        """The most characters a value holds."""
        return self.impl_instance.length  # type: ignore[attr-defined]  # impl is a String

    def load_dialect_impl(self, dialect: sa.engine.Dialect) -> sa.types.TypeEngine:
        """The plain ``VARCHAR`` except on MySQL/MariaDB, where it carries a binary NO PAD collation."""
        if is_mysql(dialect):
            collation = MARIADB_EXACT_COLLATION if getattr(dialect, "is_mariadb", False) else MYSQL_EXACT_COLLATION
            return dialect.type_descriptor(mysql.VARCHAR(self.length, charset="utf8mb4", collation=collation))
        return dialect.type_descriptor(sa.String(self.length))


def table_options() -> dict[str, str]:
    """Keyword arguments for :class:`sqlalchemy.Table` (or ``op.create_table``): InnoDB, ``utf8mb4``.

    Ignored by the other backends.
    """
    options = {}
    for prefix in ("mysql", "mariadb"):
        options[prefix + "_engine"] = "InnoDB"
        options[prefix + "_charset"] = "utf8mb4"
    return options


def create_engine(url: str | URL, **engine_args: Any) -> sa.Engine:
    """A SQLAlchemy engine for *url*, set up for several worker processes (see the module doc).

    *engine_args* go to :func:`sqlalchemy.create_engine` (pool sizes, say).
    The folder of a SQLite file is created when missing.
    """
    url = make_url(url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        path = url.database
        if path and path != ":memory:" and not path.startswith("file:"):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        connect_args = dict(engine_args.pop("connect_args", {}))
        # pysqlite's timeout is SQLite's busy timeout; a caller's (connect_args
        # or the URL's ?timeout=) stands.
        if "timeout" not in url.query:
            connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT)
        engine_args["connect_args"] = connect_args
    else:
        engine_args.setdefault("pool_pre_ping", True)
    if backend in ("mysql", "mariadb") and "charset" not in url.query:
        # Without utf8mb4 on the connection, 4-byte characters are mangled.
        url = url.update_query_dict({"charset": "utf8mb4"})
    engine = sa.create_engine(url, **engine_args)
    if backend == "sqlite" and url.database not in (None, "", ":memory:"):
        sa.event.listen(engine, "connect", _sqlite_on_connect)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Make each SQLite connection fit for several worker processes."""
    cursor = dbapi_connection.cursor()
    try:
        # No busy timeout here: pysqlite set create_engine's (or the caller's) on connecting.
        # WAL: readers never block the writer and the writer never blocks readers.
        cursor.execute("PRAGMA journal_mode = WAL")
        # WAL keeps its durability guarantees with NORMAL, and it is faster.
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def error_summary(exc: BaseException) -> str:
    """The first line of *exc*'s message (of the driver's error under a SQLAlchemy one), for logs and reports.

    Never empty: an exception without a message is named by its type.

    Example::

        >>> error_summary(RuntimeError())
        'RuntimeError'
        >>> error_summary(ValueError("bad\\nmore"))
        'bad'
    """
    orig = getattr(exc, "orig", None)
    for source in (orig, exc) if orig is not None else (exc,):
        lines = str(source).strip().splitlines()
        if lines and lines[0].strip():
            return lines[0].strip()
    return type(orig if orig is not None else exc).__name__


#: SQLSTATEs (PostgreSQL) of a transaction the server rolled back for running at the same time as another.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
#: MySQL/MariaDB error numbers of the same: a deadlock victim, a lock wait timeout.
RETRYABLE_MYSQL_ERRORS = frozenset({1213, 1205})
DUPLICATE_KEY_SQLSTATES = frozenset({"23505"})
DUPLICATE_KEY_MYSQL_ERRORS = frozenset({1062})
#: PostgreSQL's lock_not_available: a lock not had within ``lock_timeout`` (or at once, ``NOWAIT``).
LOCK_NOT_AVAILABLE_SQLSTATE = "55P03"


def is_retryable(exc: BaseException, *, duplicate_key: bool = False, lock_wait: bool = False) -> bool:
    """True when the transaction that raised *exc* failed only for racing another one, and may run again.

    *exc* is a SQLAlchemy error (its driver error is read) or a driver error.
    The caller must have rolled the whole transaction back (leaving
    ``engine.begin()`` or ``conn.begin()`` does) before it runs it again.

    Taken as retryable, per backend:

    - PostgreSQL: SQLSTATE ``40P01`` (deadlock detected: the server chose
      this transaction as the victim and rolled it back) and ``40001``
      (serialization failure, under REPEATABLE READ or SERIALIZABLE, or a
      ``FOR UPDATE`` on a row another transaction changed).  PostgreSQL's
      own documentation says to retry both.
    - MySQL/MariaDB (InnoDB): error 1213 (``ER_LOCK_DEADLOCK``, the victim's
      transaction was rolled back) and 1205 (``ER_LOCK_WAIT_TIMEOUT``: only
      the statement is rolled back, so the caller's rollback of the whole
      transaction is what makes a new try safe).
    - SQLite: nothing.  Its writers queue on the busy timeout
      (:func:`create_engine`); a "database is locked" after that is not a
      race a new try wins quickly.

    With *duplicate_key* (for a caller whose INSERT of a new row may race
    the same INSERT from another worker, so that a new try finds the row
    and takes the other path), a unique-key violation is retryable too:
    PostgreSQL ``23505``, MySQL/MariaDB 1062 (``ER_DUP_ENTRY``) and any
    SQLite :class:`sqlite3.IntegrityError`.  Without it, a duplicate key is
    an answer, not a race.

    With *lock_wait* (for a background job, such as the uuid backfill,
    that can wait for a service's own long transactions rather than fail),
    a lock not had in time is retryable too: PostgreSQL ``55P03``
    (``lock_not_available``, from ``lock_timeout`` or ``NOWAIT``) and
    SQLite's "database is locked" after its busy timeout.

    Example::

        >>> import sqlite3
        >>> is_retryable(sqlite3.OperationalError("database is locked"))
        False
        >>> is_retryable(sqlite3.IntegrityError("UNIQUE constraint failed"), duplicate_key=True)
        True
    """
    orig = getattr(exc, "orig", None) or exc
    # psycopg2 names the SQLSTATE pgcode, psycopg 3 sqlstate.
    state = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    args: tuple = tuple(getattr(orig, "args", ()))
    errno = args[0] if args and isinstance(args[0], int) else None
    if state in RETRYABLE_SQLSTATES or errno in RETRYABLE_MYSQL_ERRORS:
        return True
    if lock_wait and (state == LOCK_NOT_AVAILABLE_SQLSTATE or _is_sqlite_locked(orig)):
        return True
    if not duplicate_key:
        return False
    if state in DUPLICATE_KEY_SQLSTATES or errno in DUPLICATE_KEY_MYSQL_ERRORS:
        return True
    return isinstance(orig, sqlite3.IntegrityError)


def _is_sqlite_locked(orig: BaseException) -> bool:
    """SQLite's busy timeout ran out: "database is locked" (or "... table is locked")."""
    return isinstance(orig, sqlite3.OperationalError) and "is locked" in str(orig)


#: SQLSTATE (PostgreSQL) of a statement on a table that does not exist (``undefined_table``).
MISSING_TABLE_SQLSTATES = frozenset({"42P01"})
#: MySQL/MariaDB error number of the same (``ER_NO_SUCH_TABLE``).
MISSING_TABLE_MYSQL_ERRORS = frozenset({1146})
# The table each backend's message names: PostgreSQL's relation, MySQL's schema.table, SQLite's.
_MISSING_TABLE_NAMES = (
    re.compile(r'relation "(?:[^"]+"\.")?([^"]+)" does not exist'),
    re.compile(r"Table '(?:[^'.]*\.)?([^']+)' doesn't exist"),
    re.compile(r"no such table: (?:\w+\.)?(\S+)"),
)


def missing_table(exc: BaseException) -> str | None:
    """The table a statement failed on because it does not exist, or ``None`` for any other error.

    *exc* is a SQLAlchemy error (its driver error is read) or a driver error:
    PostgreSQL SQLSTATE ``42P01``, MySQL/MariaDB error 1146, SQLite's
    ``no such table``.  The name is the one the database's message gives
    (``""`` when it gives none it can be read from).

    Example::

        >>> missing_table(sqlite3.OperationalError("no such table: tenancy_tenants"))
        'tenancy_tenants'
        >>> missing_table(sqlite3.OperationalError("database is locked")) is None
        True
    """
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    args: tuple = tuple(getattr(orig, "args", ()))
    errno = args[0] if args and isinstance(args[0], int) else None
    missing = state in MISSING_TABLE_SQLSTATES or errno in MISSING_TABLE_MYSQL_ERRORS
    if not missing and not (isinstance(orig, sqlite3.OperationalError) and "no such table" in str(orig)):
        return None
    for pattern in _MISSING_TABLE_NAMES:
        found = pattern.search(str(orig))
        if found:
            return found.group(1)
    return ""
