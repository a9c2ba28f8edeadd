"""Find a record by integer id or uuid in every cell database at once.

:class:`CellLookup` holds one SQLAlchemy engine per cell, created once, and
a thread pool; :meth:`CellLookup.find` asks every cell concurrently, each
within ``cell_timeout`` seconds, and says where the record was found and
which cells did not answer.  :meth:`CellLookup.resolve` turns that into one
``(cell, row)`` or an exception, by the rules of the ``id_resolver`` filter
(:mod:`tenancy_mw.cells.filter`), for service code outside WSGI.

The service's own work in its cells (lists over every cell, reads and
writes in the cell an id was found in, start-up chores) goes through the
same engines, threads and deadline: :meth:`CellLookup.scatter_gather` runs
a function in every cell at once and returns what the cells that answered
in time said; :meth:`CellLookup.run_in_cell` runs one in one cell, or
raises :class:`CellsUnavailable`.  A hung or refused cell then costs a
caller at most ``cell_timeout``, whatever it was asked.

Rules of :meth:`~CellLookup.resolve`
    - by uuid: found in a cell -> that cell (a uuid is unique: the first
      cell that has it answers, without waiting for the others); found
      nowhere -> :class:`RecordNotFound`; found nowhere while some cell did
      not answer -> :class:`CellsUnavailable`, never a false "not found".
    - by integer id: found in exactly one cell and every cell answered ->
      that cell; in several -> :class:`AmbiguousId`; nowhere ->
      :class:`RecordNotFound`; any cell did not answer ->
      :class:`CellsUnavailable` (the id could be there too).

Timeouts
    The calling thread waits at most ``cell_timeout``.  The drivers are told
    the same limit, so a cell's threads do not hang either; and since
    psycopg2 has no read timeout of its own (its ``statement_timeout`` is the
    server's, which a silent server never applies), the socket of a
    connection still busy ``cell_timeout`` after its asker's deadline is shut
    down, so the driver raises and the thread is free: a cell that was
    silent for a while rejoins as soon as it answers again.  PostgreSQL
    (psycopg2) gets ``connect_timeout`` (libpq counts whole seconds, at
    least 2), a ``statement_timeout`` and ``tcp_user_timeout``;
    MySQL/MariaDB (PyMySQL, mysqlclient) ``connect_timeout``, socket
    read/write timeouts and a server-side statement limit
    (``max_statement_time``, MySQL's ``max_execution_time``); SQLite a busy
    timeout.  Each cell has threads and
    connections of its own (``pool_size`` of each, no overflow), so a slow
    cell never delays the others' lookups; a lookup that waited in its
    cell's queue past its asker's deadline is dropped without touching the
    database, and while more than ``4 * pool_size`` lookups wait for a cell
    that has not answered any for ``cell_timeout`` seconds (it stopped
    answering), further ones count it as not answering at once.  A cell
    that answers is never refused for being busy: its queue drains, and a
    lookup that waits past its deadline is a real timeout.

Queries
    Only bound parameters: ``SELECT id, uuid FROM table WHERE id = :ident``
    (or ``uuid = :ident``), identifiers quoted by SQLAlchemy.  The uuid
    column should be indexed in every cell.  Connections go back to their
    pool before a lookup returns, including after an error; a connection
    the server dropped is discarded and the lookup tried once more.

Example::

    >>> lookup = CellLookup({"cell1": "sqlite://", "cell2": "sqlite://"})
    >>> with lookup.engines["cell1"].begin() as conn:
    ...     _ = conn.exec_driver_sql("CREATE TABLE services (id INTEGER PRIMARY KEY, uuid VARCHAR(36))")
    ...     _ = conn.exec_driver_sql("INSERT INTO services VALUES (7, 'f4c2e7a0-1d2b-4c3e-9f00-0a1b2c3d4e5f')")
    >>> with lookup.engines["cell2"].begin() as conn:
    ...     _ = conn.exec_driver_sql("CREATE TABLE services (id INTEGER PRIMARY KEY, uuid VARCHAR(36))")
    >>> found = lookup.resolve("services", "F4C2E7A0-1D2B-4C3E-9F00-0A1B2C3D4E5F", by_uuid=True)
    >>> found.cell, found.row["id"]
    ('cell1', 7)
    >>> lookup.close()
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from tenancy_mw.cells.ids import (
    MAX_CELL_TIMEOUT,
    MAX_INTEGER_ID,
    InvalidId,
    parse_cells,
    parse_integer_id,
    parse_uuid,
)
from tenancy_mw.cells.outcomes import (
    AmbiguousId,
    CellsUnavailable,
    Found,
    RecordNotFound,
    Resolved,
    ResolveError,
    outcome,
)
from tenancy_mw.core import sql  # first: without the sql extra, it names it
from tenancy_mw.core.sql import sa

__all__ = [
    "AmbiguousId",
    "CellLookup",
    "CellWork",
    "CellsUnavailable",
    "Found",
    "Gathered",
    "InvalidId",
    "MAX_CELL_TIMEOUT",
    "ResolveError",
    "RecordNotFound",
    "Resolved",
    "driver_timeouts",
    "outcome",
]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.cell_lookup")


def driver_timeouts(url: str | sa.URL, timeout: float) -> dict[str, Any]:
    """``connect_args`` that make the driver of *url* give up after about *timeout* seconds.

    Example::

        >>> driver_timeouts("mysql+pymysql://root@db/nova", 0.5)
        {'connect_timeout': 0.5, 'read_timeout': 0.5, 'write_timeout': 0.5}
    """
    url = sa.engine.make_url(url)
    backend, driver = url.get_backend_name(), url.get_driver_name()
    milliseconds = max(1, int(timeout * 1000))
    if backend == "postgresql" and driver in ("psycopg2", "psycopg"):
        # Keep any server options the URL sets (?options=...) next to the statement timeout.
        given = url.query.get("options")
        given = " ".join(given) if isinstance(given, tuple) else given
        return {
            # libpq counts whole seconds and takes 1 as 2.
            "connect_timeout": max(2, math.ceil(timeout)),
            "options": " ".join(filter(None, [given, "-c statement_timeout=%d" % milliseconds])),
            "tcp_user_timeout": milliseconds,
            "keepalives": 1,
            "keepalives_idle": max(1, math.ceil(timeout)),
            "keepalives_interval": 1,
            "keepalives_count": 2,
        }
    if backend in ("mysql", "mariadb") and driver == "pymysql":
        return {"connect_timeout": timeout, "read_timeout": timeout, "write_timeout": timeout}
    if backend in ("mysql", "mariadb") and driver in ("mysqldb", "mysqlclient"):
        seconds = max(1, math.ceil(timeout))
        return {"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}
    if backend == "sqlite":
        return {"timeout": timeout}
    return {}


#: How many lookups may wait for a cell per connection of its pool, beyond
#: which a cell that has not answered any lookup for ``cell_timeout`` seconds
#: counts as not answering at once instead of queueing more.
WAITING_PER_CONNECTION = 4

_TOO_LATE = object()

#: What :meth:`CellLookup.scatter_gather` runs in a cell: ``work(cell_name, engine)``, its answer.
CellWork = Callable[[str, sa.Engine], Any]


def _first_row(statement, params: dict, _cell: str, engine: sa.Engine) -> dict | None:
    """The first row of *statement* with *params* in the cell of *engine*, as a dict, or ``None``."""
    with engine.connect() as conn:
        row = conn.execute(statement, params).mappings().first()
    return dict(row) if row is not None else None


@dataclass
class Gathered:
    """What every cell answered to one :meth:`CellLookup.scatter_gather`.

    :ivar answers: ``{cell: answer}`` of the cells that answered in time, in configuration order.
    :ivar unanswered: the cells that did not answer in time or failed, in configuration order.
    """

    answers: dict[str, Any] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)


def _cell_engine(url: str, timeout: float, pool_size: int, pool_recycle: int) -> sa.Engine:
    """A cell's engine: *pool_size* connections, no overflow, every wait and query within *timeout*."""
    args: dict[str, Any] = {"connect_args": driver_timeouts(url, timeout)}
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    in_memory = backend == "sqlite" and parsed.database in (None, "", ":memory:")
    if in_memory:
        # One in-memory database shared by the pool threads (tests, examples).
        args.update(poolclass=sa.pool.StaticPool)
        args["connect_args"]["check_same_thread"] = False
    else:
        args.update(pool_size=pool_size, max_overflow=0, pool_timeout=timeout, pool_recycle=pool_recycle)
    if backend != "sqlite":
        # A ping per checkout would double every lookup's round trips;
        # a dropped connection is retried once instead (_ask).
        args["pool_pre_ping"] = False
    engine = sql.create_engine(url, **args)
    if backend in ("mysql", "mariadb"):
        sa.event.listen(engine, "connect", _statement_time_limit(timeout))
    return engine


