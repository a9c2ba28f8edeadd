"""The ``sql`` store: tokens in a table of the service's database (SQLite, PostgreSQL, MariaDB/MySQL).

Durable and shared by every worker and host that uses the same database.
The table, :data:`TABLE_NAME`, comes with an Alembic migration (component
``idempotency``): create it with
``tenancy-mw-manage db upgrade --url URL --component idempotency``.

One row per token:

=============  ==============================================================
``key``        the hashed store key (primary key)
``owner``      the id of the request that holds the row
``expires_at`` Unix seconds after which the row is dead (lease or record)
``value``      the signed JSON record (:mod:`tenancy_mw.idempotency.records`)
=============  ==============================================================

- **claim**: ``INSERT``; the database's duplicate-key error is the answer
  "taken", after which the row is read.  A row whose ``expires_at`` has
  passed is taken over with ``UPDATE ... WHERE key = ? AND owner = <old
  owner>``, so two requests cannot both take over one expired row.
- **complete** / **release**: ``UPDATE`` / ``DELETE ... WHERE key = ? AND
  owner = ?`` (compare-and-swap on the owner): a slow request whose lease
  expired and was taken over changes nothing.
- **purge**: ``DELETE ... WHERE expires_at <= now``, run by
  ``tenancy-mw-manage idempotency purge`` and, opportunistically, by the
  filter itself once every ``purge_interval`` seconds per process.

Times are the hosts' clocks (Unix seconds): keep them in sync (NTP), as
for any lease.  Every call has a timeout (``timeout``): the connect
timeout, the pool wait, and a statement or read timeout where the driver
has one (PostgreSQL ``statement_timeout``, PyMySQL ``read_timeout`` and
``write_timeout``, SQLite's busy timeout).

Example::

    >>> import sqlalchemy as sa
    >>> store = SqlStore("sqlite://")
    >>> metadata.create_all(store.engine)
    >>> claim = store.claim("k", b"lease", 60)
    >>> claim.claimed, store.claim("k", b"again", 60).value
    (True, b'lease')
    >>> store.close()
"""

from __future__ import annotations

import logging
import math
import random
import time
import uuid
from typing import Any

from tenancy_mw.core import sql  # first: without the sql extra, it names it
from tenancy_mw.core.sql import mysql, sa
from tenancy_mw.idempotency.stores import Claim, StoreError

__all__ = ["TABLE_NAME", "SqlStore", "metadata", "purge_expired", "records"]

LOG = logging.getLogger(__name__)

#: The table of the ``sql`` store.
TABLE_NAME = "tenancy_mw_idempotency"

#: The longest store key (``tmw-idem:`` and 64 hex digits, with room to spare).
KEY_LENGTH = 80

