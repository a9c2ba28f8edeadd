"""The tenant registry: which tenants exist, their representations, their moves.

Pure SQLAlchemy, no WSGI: the ``tenant_admin`` filter runs on it, and so
can a service's own code or a script.

Two tables, the Alembic component ``tenants`` (apply it with
``tenancy-mw-manage db upgrade --url URL --component tenants``):

``tenancy_tenants``
    One row per tenant: its id (up to 255 characters, compared exactly on
    every backend, case and trailing spaces included:
    :class:`tenancy_mw.core.sql.ExactString`), the JSON representation the
    operator PUT (canonical JSON text), its state (``active`` or
    ``deleted``), a revision counter and the times it was created, last
    updated and deleted, and when its purge began (``purge_started``, set
    while a purge removes it).
``tenancy_tenant_moves``
    One row per moved resource: where it was (tenant and resource path),
    where it went, and when.  A request to the old place is redirected
    (``301``) to the new one.  The place columns are indexed through a
    SHA-256 key, since a tenant id plus a path may be longer than an index
    key may be on MySQL.

Lifecycle, as the tenants spec has it: ``put`` creates (or modifies) a
tenant; ``delete`` marks it deleted, still recoverable (``restore``);
:meth:`TenantRegistry.purge` removes the tenants deleted longer ago than a
retention period, and their move records, for good.  A purged id is
unknown again and may be created anew.  Given the service's
:class:`~tenancy_mw.tenants.removal.TenantRemoval`, ``delete`` has it hide
the tenant's resources, ``restore`` bring them back and ``purge`` delete
them, in an order that a purge stopped at any point finishes on its next
run (:meth:`TenantRegistry.purge`; ``doc/tenant-lifecycle.rst``).

Example::

    >>> from tenancy_mw import migrations
    >>> from tenancy_mw.tenants.registry import TenantRegistry
    >>> import tempfile, os
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "tenants.sqlite")
    >>> migrations.upgrade(url, ["tenants"])
    ['tenants']
    >>> registry = TenantRegistry(url)
    >>> registry.put("acme", {"tier": "gold"}).created
    True
    >>> registry.get("acme").representation
    {'tier': 'gold'}
    >>> registry.delete("acme").state
    'deleted'
    >>> registry.restore("acme").state
    'active'
    >>> registry.close()
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from tenancy_mw.core import sql  # first: without the sql extra, it names it
from tenancy_mw.core.deprecation import renamed_names
from tenancy_mw.core.sql import URL, mysql, sa
from tenancy_mw.tenants.ids import MAX_TENANT_ID_LENGTH, validate_tenant_id
from tenancy_mw.tenants.removal import RemovalFailed, TenantRemoval, call_removal

__all__ = [
    "ACTIVE",
    "DELETED",
    "DEFAULT_RETENTION",
    "UNKNOWN",
    "canonical_document_json",
    "MoveRecord",
    "PURGE_STEPS",
    "PurgeReport",
    "Tenant",
    "TenantConflict",
    "TenantGone",
    "TenantNotFound",
    "TenantRegistry",
    "TenantStateCache",
    "metadata",
    "moves_table",
    "purge",
    "tenants_table",
]

#: Tenant states, as stored; :data:`UNKNOWN` is what the cache says of an id with no row.
ACTIVE = "active"
DELETED = "deleted"
UNKNOWN = "unknown"

#: How long a deleted tenant stays recoverable before ``purge`` removes it, by default.
DEFAULT_RETENTION = timedelta(days=30)

#: The steps of one tenant's purge, in order; :meth:`TenantRegistry.purge` tells its ``on_step`` each.
PURGE_STEPS = ("marked", "resources-removed", "removed")

#: The longest resource path of a recorded move, in characters.
MAX_PATH_LENGTH = 4096

# MySQL's TEXT holds 64 KiB; a representation may be up to 1 MiB before
# escaping (see tenant_admin's max_body_bytes), so MEDIUMTEXT (16 MiB) there.
_LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")

metadata = sa.MetaData()

#: The tenants (see the module documentation).
tenants_table = sa.Table(  # type: ignore[call-overload]  # ExactString columns
    "tenancy_tenants",
    metadata,
    sa.Column("id", sql.ExactString(MAX_TENANT_ID_LENGTH), primary_key=True),
    sa.Column("representation", _LONG_TEXT, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("created", sa.DateTime(), nullable=False),
    sa.Column("updated", sa.DateTime(), nullable=False),
    sa.Column("deleted", sa.DateTime(), nullable=True),
    sa.Column("purge_started", sa.DateTime(), nullable=True),
    sa.Index("ix_tenancy_tenants_state_deleted", "state", "deleted"),
    **sql.table_options(),
)

#: The recorded moves (see the module documentation).
moves_table = sa.Table(  # type: ignore[call-overload]  # ExactString columns
    "tenancy_tenant_moves",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source_key", sa.String(64), nullable=False),
    sa.Column("source_tenant", sql.ExactString(MAX_TENANT_ID_LENGTH), nullable=False),
    sa.Column("source_path", sa.Text, nullable=False),
    sa.Column("dest_key", sa.String(64), nullable=False),
    sa.Column("dest_tenant", sql.ExactString(MAX_TENANT_ID_LENGTH), nullable=False),
    sa.Column("dest_path", sa.Text, nullable=False),
    sa.Column("moved", sa.DateTime(), nullable=False),
    sa.Index("ix_tenancy_tenant_moves_source_key", "source_key"),
    sa.Index("ix_tenancy_tenant_moves_dest_key", "dest_key"),
    sa.Index("ix_tenancy_tenant_moves_source_tenant", "source_tenant"),
    sa.Index("ix_tenancy_tenant_moves_dest_tenant", "dest_tenant"),
    **sql.table_options(),
)


class TenantNotFound(LookupError):
    """No such tenant: it never existed, or it was purged."""


class TenantGone(LookupError):
    """The tenant is deleted (still recoverable until it is purged)."""


class TenantConflict(ValueError):
    """The change cannot be made in the tenant's current state (``409``).

    :ivar reason: ``"deleted"`` (the tenant is deleted), ``"not-updatable"``
        (its representation may not change), ``"not-deleted"`` (nothing
        to restore) or ``"purging"`` (a purge is removing it: too late to
        restore).
    """

    def __init__(self, detail: str, reason: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Tenant:
    """One tenant as the registry holds it.

    :ivar representation: the JSON object the operator PUT (a ``dict``).
    :ivar etag: a quoted entity tag that changes whenever the
        representation or the state changes.
    :ivar purge_started: when a purge began removing this deleted tenant
        (it can no longer be restored), else ``None``.
    """

    id: str
    representation: dict
    state: str
    revision: int
    created: datetime
    updated: datetime
    deleted: datetime | None
    purge_started: datetime | None = None

    @property
    def etag(self) -> str:
        digest = hashlib.sha256(
            json.dumps([self.id, self.state, self.representation], sort_keys=True).encode("ascii", "backslashreplace")
        ).hexdigest()
        return '"%s"' % digest

    def summary(self) -> dict:
        """The tenant's registry data as JSON-ready values (times in ISO 8601, UTC)."""
        return {
            "id": self.id,
            "state": self.state,
            "created": _iso(self.created),
            "updated": _iso(self.updated),
            "deleted": _iso(self.deleted) if self.deleted else None,
            "etag": self.etag,
        }