def _statement_time_limit(seconds: float) -> Callable[[Any, Any], None]:
    """A ``connect`` listener that makes MySQL/MariaDB stop a statement after *seconds*."""

    def set_statement_time(dbapi_connection, _record):
        # The server stops a slow lookup too, not only our socket: a struggling
        # cell is not left running queries nobody waits for.
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT VERSION()")
            if "mariadb" in str(cursor.fetchone()[0]).lower():
                cursor.execute("SET SESSION max_statement_time = %.3f" % seconds)
            else:
                cursor.execute("SET SESSION max_execution_time = %d" % max(1, int(seconds * 1000)))
        finally:
            cursor.close()

    return set_statement_time


class _SocketCutter:
    """Shuts down the socket of a cell connection whose work outlived its deadline.

    psycopg2 has no read timeout: a thread reading from a server that
    accepted the query and never answers stays blocked for good (its
    ``statement_timeout`` is the server's, ``tcp_user_timeout`` never fires
    while the peer's kernel acknowledges).  Each cell thread arms this
    before its work and disarms it after; one thread per cell, started on
    first use and asleep while nothing is armed, shuts down the socket of
    the connection an armed thread holds once its time is up, so the
    driver raises, the connection is dropped from the pool and the thread
    is free again: a cell that answers again rejoins.

    Each connection's socket is known by its descriptor and both its
    addresses, read when the connection is made; a descriptor is cut only
    while it still names that very TCP connection, never one the number
    was given to since (a client's socket of the WSGI server).
    """

    def __init__(self) -> None:
        self._held: dict[int, tuple | None] = {}  # thread id -> the socket of the connection it has checked out
        self._expiries: dict[int, float] = {}  # thread id -> when its connection is cut
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def listen(self, engine: sa.Engine) -> None:
        """Know each connection's socket, and which connection each thread holds (pool events of *engine*)."""
        sa.event.listen(engine, "connect", _remember_socket)
        sa.event.listen(engine, "checkout", lambda _dbapi, record, _proxy: self._hold(record.info.get(_SOCKET)))
        sa.event.listen(engine, "checkin", lambda _dbapi, _record: self._hold(None))

    def _hold(self, socket_of: tuple | None) -> None:
        with self._changed:
            self._held[threading.get_ident()] = socket_of

    def arm(self, expiry: float) -> None:
        """Cut the calling thread's connection at *expiry* (monotonic) unless :meth:`disarm` comes first."""
        with self._changed:
            # Expiries mostly come in increasing order: the cutter is woken only
            # when this one is sooner than all it sleeps for, not on every lookup.
            nearest = min(self._expiries.values(), default=None)
            self._expiries[threading.get_ident()] = expiry
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tenancy-cell-cutter", daemon=True)
                self._thread.start()
            elif nearest is None or expiry < nearest:
                self._changed.notify()

    def disarm(self) -> None:
        with self._changed:
            self._expiries.pop(threading.get_ident(), None)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                due = [ident for ident, expiry in self._expiries.items() if expiry <= now]
                # Under the lock disarm() and the pool events take: the
                # connection of work still armed, never a later lookup's.
                for ident in due:
                    del self._expiries[ident]
                    _shut_down(self._held.get(ident))
                if not due:
                    nearest = min(self._expiries.values(), default=None)
                    self._changed.wait(None if nearest is None else nearest - now)

    def after_fork(self) -> None:
        # The parent's cutter thread does not exist in a forked child.
        self._held.clear()
        self._expiries.clear()
        self._changed = threading.Condition()
        self._thread = None