#: The runtime definition of the table; the migration in
#: ``tenancy_mw/migrations/versions/idempotency/`` builds the same (a test checks).
metadata = sa.MetaData()
records = sa.Table(  # type: ignore[call-overload]  # ExactString columns
    TABLE_NAME,
    metadata,
    sa.Column("key", sql.ExactString(KEY_LENGTH), primary_key=True),
    sa.Column("owner", sql.ExactString(32), nullable=False),
    sa.Column("expires_at", sa.BigInteger(), nullable=False, index=True),
    # LONGBLOB on MySQL/MariaDB: their BLOB stops at 64 KiB.
    sa.Column("value", sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb"), nullable=False),
    **sql.table_options(),
)


#: Times a transaction that lost a race (sql.is_retryable: a deadlock victim, say) is run again.
_DEADLOCK_RETRIES = 3


def _connect_args(url: sa.engine.URL, timeout: float) -> dict:
    """Driver options that put a timeout on connecting and on every statement."""
    driver = url.get_driver_name()
    backend = url.get_backend_name()
    whole = max(1, math.ceil(timeout))
    if backend == "sqlite":
        return {"timeout": timeout}
    if driver == "psycopg2":
        # libpq's connect_timeout is whole seconds, 2 at least.
        return {"connect_timeout": max(2, whole), "options": "-c statement_timeout=%d" % int(timeout * 1000)}
    if driver == "pymysql":
        return {"connect_timeout": whole, "read_timeout": whole, "write_timeout": whole}
    return {}


def purge_expired(engine: sa.Engine, now: float | None = None, batch: int | None = None) -> int:
    """Delete the rows that expired by *now* (``expires_at <= now``, as the store reads them); return how many.

    *batch* caps the rows deleted (the filter's opportunistic purge keeps
    each run short); ``None`` deletes them all.
    """
    now = int(now if now is not None else time.time())
    table = records
    expired = table.c.expires_at <= now
    with engine.begin() as conn:
        if batch is None:
            return conn.execute(table.delete().where(expired)).rowcount
        keys = sa.select(table.c.key).where(expired).limit(batch)
        found = [row[0] for row in conn.execute(keys)]
        if not found:
            return 0
        return conn.execute(table.delete().where(table.c.key.in_(found), expired)).rowcount


class SqlStore:
    """The ``sql`` store on the database at *url* (see the module documentation).

    :param url: a SQLAlchemy URL.
    :param timeout: the timeout of every call, seconds.
    :param purge_interval: seconds between opportunistic purges in this
        process; 0 never purges (leave it to ``tenancy-mw-manage``).
    """

    name = "sql"

    #: Rows one opportunistic purge deletes at most.
    PURGE_BATCH = 500

    def __init__(
        self, url: str | sa.engine.URL, timeout: float = 2.0, purge_interval: float = 300.0, clock=time.time
    ) -> None:
        url = sa.engine.make_url(url)
        engine_args: dict[str, Any] = {"connect_args": _connect_args(url, timeout)}
        if url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:"):
            engine_args["pool_timeout"] = timeout  # an in-memory SQLite pool does not wait
        # On SQLite the driver's timeout is its busy timeout: a writer waits at most *timeout*.
        self.engine = sql.create_engine(url, **engine_args)
        self.round_trips = 0
        self.purge_interval = purge_interval
        self._clock = clock
        self._next_purge = time.monotonic() + random.uniform(0, purge_interval)  # noqa: S311 - spreads work

    def _run(self, work):
        for attempt in range(_DEADLOCK_RETRIES + 1):
            self.round_trips += 1
            try:
                with self.engine.begin() as conn:
                    return work(conn)
            except sa.exc.IntegrityError:
                raise
            except sa.exc.SQLAlchemyError as exc:
                # InnoDB picks a victim among inserts of one key that wait on
                # its delete (a release racing retries): the victim's one
                # statement was rolled back whole, so it is run again rather
                # than answered as "store down" (a 503, or under fail_open an
                # unprotected second run).
                if attempt < _DEADLOCK_RETRIES and sql.is_retryable(exc):
                    continue
                message = str(getattr(exc, "orig", None) or exc).strip().splitlines()
                raise StoreError("database: %s" % (message[0] if message else type(exc).__name__)) from None

    def claim(self, key: str, value: bytes, lease_ttl: int) -> Claim:
        self._maybe_purge()
        table = records
        owner = uuid.uuid4().hex
        for _attempt in range(5):
            now = self._clock()
            row = {"key": key, "owner": owner, "expires_at": int(now + lease_ttl), "value": value}
            try:
                self._run(lambda conn, row=row: conn.execute(table.insert().values(**row)))
                return Claim(True, handle=owner)
            except sa.exc.IntegrityError:
                pass  # the key is taken: the database said so
            found = self._run(
                lambda conn: conn.execute(
                    sa.select(table.c.owner, table.c.expires_at, table.c.value).where(table.c.key == key)
                ).first()
            )
            if found is None:
                continue  # released or purged in between: insert again
            if found.expires_at > now:
                return Claim(False, value=bytes(found.value))
            # Expired: take it over, unless another request just did.
            taken = self._run(
                lambda conn, row=row, old=found.owner: (
                    conn.execute(
                        table.update()
                        .where(table.c.key == key, table.c.owner == old)
                        .values(owner=row["owner"], expires_at=row["expires_at"], value=row["value"])
                    ).rowcount
                )
            )
            if taken == 1:
                return Claim(True, handle=owner)
        raise StoreError("database: the token's row kept changing while being claimed")

    def complete(self, key: str, handle: object, value: bytes, expiration: int) -> bool:
        table = records
        expires_at = int(self._clock() + expiration)
        updated = self._run(
            lambda conn: (
                conn.execute(
                    table.update()
                    .where(table.c.key == key, table.c.owner == handle)
                    .values(value=value, expires_at=expires_at)
                ).rowcount
            )
        )
        return updated == 1

    def release(self, key: str, handle: object) -> bool:
        table = records
        deleted = self._run(
            lambda conn: conn.execute(table.delete().where(table.c.key == key, table.c.owner == handle)).rowcount
        )
        return deleted == 1

    def read(self, key: str) -> bytes | None:
        table = records
        found = self._run(
            lambda conn: conn.execute(sa.select(table.c.expires_at, table.c.value).where(table.c.key == key)).first()
        )
        if found is None or found.expires_at <= self._clock():
            return None
        return bytes(found.value)

    def purge(self, batch: int | None = None) -> int:
        """Delete expired rows now; return how many."""
        try:
            return purge_expired(self.engine, self._clock(), batch)
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError("database: %s" % str(getattr(exc, "orig", None) or exc).strip()) from None

    def _maybe_purge(self) -> None:
        if not self.purge_interval or time.monotonic() < self._next_purge:
            return
        # Spread the purges of many workers: each waits 0.5 to 1.5 intervals.
        self._next_purge = time.monotonic() + self.purge_interval * random.uniform(0.5, 1.5)  # noqa: S311
        try:
            deleted = self.purge(self.PURGE_BATCH)
        except StoreError as exc:
            LOG.warning("idempotency: opportunistic purge of expired tokens failed: %s", exc)
            return
        if deleted:
            LOG.info("idempotency: purged %d expired token records", deleted)

    def close(self) -> None:
        """Close this process's connections."""
        self.engine.dispose()