@dataclass(frozen=True)
class PutResult:
    """What :meth:`TenantRegistry.put` did: ``created`` or modified, and the tenant now."""

    tenant: Tenant
    created: bool
    changed: bool


@dataclass(frozen=True)
class MoveRecord:
    """A recorded move: what was at ``source_path`` of ``source_tenant`` is at ``dest_path`` of ``dest_tenant``.

    Paths are tuples of decoded path segments below the tenant segment.
    """

    source_tenant: str
    source_path: tuple[str, ...]
    dest_tenant: str
    dest_path: tuple[str, ...]
    moved: datetime


@dataclass
class PurgeReport:
    """What :meth:`TenantRegistry.purge` removed (or, with ``dry_run``, would remove).

    :ivar tenants: the tenants purged (their resources and registry rows gone).
    :ivar moves: how many move records naming them went with them.
    :ivar resumed: those of *tenants* whose purge an earlier run began and did not finish.
    :ivar failed: tenant id -> why the service's removal failed; each stays
        marked purging, and the next run tries again.
    :ivar removal: the class of the service's removal that deleted the
        resources, ``None`` when only the registry was purged.
    """

    tenants: list[str] = field(default_factory=list)
    moves: int = 0
    cutoff: datetime | None = None
    resumed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removal: str | None = None

    def __str__(self) -> str:
        text = "purged %d tenant%s deleted before %s%s; %d move record%s" % (
            len(self.tenants),
            "" if len(self.tenants) == 1 else "s",
            _iso(self.cutoff) if self.cutoff else "-",
            (": " + ", ".join(repr(t) for t in self.tenants)) if self.tenants else "",
            self.moves,
            "" if self.moves == 1 else "s",
        )
        if self.resumed:
            text += "; resumed the stopped purge of %s" % ", ".join(repr(t) for t in self.resumed)
        if self.removal:
            text += "; their resources removed by %s" % self.removal
        else:
            text += "; registry only (the service's resources were not touched)"
        for tenant_id, why in sorted(self.failed.items()):
            text += "; FAILED %r (still marked purging): %s" % (tenant_id, why)
        return text