# The connection record's key for its socket: (descriptor, local address, peer address).
_SOCKET = "tenancy_mw.socket"


def _remember_socket(dbapi_connection: Any, record: Any) -> None:
    """A ``connect`` listener: note the new connection's socket (psycopg2's ``fileno()``, PyMySQL's ``_sock``)."""
    with contextlib.suppress(Exception):  # no socket (SQLite), or a driver that hides it: nothing to cut
        fileno = getattr(dbapi_connection, "fileno", None)
        if not callable(fileno):
            fileno = getattr(getattr(dbapi_connection, "_sock", None), "fileno", None)
        if callable(fileno):
            fd = fileno()
            with _socket_of(fd) as probe:
                record.info[_SOCKET] = (fd, probe.getsockname(), probe.getpeername())


def _shut_down(socket_of: tuple | None) -> None:
    """Shut down the socket *socket_of* names, if its descriptor still is that TCP connection."""
    if socket_of is None:
        return
    fd, local, peer = socket_of
    with contextlib.suppress(OSError), _socket_of(fd) as cut:
        if (cut.getsockname(), cut.getpeername()) == (local, peer):
            cut.shutdown(socket.SHUT_RDWR)


def _socket_of(fd: int) -> socket.socket:
    """A socket object on a duplicate of *fd*: shutting it down ends the one socket both name
    (the driver's read returns); closing it leaves the driver's descriptor open.  OSError when
    *fd* is no socket (the duplicate is closed then)."""
    duplicate = os.dup(fd)
    try:
        return socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        raise


