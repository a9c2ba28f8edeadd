"""Where the demo keeps its servers: one ``servers`` table, SQLAlchemy Core.

Runs on SQLite (the default, a file), PostgreSQL and MariaDB/MySQL; the
database is chosen by a SQLAlchemy URL::

    store = ServerStore("sqlite:////srv/demo/demo.sqlite")
    server = store.create_server("Bob's Tenant", "web1")
    store.list_servers("Bob's Tenant")        # [server]
    store.list_servers("bob's tenant")        # []: tenant ids are case-sensitive
    store.list_servers("Bob's Tenant", marker=server["id"], limit=10)   # the page after it: []

A list is ordered by server id, ascending, as nova pages its servers (by
``marker``, the id of the last server of the previous page).

Every query is filtered by tenant id: a server is found, listed or deleted
only under the tenant that created it.

A deleted tenant's servers are hidden, not deleted (``tenant_deleted``
holds when its tenant was deleted): no query finds them until the tenant
is restored (:meth:`ServerStore.restore_tenant`), and the purge of the
tenant deletes them for good, with their tags and tombstones
(:meth:`ServerStore.purge_tenant`).  ``tenant_admin`` calls these through
:class:`demo_compute.moves.ServerMoves`, the demo's
:class:`~tenancy_mw.tenants.removal.TenantRemoval`.

Tenant ids and names are arbitrary UTF-8; they and server ids are compared
exactly, byte for byte (a server id differing only in case is not the
server's).  SQLite and PostgreSQL compare text that way already.  MySQL and
MariaDB do not by default: their default collations ignore case, and even
``utf8mb4_bin`` ignores trailing spaces (it is a PAD SPACE collation, so
``'acme' = 'acme '``), which would let tenant ``acme `` read tenant
``acme``'s servers.  So the text columns there use the binary NO PAD
collation (``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on
MySQL 8; :class:`tenancy_mw.core.sql.ExactString`), and a store refuses to start on a ``servers`` table whose
columns compare any other way (one an older demo made: its ``id`` columns folded case).
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.engine import URL

from tenancy_mw.core import sql
from tenancy_mw.core.paths import shorten
from tenancy_mw.tags.sql import define_tables
from tenancy_mw.tenants.ids import MAX_TENANT_ID_LENGTH, validate_tenant_id

__all__ = [
    "MAX_NAME_LENGTH",
    "InvalidName",
    "MarkerNotFound",
    "ServerStore",
    "validate_name",
]

#: Longest server name, in characters (code points), as for tenant ids.
MAX_NAME_LENGTH = 255

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The ids this store hands out: str(uuid.uuid4()).
_SERVER_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# Several worker processes start at once and all create the tables; the
# losers of that race get "already exists" errors and simply try again.
_CREATE_ATTEMPTS = 5


class InvalidName(ValueError):
    """A server name that breaks a rule.

    :ivar detail: a sentence for the client, naming the offending value.
    :ivar value: the offending input, as received.
    """

    def __init__(self, detail: str, value: object) -> None:
        super().__init__(detail)
        self.detail = detail
        self.value = value


class MarkerNotFound(LookupError):
    """A page's marker that is none of the tenant's servers (nova: ``400``, "marker [ID] not found").

    :ivar detail: a sentence for the client, naming the marker.
    :ivar marker: the marker, as received.
    """

    def __init__(self, marker: str) -> None:
        self.detail = (
            "marker [%s] not found: the marker must be the id of one of this tenant's servers, the last of the"
            " previous page." % shorten(marker)
        )
        super().__init__(self.detail)
        self.marker = marker


def validate_name(name: object) -> str:
    """Return *name* if it is a valid server name, else raise :class:`InvalidName`.

    A name is a string of 1 to 255 characters, not only white space, with no
    control characters and no lone surrogates (PostgreSQL refuses NUL and no
    database can store text that is not valid Unicode).
    """
    if not isinstance(name, str):
        raise InvalidName("Server name %s is not a string." % shorten(repr(name)), name)
    if not name.strip():
        raise InvalidName("Server name %r is empty; it needs 1 to %d characters." % (name, MAX_NAME_LENGTH), name)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(
            "Server name %r is %d characters long; at most %d are allowed."
            % (shorten(name), len(name), MAX_NAME_LENGTH),
            name,
        )
    if _CONTROL.search(name):
        raise InvalidName("Server name %r contains a control character." % shorten(name), name)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName("Server name %r is not valid Unicode (a lone surrogate)." % shorten(name), name) from None
    return name


def _is_server_id(server_id: object) -> bool:
    """Whether *server_id* has the form of the ids this store hands out (others are no server's)."""
    return isinstance(server_id, str) and _SERVER_ID.fullmatch(server_id) is not None


def _utcnow() -> datetime:
    # Whole seconds: MySQL's DATETIME drops fractions, and a server must show
    # the same "created" when it is created and when it is read back.
    return datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)