_EPOCH = datetime(1970, 1, 1)


def _utcnow() -> datetime:
    # Whole seconds, naive UTC: MySQL's DATETIME keeps no fraction, and a
    # tenant must read back the times it was written with.
    return datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_document_json(document: object) -> str:
    """*document* (a decoded JSON value) as the text the registry stores and hashes: compact, sorted keys, ASCII.

    ASCII only, so lone surrogates survive any database; ``NaN`` and the
    infinities are refused (:class:`ValueError`).  Was ``canonical_json``,
    which still works for one release with a :class:`DeprecationWarning`.

    Example::

        >>> print(canonical_document_json({"b": 1, "a": "\u00e9"}))
        {"a":"\\u00e9","b":1}
    """
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


# The old name of canonical_document_json, for one release.
__getattr__ = renamed_names(__name__, {"canonical_json": "canonical_document_json"}, globals())


def place_key(tenant_id: str, path: Iterable[str]) -> str:
    """The index key of a place (a tenant and a resource path): SHA-256 hex of both."""
    text = tenant_id + "\x00" + "/".join(path)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _join(path: Iterable[str]) -> str:
    # Canonical segments never hold '/', so the join can be split back.
    return "/".join(path)


def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split("/")) if text else ()


class TenantRegistry:
    """The tenants and moves tables at a SQLAlchemy URL (see the module documentation).

    One instance per process; safe to share between threads.  The tables
    must exist (``tenancy-mw-manage db upgrade --url URL``).

    :param url: a SQLAlchemy URL, or an :class:`~sqlalchemy.engine.Engine`
        to use as it is.
    :param on_change: called when a write transaction that may have
        changed tenants' states ends (committed, or rolled back on a known
        tenant), with their ids (a list): every tenant whose row a write
        locked (create, delete, restore, a move's two, a ``PUT``, each
        purge step).  ``tenant_admin`` passes
        :meth:`.SharedTenantStates.announce`, so other workers and hosts
        see the change on their next request.  It runs after the change is
        made: it should not raise (what it raises reaches the caller).
    """

    def __init__(self, url: str | URL | sa.Engine, *, on_change: Callable[[list[str]], object] | None = None) -> None:
        if isinstance(url, sa.Engine):
            self.engine = url
        else:
            self.engine = _registry_engine(url)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.on_change = on_change
        _OPEN_REGISTRIES.add(self)

    def close(self) -> None:
        """Close this process's connections."""
        self.engine.dispose()

    # Reading --------------------------------------------------------------

    def get(self, tenant_id: str, conn: sa.Connection | None = None) -> Tenant | None:
        """The tenant *tenant_id* (active or deleted), or ``None`` if unknown."""
        query = sa.select(tenants_table).where(tenants_table.c.id == tenant_id)
        if conn is not None:
            row = conn.execute(query).mappings().first()
        else:
            with self.engine.connect() as own:
                row = own.execute(query).mappings().first()
        # The database compares exactly; checking again here costs nothing.
        if row is None or row["id"] != tenant_id:
            return None
        return _tenant(row)

    def state(self, tenant_id: str) -> str:
        """:data:`ACTIVE`, :data:`DELETED` or :data:`UNKNOWN`: one indexed read of one column."""
        query = sa.select(tenants_table.c.id, tenants_table.c.state).where(tenants_table.c.id == tenant_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None or row[0] != tenant_id:
            return UNKNOWN
        return row[1]

    # Writing --------------------------------------------------------------

    def put(self, tenant_id: str, representation: dict, *, updatable: bool = True) -> PutResult:
        """Create *tenant_id* with *representation*, or modify it.

        Idempotent: the same PUT twice leaves the same state, and a PUT of
        the representation the tenant already has changes nothing (not even
        its ``updated`` time or ETag).  Raises :class:`TenantConflict` when
        the tenant is deleted, or when it exists with another
        representation and *updatable* is false.
        """
        validate_tenant_id(tenant_id)
        text = canonical_document_json(representation)
        for attempt in range(1, _PUT_ATTEMPTS + 1):
            try:
                return self._put(tenant_id, text, updatable)
            except sa.exc.DBAPIError as exc:
                # Two first PUTs of one id at once: a row lock cannot hold a
                # row that does not exist yet, so one INSERT loses (a
                # duplicate key; a deadlock on MariaDB's gap locks).  Again,
                # it finds the row and answers as a second PUT does.
                if attempt == _PUT_ATTEMPTS or not sql.is_retryable(exc, duplicate_key=True):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _put(self, tenant_id: str, text: str, updatable: bool) -> PutResult:
        with self._write() as conn:
            row = self._locked_row(conn, tenant_id)
            now = _utcnow()
            if row is None:
                values = {
                    "id": tenant_id,
                    "representation": text,
                    "state": ACTIVE,
                    "revision": 1,
                    "created": now,
                    "updated": now,
                    "deleted": None,
                    "purge_started": None,
                }
                conn.execute(tenants_table.insert().values(**values))
                return PutResult(_tenant(values), created=True, changed=True)
            if row["state"] == DELETED:
                raise TenantConflict(
                    "Tenant %r is deleted; restore it (POST .../action/restore) before changing it." % tenant_id,
                    "deleted",
                )
            if row["representation"] == text:
                return PutResult(_tenant(row), created=False, changed=False)
            if not updatable:
                raise TenantConflict(
                    "Tenant %r already exists and its representation cannot be updated on this service." % tenant_id,
                    "not-updatable",
                )
            values = dict(row, representation=text, revision=row["revision"] + 1, updated=now)
            conn.execute(
                tenants_table.update()
                .where(tenants_table.c.id == tenant_id)
                .values(representation=text, revision=values["revision"], updated=now)
            )
            return PutResult(_tenant(values), created=False, changed=True)

    def delete(self, tenant_id: str, removal: TenantRemoval | None = None) -> Tenant:
        """Mark *tenant_id* deleted; raises :class:`TenantNotFound` or :class:`TenantGone` (already deleted).

        With *removal*, its :meth:`~tenancy_mw.tenants.removal.TenantRemoval.hide_resources`
        runs while the tenant's row is locked, before the change commits: if
        it raises (:class:`~tenancy_mw.tenants.removal.RemovalFailed`), the
        tenant stays active.
        """
        return self._set_state(tenant_id, from_state=ACTIVE, to_state=DELETED, removal=removal)

    def restore(self, tenant_id: str, removal: TenantRemoval | None = None) -> Tenant:
        """Bring a deleted tenant back; raises :class:`TenantNotFound`, or :class:`TenantConflict`.

        The conflict's reason is ``"not-deleted"`` (it is active) or
        ``"purging"`` (a purge is removing it).  With *removal*, its
        :meth:`~tenancy_mw.tenants.removal.TenantRemoval.restore_resources`
        runs under the row lock, before the change commits.
        """
        return self._set_state(tenant_id, from_state=DELETED, to_state=ACTIVE, removal=removal)

    def _set_state(self, tenant_id: str, from_state: str, to_state: str, removal: TenantRemoval | None) -> Tenant:
        with self._write() as conn:
            row = self._locked_row(conn, tenant_id)
            if row is None:
                raise TenantNotFound("No tenant %r." % tenant_id)
            if row["state"] != from_state:
                if row["state"] == DELETED:
                    raise TenantGone("Tenant %r is already deleted." % tenant_id)
                raise TenantConflict(
                    "Tenant %r is not deleted; there is nothing to restore." % tenant_id, "not-deleted"
                )
            if row["purge_started"] is not None:
                raise TenantConflict(
                    "Tenant %r is being purged (since %s); it can no longer be restored."
                    % (tenant_id, _iso(row["purge_started"])),
                    "purging",
                )
            now = _utcnow()
            deleted = now if to_state == DELETED else None
            values = dict(row, state=to_state, revision=row["revision"] + 1, updated=now, deleted=deleted)
            conn.execute(
                tenants_table.update()
                .where(tenants_table.c.id == tenant_id)
                .values(state=to_state, revision=values["revision"], updated=now, deleted=deleted)
            )
            # Under the row lock, before the commit: a purge or another
            # restore of this tenant waits, and a failure rolls the state back.
            call_removal(removal, "hide" if to_state == DELETED else "restore", tenant_id)
            return _tenant(values)

    def purge(
        self,
        retention: timedelta = DEFAULT_RETENTION,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        removal: TenantRemoval | None = None,
        on_step: Callable[[str, str], None] | None = None,
    ) -> PurgeReport:
        """Remove for good the tenants deleted more than *retention* ago, their resources and move records.

        Each tenant goes in three steps (:data:`PURGE_STEPS`), so a purge
        stopped at any point finishes on the next run, and the registry
        never forgets a tenant whose resources remain:

        1. ``marked``: under the tenant's row lock, checked to be still
           deleted, it is marked purging (``purge_started``): from then on a
           restore is refused (``409``);
        2. ``resources-removed``: *removal*'s
           :meth:`~tenancy_mw.tenants.removal.TenantRemoval.purge_resources`
           deletes the service's resources (none without *removal*: a
           service that removes them itself), under the tenant's row lock
           and only while the tenant is still marked, so two runs at once
           never purge a tenant that one of them finished and the id holds
           anew;
        3. ``removed``: the tenant's row and every move record naming it go,
           in one transaction.

        Tenants a stopped run left marked are purged again first, whatever
        the retention.  A tenant whose removal fails stays marked (it is in
        the report's ``failed``); the others go on.  *on_step* is called
        with ``(step, tenant_id)`` after each step (the purge command's
        test hook).  Returns a :class:`PurgeReport`; with *dry_run*, of
        what would be purged, and nothing is changed.
        """
        now = now or _utcnow()
        # No tenant was deleted before 1970: a longer retention purges nothing
        # (and a date before year 1 cannot even be computed).
        cutoff = max(now - min(retention, now - _EPOCH), _EPOCH)
        report = PurgeReport(cutoff=cutoff, removal=_class_name(removal) if removal is not None else None)
        due = self._purge_due(cutoff)
        report.resumed = [tenant_id for tenant_id, marked in due if marked]
        if dry_run:
            report.tenants = [tenant_id for tenant_id, _ in due]
            report.moves = self._count_moves(report.tenants)
            return report
        for tenant_id, _ in due:
            try:
                moves = self._purge_tenant(tenant_id, cutoff, now, removal, on_step or _no_step)
            except RemovalFailed as exc:
                report.failed[tenant_id] = str(exc)
                continue
            if moves is not None:
                report.tenants.append(tenant_id)
                report.moves += moves
        report.resumed = [tenant_id for tenant_id in report.resumed if tenant_id in report.tenants]
        return report

    def _purge_due(self, cutoff: datetime) -> list[tuple[str, bool]]:
        """The tenants to purge, sorted, as ``(id, marked)``: marked by a run that stopped, or deleted by *cutoff*."""
        table = tenants_table
        condition = sa.and_(
            table.c.state == DELETED, sa.or_(table.c.purge_started.is_not(None), table.c.deleted <= cutoff)
        )
        query = sa.select(table.c.id, table.c.purge_started).where(condition).order_by(table.c.id)
        with self.engine.connect() as conn:
            return [(row[0], row[1] is not None) for row in conn.execute(query)]

    def _purge_tenant(self, tenant_id: str, cutoff: datetime, now: datetime, removal, on_step) -> int | None:
        """Purge one tenant (:meth:`purge`'s three steps); its move records removed, ``None`` if restored meanwhile."""
        if not self._mark_purging(tenant_id, cutoff, now):
            return None
        on_step("marked", tenant_id)
        if not self._remove_resources(tenant_id, removal):
            return None
        on_step("resources-removed", tenant_id)
        moves = self._forget_purged(tenant_id)
        if moves is None:
            return None
        on_step("removed", tenant_id)
        return moves

    def _mark_purging(self, tenant_id: str, cutoff: datetime, now: datetime) -> bool:
        """Step 1: mark *tenant_id* purging under its row lock, if it is still due; whether it is (now) marked."""
        with self._write() as conn:
            row = self._locked_row(conn, tenant_id)
            # Read again under the lock: a restore that held it has committed by now.
            if row is None or row["state"] != DELETED:
                return False
            if row["purge_started"] is None:
                if row["deleted"] is None or row["deleted"] > cutoff:
                    return False
                conn.execute(tenants_table.update().where(tenants_table.c.id == tenant_id).values(purge_started=now))
            return True

    def _remove_resources(self, tenant_id: str, removal: TenantRemoval | None) -> bool:
        """Step 2: the service's resources go, under the tenant's row lock; whether the tenant was still marked.

        The lock is held through the service's call, so two runs never
        remove one tenant's resources at once, and a run that stalled after
        marking cannot remove them once another run has finished the
        tenant and the id names a new tenant (its row is not marked).
        """
        with self._write() as conn:
            row = self._locked_row(conn, tenant_id)
            if row is None or row["purge_started"] is None:
                return False  # another run finished it
            call_removal(removal, "purge", tenant_id)
            return True

    def _forget_purged(self, tenant_id: str) -> int | None:
        """Step 3: remove the marked tenant's row and the move records naming it; how many move records went.

        ``None`` when another run finished it meanwhile.
        """
        with self._write() as conn:
            row = self._locked_row(conn, tenant_id)
            if row is None or row["purge_started"] is None:
                return None  # another run finished it
            moves = sa.or_(moves_table.c.source_tenant == tenant_id, moves_table.c.dest_tenant == tenant_id)
            count = conn.execute(moves_table.delete().where(moves)).rowcount
            conn.execute(
                tenants_table.delete().where(
                    tenants_table.c.id == tenant_id, tenants_table.c.purge_started.is_not(None)
                )
            )
            return count

    def _count_moves(self, tenant_ids: list[str]) -> int:
        """How many move records name any of *tenant_ids* (a dry run's count)."""
        total = 0
        with self.engine.connect() as conn:
            for start in range(0, len(tenant_ids), 500):
                chunk = tenant_ids[start : start + 500]
                moves = sa.or_(moves_table.c.source_tenant.in_(chunk), moves_table.c.dest_tenant.in_(chunk))
                total += conn.execute(sa.select(sa.func.count()).select_from(moves_table).where(moves)).scalar_one()
        return total

    # Moves ----------------------------------------------------------------

    @contextmanager
    def move_lock(self, *tenant_ids: str) -> Iterator[tuple[sa.Connection, dict[str, Tenant | None]]]:
        """A write transaction holding the registry rows of *tenant_ids*, locked, for a move.

        Yields ``(connection, {tenant_id: Tenant or None})``.  On PostgreSQL
        and MariaDB/MySQL the rows are read with ``SELECT ... FOR UPDATE``
        in sorted order (so two moves never deadlock), and another move,
        ``DELETE`` or ``PUT`` of the same tenants in any process waits until
        this transaction ends; on SQLite the transaction is ``BEGIN
        IMMEDIATE``, which holds the database's one write lock.  Commits
        when the block ends, rolls back if it raises.
        """
        with self._write() as conn:
            found = {}
            for tenant_id in sorted(set(tenant_ids)):
                row = self._locked_row(conn, tenant_id)
                found[tenant_id] = _tenant(row) if row is not None else None
            yield conn, found

    def record_moves(
        self,
        conn: sa.Connection,
        source_tenant: str,
        dest_tenant: str,
        moved: Iterable[tuple[tuple[str, ...], tuple[str, ...]]],
    ) -> int:
        """Record that each ``(old_path, new_path)`` of *moved* went from *source_tenant* to *dest_tenant*.

        Run inside :meth:`move_lock`'s transaction.  A record of a move *out
        of* a new place is dropped (the resource lives there again), and
        records that led to an old place are pointed at the new one, so a
        redirect is never a chain or a loop.  Returns how many were recorded.
        """
        now = _utcnow()
        count = 0
        for old_path, new_path in moved:
            old_path, new_path = tuple(old_path), tuple(new_path)
            old_key = place_key(source_tenant, old_path)
            new_key = place_key(dest_tenant, new_path)
            conn.execute(moves_table.delete().where(moves_table.c.source_key == new_key))
            conn.execute(
                moves_table.update()
                .where(moves_table.c.dest_key == old_key)
                .values(dest_key=new_key, dest_tenant=dest_tenant, dest_path=_join(new_path))
            )
            conn.execute(moves_table.delete().where(moves_table.c.source_key == old_key))
            conn.execute(
                moves_table.insert().values(
                    source_key=old_key,
                    source_tenant=source_tenant,
                    source_path=_join(old_path),
                    dest_key=new_key,
                    dest_tenant=dest_tenant,
                    dest_path=_join(new_path),
                    moved=now,
                )
            )
            count += 1
        return count

    def find_move(self, tenant_id: str, path: tuple[str, ...]) -> tuple[MoveRecord, tuple[str, ...]] | None:
        """The move record of *path* or of its longest moved prefix, with the rest of the path.

        ``find_move("acme", ("servers", "x", "ips"))`` finds a move of
        ``servers/x`` and returns it with ``("ips",)``.  ``None`` when
        nothing at or above *path* was moved.
        """
        prefixes = {place_key(tenant_id, path[:n]): n for n in range(1, min(len(path), 16) + 1)}
        if not prefixes:
            return None
        query = sa.select(moves_table).where(moves_table.c.source_key.in_(list(prefixes)))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        best = None
        for row in rows:
            length = prefixes.get(row["source_key"])
            if row["source_tenant"] != tenant_id or _split(row["source_path"]) != path[:length]:
                continue  # a hash collision; never trust the key alone
            if best is None or length > best[1]:  # type: ignore[operator]  # a key found has its length
                best = (row, length)
        if best is None:
            return None
        row, length = best
        record = MoveRecord(
            row["source_tenant"], _split(row["source_path"]), row["dest_tenant"], _split(row["dest_path"]), row["moved"]
        )
        return record, path[length:]

    # Transactions ---------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """A write transaction; on SQLite it takes the write lock at once (``BEGIN IMMEDIATE``).

        When it ends, the tenants it may have changed (:func:`_changing`) go
        to ``on_change``: after a commit, and after a rollback too unless
        the tenant was unknown (a ``DELETE`` of a tenant already deleted, a
        commit whose outcome is unknown).  Telling workers to read a state
        again is always safe, and so repeating a call re-announces what a
        failed announcement left unsaid.
        """
        changing: set[str] = set()
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(tenancy_changing=changing)
                if self.is_sqlite:
                    conn = conn.execution_options(tenancy_sqlite_begin="BEGIN IMMEDIATE")
                with conn.begin():
                    yield conn
        except TenantNotFound:
            raise  # nothing there, nothing to say
        except BaseException:
            self._announce(changing)
            raise
        self._announce(changing)

    def _announce(self, changing: set[str]) -> None:
        if changing and self.on_change is not None:
            self.on_change(sorted(changing))

    def _locked_row(self, conn: sa.Connection, tenant_id: str) -> dict | None:
        # A row locked to be written: its tenant may change (see _write).
        _changing(conn).add(tenant_id)
        query = sa.select(tenants_table).where(tenants_table.c.id == tenant_id)
        if not self.is_sqlite:
            query = query.with_for_update()
        row = conn.execute(query).mappings().first()
        if row is None or row["id"] != tenant_id:
            return None
        return dict(row)


_PUT_ATTEMPTS = 3


def _changing(conn: sa.Connection) -> set[str]:
    """The ids of the tenants *conn*'s write transaction (:meth:`TenantRegistry._write`) may change."""
    return conn.get_execution_options().get("tenancy_changing", set())


# A worker forked from a process whose registries hold pooled connections
# must not share those connections with its parent.
_OPEN_REGISTRIES: weakref.WeakSet[TenantRegistry] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for registry in list(_OPEN_REGISTRIES):
        registry.engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _tenant(row) -> Tenant:
    return Tenant(
        id=row["id"],
        representation=json.loads(row["representation"]),
        state=row["state"],
        revision=row["revision"],
        created=row["created"],
        updated=row["updated"],
        deleted=row["deleted"],
        purge_started=row.get("purge_started"),
    )


def _no_step(step: str, tenant_id: str) -> None:
    """The default ``on_step`` of a purge: nothing."""


def _class_name(instance: object) -> str:
    return "%s.%s" % (type(instance).__module__, type(instance).__qualname__)


def _registry_engine(url: str | URL) -> sa.Engine:
    """:func:`tenancy_mw.core.sql.create_engine`: READ COMMITTED on MySQL/MariaDB; on SQLite, transactions begun here.

    pysqlite begins transactions lazily, at the first write, and always as
    ``BEGIN DEFERRED``; a move must hold the write lock from its first read.
    So the driver's own transaction handling is turned off and each
    transaction is begun here, as ``BEGIN`` or, when asked with the
    ``tenancy_sqlite_begin`` execution option, ``BEGIN IMMEDIATE``
    (SQLAlchemy's documented recipe for pysqlite).
    """
    url = sa.engine.make_url(url)
    if url.get_backend_name() in ("mysql", "mariadb"):
        # READ COMMITTED, as on PostgreSQL: row locks on the rows read, and
        # none of REPEATABLE READ's gap locks, whose overlaps between the
        # moves table's lookups and inserts make InnoDB deadlocks.
        return sql.create_engine(url, isolation_level="READ COMMITTED")
    if url.get_backend_name() != "sqlite":
        return sql.create_engine(url)
    engine = sql.create_engine(url, connect_args={"isolation_level": None})

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("tenancy_sqlite_begin", "BEGIN"))

    return engine