class _Cell:
    """One cell: its engine and how many lookups it may run at once."""

    def __init__(self, name: str, url: str, timeout: float, pool_size: int, pool_recycle: int) -> None:
        self.name = name
        self.url = url
        self.pool_size = pool_size
        self.max_waiting = pool_size * WAITING_PER_CONNECTION
        self.timeout = timeout
        self._waiting = 0
        # When a query of this cell last succeeded: a long queue on a cell that answers is only
        # busy (each lookup still has its deadline); on one that stopped answering it is shed.
        self._answered_at = time.monotonic()
        self._lock = threading.Lock()
        self.executor = self._new_executor()
        self.engine = _cell_engine(url, timeout, pool_size, pool_recycle)
        self.cutter = _SocketCutter()
        self.cutter.listen(self.engine)

    def _new_executor(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=self.pool_size, thread_name_prefix="tenancy-cell-" + self.name)

    def submit(self, work: CellWork, deadline: float):
        """Queue *work* on this cell's own threads; ``None`` when the cell is too far behind."""
        with self._lock:
            if self._waiting >= self.max_waiting and time.monotonic() - self._answered_at > self.timeout:
                return None
            self._waiting += 1
        try:
            return self.executor.submit(self._ask, work, deadline)
        except BaseException:
            self._done()
            raise

    def _done(self) -> None:
        with self._lock:
            self._waiting -= 1

    @property
    def busy(self) -> int:
        """Lookups queued or running on this cell now."""
        return self._waiting

    def _ask(self, work: CellWork, deadline: float):
        """What *work* returns, or :data:`_TOO_LATE`; runs on one of the cell's threads."""
        try:
            if time.monotonic() >= deadline:
                # Whoever asked has given up (the cell was slow): spare the database.
                return _TOO_LATE
            # Past the asker's deadline and the statements' own limit, the
            # connection is cut: the thread never stays blocked on a silent cell.
            self.cutter.arm(deadline + self.timeout)
            for attempt in (1, 2):
                try:
                    answer = work(self.name, self.engine)
                    self._answered_at = time.monotonic()
                    return answer
                except sa.exc.DBAPIError as exc:
                    if attempt == 1 and exc.connection_invalidated and time.monotonic() < deadline:
                        continue  # the server dropped a pooled connection: one fresh try
                    raise
            return None  # pragma: no cover - the loop always returns or raises
        finally:
            self.cutter.disarm()
            self._done()

    def after_fork(self) -> None:
        # A forked worker must not share its parent's sockets, threads or locks.
        self.engine.dispose(close=False)
        self._waiting = 0
        self._answered_at = time.monotonic()
        self._lock = threading.Lock()
        self.executor = self._new_executor()
        self.cutter.after_fork()

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        self.engine.dispose()