class ServerStore:
    """The demo's servers, per tenant, in the database at a SQLAlchemy URL.

    Creates the ``servers`` table if it is missing.  One instance per
    process; it is safe to share between threads.

    :param url: a SQLAlchemy URL, e.g. ``sqlite:////abs/path/demo.sqlite``,
        ``postgresql+psycopg2://user@host/db``,
        ``mysql+pymysql://user:pw@host/db``.  The folder of a SQLite file is
        created when missing.
    """

    def __init__(self, url: str | URL) -> None:
        #: The SQLAlchemy engine (its pool holds this process's connections).
        self.engine = sql.create_engine(url)
        self.metadata = sa.MetaData()
        #: The ``servers`` table.
        self.servers = sa.Table(
            "servers",
            self.metadata,
            # Exact: a server id differing only in case is another server's (or none).
            sa.Column("id", sql.ExactString(36), primary_key=True),
            # The spec: services must set aside 255 characters for a tenant id.
            sa.Column("tenant_id", sql.ExactString(MAX_TENANT_ID_LENGTH), nullable=False, index=True),
            sa.Column("name", sql.ExactString(MAX_NAME_LENGTH), nullable=False),
            sa.Column("created", sa.DateTime(), nullable=False),
            # When the server's tenant was deleted; hidden while set (see the module documentation).
            sa.Column("tenant_deleted", sa.DateTime(), nullable=True),
            **sql.table_options(),
        )
        #: Only the servers of tenants that are not deleted: every read is filtered by it.
        self.visible = self.servers.c.tenant_deleted.is_(None)
        #: Deleted servers, remembered so a move of one answers 410, not 404.
        self.deleted_servers = sa.Table(
            "deleted_servers",
            self.metadata,
            sa.Column("id", sql.ExactString(36), primary_key=True),
            sa.Column("tenant_id", sql.ExactString(MAX_TENANT_ID_LENGTH), nullable=False),
            sa.Column("deleted", sa.DateTime(), nullable=False),
            **sql.table_options(),
        )
        #: The tag tables (:mod:`tenancy_mw.tags.sql`), in the servers' database so
        #: a list is filtered by tag in the same SQL query.
        self.tag_tables = define_tables(self.metadata)
        self._create_tables()
        self._add_tenant_deleted_column()
        if sql.is_mysql(self.engine.dialect):
            self._check_exact_collation()
        # Leave no open connection in the pool: should the app be built before
        # gunicorn forks its workers (--preload), each worker opens its own.
        self.engine.dispose()

    def _create_tables(self) -> None:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                self.metadata.create_all(self.engine)
                return
            except sa.exc.DBAPIError:
                # Another worker created the table between our check and our
                # CREATE; the next create_all sees it and does nothing.
                if attempt == _CREATE_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)

    def _add_tenant_deleted_column(self) -> None:
        """Give a ``servers`` table made before tenants could be deleted its ``tenant_deleted`` column."""
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            columns = {column["name"] for column in sa.inspect(self.engine).get_columns("servers")}
            if "tenant_deleted" in columns:
                return
            kind = sa.DateTime().compile(dialect=self.engine.dialect)
            try:
                with self.engine.begin() as conn:
                    conn.execute(sa.text("ALTER TABLE servers ADD COLUMN tenant_deleted %s NULL" % kind))
                return
            except sa.exc.DBAPIError:
                # Another worker added it first: seen on the next look.
                if attempt == _CREATE_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)

    def _check_exact_collation(self) -> None:
        query = sa.text(
            "SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), COLLATION_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('servers', 'deleted_servers')"
            " AND COLUMN_NAME IN ('id', 'tenant_id', 'name')"
        )
        with self.engine.connect() as conn:
            found = {column: collation for column, collation in conn.execute(query)}
        wrong = {column: collation for column, collation in found.items() if collation not in sql.EXACT_COLLATIONS}
        if wrong:
            # A table made by hand or by an older version: it would mix up
            # tenants (or server ids) that differ in case or trailing spaces.  Refuse to run.
            raise RuntimeError(
                "servers table columns %s use collation %s, which does not compare tenant and server ids exactly;"
                " convert them to %s" % (", ".join(sorted(wrong)), ", ".join(sorted(set(wrong.values()))),
                                         " or ".join(sorted(sql.EXACT_COLLATIONS)))
            )

    def create_server(self, tenant_id: str, name: str) -> dict:
        """Store a new server of *tenant_id* and return it (see :meth:`get_server`).

        Raises :class:`~tenancy_mw.tenants.ids.InvalidTenantId` or
        :class:`InvalidName` for invalid input.
        """
        validate_tenant_id(tenant_id)
        validate_name(name)
        row = {"id": str(uuid.uuid4()), "tenant_id": tenant_id, "name": name, "created": _utcnow()}
        # One statement per write: on SQLite a transaction that reads first and
        # writes later can fail at once under concurrency, busy timeout or not.
        with self.engine.begin() as conn:
            conn.execute(self.servers.insert().values(**row))
        return self._as_server(row)

    def list_servers(
        self,
        tenant_id: str,
        where: sa.ColumnElement | None = None,
        *,
        marker: str | None = None,
        limit: int | None = None,
    ) -> list[dict]:
        """The servers of *tenant_id*, by id ascending; only those meeting the SQL condition *where*, if given.

        A page of them with *marker* (only the servers after that id, which
        must be one of the tenant's servers, else :class:`MarkerNotFound`)
        and *limit* (at most that many; ``0``: none, and no query but the
        marker's).
        """
        validate_tenant_id(tenant_id)
        table = self.servers
        query = sa.select(table).where(table.c.tenant_id == tenant_id, self.visible)
        if marker is not None:
            query = query.where(table.c.id > marker)
        if where is not None:
            query = query.where(where)
        query = query.order_by(table.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            # An unknown marker is refused whatever the limit, as a client would expect.
            if marker is not None and self._find(conn, tenant_id, marker) is None:
                raise MarkerNotFound(marker)
            if limit == 0:
                return []
            rows = conn.execute(query).mappings().all()
        # The database compares exactly (see the module documentation); this
        # second, Python-side check costs nothing and keeps that promise even
        # if someone changes a column's collation later.
        return [self._as_server(row) for row in rows if row["tenant_id"] == tenant_id]

    def get_server(self, tenant_id: str, server_id: str) -> dict | None:
        """The server *server_id* of *tenant_id*, or ``None``.

        A server is a dict with ``id``, ``tenant_id``, ``name`` and
        ``created`` (an aware UTC :class:`~datetime.datetime`).  A server of
        another tenant is ``None``, exactly as an unknown one.
        """
        validate_tenant_id(tenant_id)
        if not _is_server_id(server_id):
            return None
        with self.engine.connect() as conn:
            return self._find(conn, tenant_id, server_id)

    def _find(self, conn: sa.Connection, tenant_id: str, server_id: str) -> dict | None:
        """:meth:`get_server` on *conn*."""
        if not _is_server_id(server_id):
            return None
        table = self.servers
        query = sa.select(table).where(table.c.tenant_id == tenant_id, table.c.id == server_id, self.visible)
        row = conn.execute(query).mappings().first()
        if row is None or row["tenant_id"] != tenant_id:
            return None
        return self._as_server(row)

    def delete_server(self, tenant_id: str, server_id: str) -> bool:
        """Delete the server *server_id* of *tenant_id*; ``False`` if it has no such server."""
        validate_tenant_id(tenant_id)
        if not _is_server_id(server_id):
            return False
        table = self.servers
        statement = table.delete().where(table.c.tenant_id == tenant_id, table.c.id == server_id, self.visible)
        with self.engine.begin() as conn:
            if conn.execute(statement).rowcount != 1:
                return False
            conn.execute(self.deleted_servers.insert().values(id=server_id, tenant_id=tenant_id, deleted=_utcnow()))
            return True

    def is_deleted(self, tenant_id: str, server_id: str) -> bool:
        """Whether *tenant_id* had a server *server_id* and deleted it."""
        table = self.deleted_servers
        query = sa.select(table.c.tenant_id).where(table.c.id == server_id, table.c.tenant_id == tenant_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return row is not None and row[0] == tenant_id

    def hide_tenant(self, tenant_id: str) -> int:
        """Hide every server of *tenant_id* (its tenant is deleted); how many were hidden now.

        Idempotent: servers already hidden keep the time they were hidden at.
        """
        table = self.servers
        statement = table.update().where(table.c.tenant_id == tenant_id, self.visible).values(tenant_deleted=_utcnow())
        with self.engine.begin() as conn:
            return conn.execute(statement).rowcount

    def restore_tenant(self, tenant_id: str) -> int:
        """Show every hidden server of *tenant_id* again (its tenant is restored); how many came back."""
        table = self.servers
        statement = (
            table.update()
            .where(table.c.tenant_id == tenant_id, table.c.tenant_deleted.is_not(None))
            .values(tenant_deleted=None)
        )
        with self.engine.begin() as conn:
            return conn.execute(statement).rowcount

    def purge_tenant(self, tenant_id: str) -> int:
        """Delete every server of *tenant_id* for good, hidden or not, with its tags and tombstones; how many.

        One transaction; idempotent (a second call finds nothing).
        """
        table, tags = self.servers, self.tag_tables
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(table.c.id, table.c.tenant_id).where(table.c.tenant_id == tenant_id))
            ids = [row[0] for row in found if row[1] == tenant_id]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                conn.execute(tags.tags.delete().where(tags.tags.c.resource_id.in_(chunk)))
                conn.execute(tags.locks.delete().where(tags.locks.c.resource_id.in_(chunk)))
                conn.execute(table.delete().where(table.c.tenant_id == tenant_id, table.c.id.in_(chunk)))
            tombstones = self.deleted_servers
            conn.execute(tombstones.delete().where(tombstones.c.tenant_id == tenant_id))
        return len(ids)

    def close(self) -> None:
        """Close this process's database connections."""
        self.engine.dispose()

    @staticmethod
    def _as_server(row) -> dict:
        created = row["created"]
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        return {"id": row["id"], "tenant_id": row["tenant_id"], "name": row["name"], "created": created}