class TenantStateCache:
    """Tenant states kept in process for *ttl* seconds: the request path's cheap check.

    Each worker process has its own: a tenant deleted through one worker
    (or another host) is seen as deleted by the others within *ttl*
    seconds, and a new tenant is seen as existing within *ttl* seconds by a
    worker that looked it up just before it was made.  Unknown ids are
    cached too (a flood of made-up ids costs one query per id per *ttl*),
    and at most *max_entries* ids are kept: the oldest entry goes first.
    ``ttl = 0`` turns the cache off.

    With *generation*, a callable giving a tenant's current generation
    (:meth:`.SharedTenantStates.generation`: a token that changes whenever
    the tenant's state does), every :meth:`state` asks it first and keeps
    the answer beside the state; a kept state is used only while its
    generation is still the current one (and within *ttl*).  So a change
    announced by any process is seen on the next call.

    Example::

        >>> cache = TenantStateCache(lambda tenant_id: "active", ttl=5)
        >>> cache.state("acme")
        'active'
    """

    def __init__(self, load, ttl: float = 5.0, max_entries: int = 10_000, generation=None) -> None:
        self._load = load
        self.ttl = ttl
        self.max_entries = max_entries
        self.generation = generation
        # In the order the entries were read, which (one TTL for all) is the
        # order they expire in: the expired ones, and when full the oldest,
        # are taken off the front, a constant amount of work per entry.
        self._entries: OrderedDict[str, tuple[str, float, object]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def entries(self) -> Mapping[str, tuple[str, float, object]]:
        """What is cached: tenant id -> (state, ``time.monotonic()`` until which it is fresh, its generation).

        For a look-up on a hot path with no call: read it, never write it
        (:meth:`remember` and :meth:`state` do).  It is the cache's own
        mapping, so it stays current.
        """
        return self._entries

    def state(self, tenant_id: str) -> str:
        """The state of *tenant_id*, from the cache while fresh (and of the current generation), else loaded."""
        if self.ttl <= 0:
            return self._load(tenant_id)
        now = time.monotonic()
        # The generation first, then the registry: a change committed after
        # the read below comes with a generation newer than this one.
        current = self.generation(tenant_id) if self.generation is not None else None
        entry = self._entries.get(tenant_id)
        if entry is not None and entry[1] > now and entry[2] == current:
            return entry[0]
        state = self._load(tenant_id)
        # Kept ttl seconds from when the read began: a slow read (a busy
        # registry) does not make what it read last longer.
        self.remember(tenant_id, state, read_at=now, generation=current)
        return state

    def remember(self, tenant_id: str, state: str, read_at: float | None = None, generation: object = None) -> None:
        """Keep *state* (of *generation*) for *tenant_id* for ``ttl`` seconds from *read_at* (default: now)."""
        if self.ttl <= 0:
            return
        with self._lock:
            entries = self._entries
            entries.pop(tenant_id, None)
            now = time.monotonic()
            while entries:
                oldest, (_, oldest_expires, _) = next(iter(entries.items()))
                if len(entries) < self.max_entries and oldest_expires > now:
                    break
                entries.pop(oldest, None)
            expires = (now if read_at is None else read_at) + self.ttl
            if expires > now:
                entries[tenant_id] = (state, expires, generation)

    def forget(self, tenant_id: str) -> None:
        """Drop what is kept of *tenant_id* (after a change made by this process)."""
        with self._lock:
            self._entries.pop(tenant_id, None)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()


def purge(
    url: str | URL,
    retention: timedelta = DEFAULT_RETENTION,
    *,
    dry_run: bool = False,
    removal: TenantRemoval | None = None,
) -> PurgeReport:
    """Purge the registry at *url*: :meth:`TenantRegistry.purge` in one call.

    Give the service's *removal* (:class:`~tenancy_mw.tenants.removal.TenantRemoval`)
    so the purged tenants' resources go too; without it only the registry
    forgets them.

    Example::

        report = purge("postgresql+psycopg2://svc@db/svc", timedelta(days=7), removal=ServiceRemoval())
        print(report)   # purged 2 tenants deleted before 2026-...: 'a', 'b'; 3 move records; ...
    """
    registry = TenantRegistry(url)
    try:
        return registry.purge(retention, dry_run=dry_run, removal=removal)
    finally:
        registry.close()