#: The label of a tenant-owned row's owner column in a lookup's result.
_OWNER_LABEL = "tenancy_mw_owner"


def _same_tenant(owner: object, tenant: str) -> bool:
    """Whether *owner*, a row's tenant column, is exactly *tenant*.

    The SQL comparison alone is not enough: MariaDB/MySQL's default collations ignore case and
    trailing spaces, so ``WHERE project_id = 'ACME '`` finds tenant ``acme``'s rows.
    """
    if isinstance(owner, bytes):
        owner = owner.decode("utf-8", "replace")
    elif not isinstance(owner, str):
        owner = str(owner)
    return owner == tenant


class _Statements:
    """The two lookups of one table, built once."""

    def __init__(
        self, table: str, id_column: str, uuid_column: str, all_columns: bool, tenant_column: str | None = None
    ) -> None:
        schema, _, name = table.rpartition(".")
        columns: list[sa.ColumnClause] = [sa.column(id_column), sa.column(uuid_column)]
        if tenant_column is not None:
            columns.append(sa.column(tenant_column))
        tbl = sa.table(name, *columns, schema=schema or None)
        id_col, uuid_col = tbl.c[id_column], tbl.c[uuid_column]
        base = sa.select(sa.text("*")).select_from(tbl) if all_columns else sa.select(id_col, uuid_col)
        if tenant_column is not None:
            # A tenant-owned resource: another tenant's rows are not there at all.  The owner is
            # fetched too, to be compared exactly (see _same_tenant).
            base = base.add_columns(tbl.c[tenant_column].label(_OWNER_LABEL))
            base = base.where(tbl.c[tenant_column] == sa.bindparam("tenant", type_=sa.String()))
        self.by_id = base.where(id_col == sa.bindparam("ident", type_=sa.BigInteger())).limit(2)
        self.by_uuid = base.where(uuid_col == sa.bindparam("ident", type_=sa.String(36))).limit(2)


def _lookup_key(ident: int | str | uuid.UUID, by_uuid: bool) -> int | str:
    """*ident* checked as the filter checks it: a lower-case uuid or an integer id from 0 to 2**63 - 1."""
    if isinstance(ident, uuid.UUID):
        ident = str(ident)
    if by_uuid:
        return parse_uuid(str(ident))
    if isinstance(ident, int) and not isinstance(ident, bool):
        # The filter's bounds: no row has a negative id or one beyond BIGINT, and asking for one
        # would make a cell fail (SQLite cannot bind it) and look down.
        if not 0 <= ident <= MAX_INTEGER_ID:
            raise InvalidId(
                "integer-too-large" if ident > 0 else "not-an-integer",
                "Invalid id %d: ids are integers from 0 to %d." % (ident, MAX_INTEGER_ID),
                ident,
            )
        return ident
    return parse_integer_id(str(ident))


class CellLookup:
    """Every cell's engine and a thread pool to ask them all at once; see the module doc.

    :param cells: ``{name: url}``, or the ``cells`` option's text
        (``name=URL`` items separated by commas).
    :param cell_timeout: seconds each cell has to answer.
    :param pool_size: connections per cell, also the most lookups a cell
        runs at once.
    :param pool_recycle: seconds after which an idle connection is replaced.
    """

    def __init__(
        self,
        cells: Mapping[str, str] | str,
        *,
        cell_timeout: float = 2.0,
        pool_size: int = 5,
        pool_recycle: int = 600,
    ) -> None:
        if not 0 < cell_timeout <= MAX_CELL_TIMEOUT:
            raise ValueError("cell_timeout must be above 0 and at most %g s, not %r" % (MAX_CELL_TIMEOUT, cell_timeout))
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1, not %r" % (pool_size,))
        self.cell_timeout = cell_timeout
        self.pool_size = pool_size
        self._cells = [
            _Cell(name, url, cell_timeout, pool_size, pool_recycle) for name, url in parse_cells(cells).items()
        ]
        #: The cells' engines by name, for service code and tests.
        self.engines = {cell.name: cell.engine for cell in self._cells}
        self._statements: dict[tuple, _Statements] = {}
        self._statements_lock = threading.Lock()
        ref = weakref.ref(self)

        def after_fork_in_child() -> None:
            me = ref()
            if me is not None:
                me._after_fork()

        os.register_at_fork(after_in_child=after_fork_in_child)

    @property
    def cell_names(self) -> list[str]:
        """The cells, in configuration order."""
        return [cell.name for cell in self._cells]

    def _after_fork(self) -> None:
        # A lock another thread held at fork() stays held in the child, which has no such thread.
        self._statements_lock = threading.Lock()
        for cell in self._cells:
            cell.after_fork()

    def statements(
        self,
        table: str,
        id_column: str = "id",
        uuid_column: str = "uuid",
        all_columns: bool = False,
        tenant_column: str | None = None,
    ):
        """The cached lookup statements of a table (``.by_id``, ``.by_uuid``; parameters ``ident``, ``tenant``)."""
        key = (table, id_column, uuid_column, all_columns, tenant_column)
        found = self._statements.get(key)
        if found is None:
            with self._statements_lock:
                found = self._statements.setdefault(
                    key, _Statements(table, id_column, uuid_column, all_columns, tenant_column)
                )
        return found

    def find(self, statement, params: dict, *, stop_at_first: bool = False, accept=None) -> Found:
        """Run *statement* with *params* (``{"ident": ...}``) in every cell at once.

        Waits at most ``cell_timeout`` seconds.  With *stop_at_first*, returns
        as soon as one cell has a row.  With *accept*, a row it returns false
        for counts as no row.
        """
        found = Found()
        work = functools.partial(_first_row, statement, params)
        for cell, row, waiting in self._answers(self._cells, work, found.unanswered, self.cell_timeout):
            if row is not None and (accept is None or accept(row)):
                found.matches.append((cell.name, row))
            if stop_at_first and found.matches and waiting:
                found.complete = False
                return found
        return found

    def scatter_gather(
        self, work: CellWork, *, cells: Iterable[str] | None = None, timeout: float | None = None
    ) -> Gathered:
        """Run ``work(cell_name, engine)`` in every cell (or those named in *cells*) at once.

        Waits at most *timeout* seconds (``cell_timeout`` unless given: more
        for work of many statements, each of which the drivers still bound by
        ``cell_timeout``), as :meth:`find` does, on the cells' own threads and
        engines, so every connect and query has the drivers' timeouts (module
        doc).  A cell whose *work* raised or did
        not return in time is in :attr:`Gathered.unanswered` (and logged);
        its thread finishes, or its driver gives up, or at the latest the
        lookup cuts its connection ``cell_timeout`` after the deadline
        (module doc), so no thread stays blocked on a silent cell.  *work* may
        read or write; it runs a second time when the server had dropped a
        pooled connection it was given, so it must be safe to repeat (a
        read, a write that checks, a transaction), and it should use one
        connection at a time (a cell has ``pool_size``).

        Example::

            >>> lookup = CellLookup({"cell1": "sqlite://", "cell2": "sqlite://"})
            >>> def one(cell, engine):
            ...     with engine.connect() as conn:
            ...         return conn.exec_driver_sql("SELECT 1").scalar()
            >>> lookup.scatter_gather(one)
            Gathered(answers={'cell1': 1, 'cell2': 1}, unanswered=[])
            >>> lookup.close()
        """
        chosen = self._cells if cells is None else [self._cell(name) for name in cells]
        gathered = Gathered()
        waited = self.cell_timeout if timeout is None else timeout
        answers = {cell.name: answer for cell, answer, _ in self._answers(chosen, work, gathered.unanswered, waited)}
        order = [cell.name for cell in chosen]
        gathered.answers = {name: answers[name] for name in order if name in answers}
        gathered.unanswered.sort(key=order.index)
        return gathered

    def run_in_cell(self, cell: str, work: CellWork) -> Any:
        """What ``work(cell, engine)`` returns in *cell*, within ``cell_timeout``.

        Raises :class:`CellsUnavailable` when the cell did not answer in time
        or *work* failed (the failure is logged); see :meth:`scatter_gather`.
        """
        gathered = self.scatter_gather(work, cells=[cell])
        if gathered.unanswered:
            raise CellsUnavailable("cell %s did not answer" % cell, gathered.unanswered)
        return gathered.answers[cell]

    def _cell(self, name: str) -> _Cell:
        for cell in self._cells:
            if cell.name == name:
                return cell
        raise KeyError("no cell is named %r; the cells are %s" % (name, ", ".join(self.cell_names)))

    def _answers(
        self, cells: list[_Cell], work: CellWork, unanswered: list[str], timeout: float
    ) -> Iterator[tuple[_Cell, Any, int]]:
        """``(cell, answer, still waiting)`` of each of *cells* answering *work* within *timeout*, as they come.

        The others are logged and added to *unanswered*.
        """
        pending = {}
        deadline = time.monotonic() + timeout
        for cell in cells:
            future = cell.submit(work, deadline)
            if future is None:
                LOG.warning("cell %s: %d lookups waiting already; counted as not answering", cell.name, cell.busy)
                unanswered.append(cell.name)
            else:
                pending[future] = cell
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            done, _ = wait(pending, timeout=remaining, return_when=FIRST_COMPLETED)
            for future in done:
                cell = pending.pop(future)
                try:
                    answer = future.result()
                except Exception as exc:  # noqa: BLE001 - any failure of a cell is "did not answer"
                    LOG.warning("cell %s did not answer: %s", cell.name, sql.error_summary(exc))
                    unanswered.append(cell.name)
                    continue
                if answer is _TOO_LATE:
                    unanswered.append(cell.name)
                else:
                    # Those done but not yet handed out are still in pending: the caller may stop here.
                    yield cell, answer, len(pending)
        for cell in pending.values():
            LOG.warning("cell %s did not answer within %.3g s", cell.name, timeout)
            unanswered.append(cell.name)

    def find_id(
        self,
        table: str,
        ident: int | str,
        *,
        by_uuid: bool,
        id_column: str = "id",
        uuid_column: str = "uuid",
        all_columns: bool = False,
        tenant_column: str | None = None,
        tenant: str | None = None,
    ) -> Found:
        """:meth:`find` for one table's integer id or (already checked, lower-case) uuid.

        With *tenant_column*, only rows whose column holds exactly *tenant*
        count (compared in Python too: a case-insensitive or PAD SPACE
        collation does not make ``ACME`` the owner of ``acme``'s rows).
        """
        statements = self.statements(table, id_column, uuid_column, all_columns, tenant_column)
        if tenant_column is None:
            params: dict[str, Any] = {"ident": ident}
            accept = None
        else:
            params = {"ident": ident, "tenant": tenant}

            def accept(row: dict) -> bool:
                return _same_tenant(row.pop(_OWNER_LABEL), tenant)  # type: ignore[arg-type]  # set with the column

        if by_uuid:
            return self.find(statements.by_uuid, params, stop_at_first=True, accept=accept)
        return self.find(statements.by_id, params, accept=accept)

    def resolve(
        self,
        table: str,
        ident: int | str,
        *,
        by_uuid: bool,
        id_column: str = "id",
        uuid_column: str = "uuid",
        tenant_column: str | None = None,
        tenant: str | None = None,
    ) -> Resolved:
        """The one cell and full row of *ident* in *table*, by the rules of the module doc.

        *ident* is a uuid (``by_uuid=True``, any case, hyphenated, or a
        ``uuid.UUID``) or an integer id, as an ``int`` (0 to 2**63 - 1) or
        its decimal text.  With *tenant_column*,
        only *tenant*'s rows count (another tenant's record is "not found").
        Raises
        :class:`~tenancy_mw.cells.ids.InvalidId`, :class:`RecordNotFound`,
        :class:`AmbiguousId` or :class:`CellsUnavailable`.
        """
        key = _lookup_key(ident, by_uuid)
        if tenant_column is not None and not isinstance(tenant, str):
            raise ValueError("a tenant-owned lookup needs the tenant id, not %r" % (tenant,))
        found = self.find_id(
            table,
            key,
            by_uuid=by_uuid,
            id_column=id_column,
            uuid_column=uuid_column,
            all_columns=True,
            tenant_column=tenant_column,
            tenant=tenant,
        )
        return outcome(found, table, key, by_uuid)

    def close(self) -> None:
        """Stop the cells' threads and close their connections."""
        for cell in self._cells:
            cell.close()
