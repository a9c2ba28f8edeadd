"""The demo's cell databases: ``services`` and ``compute_nodes`` in two cells, as in nova's cells v2.

Each cell is its own database (SQLite files ``examples/state/cell1.sqlite``
and ``cell2.sqlite`` by default; any SQLAlchemy URLs).  Integer ids are
per cell, so the two cells have a service ``1`` each, a service ``2`` each
and a compute node ``1`` each: only a uuid, or the ``id_resolver`` filter
refusing an ambiguous integer id, tells them apart.

The cells start as a deployment that predates uuids would: rows without
one.  :meth:`DemoCells.prepare` (run when the app starts) creates the
tables, puts the sample rows in, and runs tenancy_mw's online backfill
(:func:`tenancy_mw.cells.backfill.backfill_table`), which two workers
starting at once may run together safely.

Every cell is reached through tenancy_mw's
:class:`~tenancy_mw.cells.lookup.CellLookup`, a lookup of its own built from
the same ``[id_resolver]`` options as the filter's (so each worker holds up
to twice ``pool_size`` connections per cell): its engines (connect, read and statement timeouts of
``cell_timeout``), its threads per cell, its deadline.  So a cell that
accepts connections and never answers, or refuses them, costs a caller at
most ``cell_timeout`` (2 s in the demo's settings), at start or on a
request:

- At start, every cell is asked at once to answer a query, within
  ``cell_timeout``; the cells that answered are then prepared.  A cell
  that did not answer, or whose preparation failed, is logged and left to
  later: the first list that reaches it prepares it (so a cell that was
  down at start joins the lists when it is back).
- A list (``os-services``, ``os-hypervisors``) asks every cell at once and
  shows the cells that answered in time; a cell that did not is logged and
  left out.  That is what nova does below microversion 2.69; from 2.69
  nova adds partial records (``status: UNKNOWN``) of a down cell's compute
  services, made from the API database's host mappings.  The demo serves
  up to 2.53 and keeps no host mappings (its cells are all it has), so it
  leaves a down cell out at every version.  nova's ``os-hypervisors``
  handles no down cell at all (an error); the demo leaves it out there too.
- A list whose answer rests on a down cell is ``503`` rather than a false
  answer: a hostname search that matched nothing in the cells that
  answered, and the legacy actions below 2.53, which find a service by
  host and binary in every cell (the down cell could hold it, or a second
  one), as the ``id_resolver`` filter answers for an integer id.
- A read or write in the cell an id was found in (by the filter) that does
  not answer in time is ``503`` with ``Retry-After``
  (:class:`~tenancy_mw.cells.outcomes.CellsUnavailable`, rendered by
  :mod:`demo_compute.cells_api`).  A write cut off that way may still have
  happened: read the record again.

The cell list is the ``cells`` option of the ``id_resolver`` filter
(``[id_resolver]`` of ``tenancy_mw_demo.conf``, ``name=URL, name=URL``),
which the app reads too, with its ``cell_timeout``, ``pool_size`` and
``pool_recycle`` (:func:`demo_compute.app.app_factory`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

import sqlalchemy as sa

from tenancy_mw.cells.backfill import backfill_table
from tenancy_mw.cells.lookup import CellLookup
from tenancy_mw.core import sql

__all__ = ["DemoCells"]

LOG = logging.getLogger(__name__)

METADATA = sa.MetaData()
SERVICES = sa.Table(
    "services",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uuid", sa.String(36), nullable=True, index=True, unique=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("binary", sa.String(255), nullable=False),
    sa.Column("zone", sa.String(255), nullable=False),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    sa.Column("disabled_reason", sa.String(255), nullable=True),
    sa.Column("forced_down", sa.Boolean, nullable=False, default=False),
    sa.Column("updated_at", sa.DateTime, nullable=False),
    **sql.table_options(),
)
COMPUTE_NODES = sa.Table(
    "compute_nodes",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uuid", sa.String(36), nullable=True, index=True, unique=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("hypervisor_hostname", sa.String(255), nullable=False),
    sa.Column("hypervisor_type", sa.String(255), nullable=False),
    sa.Column("host_ip", sa.String(64), nullable=False),
    **sql.table_options(),
)

#: The sample rows of each cell (by position in the cell list): ids repeat across cells on purpose.
SAMPLE = [
    {
        "services": [
            (1, "cell1-conductor", "nova-conductor", "internal"),
            (2, "compute1", "nova-compute", "nova"),
            (3, "compute2", "nova-compute", "nova"),
        ],
        "compute_nodes": [
            (1, "compute1", "compute1.cell1.example", "192.0.2.11"),
            (2, "compute2", "compute2.cell1.example", "192.0.2.12"),
        ],
    },
    {
        "services": [(1, "cell2-conductor", "nova-conductor", "internal"), (2, "compute3", "nova-compute", "nova")],
        "compute_nodes": [(1, "compute3", "compute3.cell2.example", "198.51.100.13")],
    },
]

_CREATE_ATTEMPTS = 5

#: How long the start waits for the cells that answered to be prepared, in ``cell_timeout``: a
#: preparation is a few statements, each within ``cell_timeout``; this bounds a cell that stops
#: answering midway (psycopg2 has no read timeout of its own).
PREPARE_TIMEOUTS = 10


def _probe(_name: str, engine: sa.Engine) -> None:
    """Raise unless the cell of *engine* answers a query."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)


class DemoCells:
    """The demo's cell databases, reached through one :class:`~tenancy_mw.cells.lookup.CellLookup`.

    :param cells: ``{name: url}`` in order; the first two get the sample rows.
    :param cell_timeout: seconds a cell has to answer (the ``id_resolver`` filter's option).
    :param pool_size: connections (and threads) per cell.
    :param pool_recycle: seconds after which an idle connection is replaced.
    """

    def __init__(
        self, cells: dict[str, str], *, cell_timeout: float = 2.0, pool_size: int = 5, pool_recycle: int = 600
    ) -> None:
        self.urls = dict(cells)
        #: The lookup every cell is reached through (its engines, threads and deadline).
        self.lookup = CellLookup(self.urls, cell_timeout=cell_timeout, pool_size=pool_size, pool_recycle=pool_recycle)
        #: The cells' engines, by name (the lookup's: every connect and query has its timeouts).
        self.engines = self.lookup.engines
        self._samples = dict(zip(self.urls, SAMPLE, strict=False))  # the cells past the samples get none
        # The cells prepared by this process; a cell missing here is prepared by the next list.
        self._ready: set[str] = set()

    def prepare(self) -> list[str]:
        """Create the tables, add the sample rows, backfill uuids, in every cell at once; the cells not done.

        Every cell is first asked to answer at all, within ``cell_timeout``:
        one that does not (hung, refused) is logged and left to later (module
        doc), so it costs the start at most ``cell_timeout``.  The others are
        prepared, each statement within ``cell_timeout``; one that stops
        answering midway is given up after :data:`PREPARE_TIMEOUTS` of them.
        """
        started = time.monotonic()
        answering = self.lookup.scatter_gather(_probe)
        probed = time.monotonic() - started
        for name in answering.unanswered:
            LOG.warning(
                "demo cell %s is not ready at start: it did not answer within %.2f s; it is prepared when it next"
                " answers",
                name,
                probed,
            )
        timeout = PREPARE_TIMEOUTS * self.lookup.cell_timeout
        prepared = self.lookup.scatter_gather(self._prepare_cell, cells=list(answering.answers), timeout=timeout)
        for name in prepared.unanswered:
            LOG.warning(
                "demo cell %s is not ready at start: preparing it failed; it is prepared when it next answers", name
            )
        return [name for name in self.urls if name not in prepared.answers]

    def _prepare_cell(self, name: str, engine: sa.Engine) -> None:
        """Prepare one cell (on its lookup thread); raises when it does not answer."""
        # Reachable at all? A cell that is down fails here, once, not in every retry below.
        _probe(name, engine)
        self._create(engine)
        if name in self._samples:
            self._seed(engine, self._samples[name])
        for table in ("services", "compute_nodes"):
            _, remaining = backfill_table(engine, table)
            if remaining:
                LOG.warning("demo cell %s: %d rows of %s still have no uuid", name, remaining, table)
        self._ready.add(name)

    @staticmethod
    def _create(engine: sa.Engine) -> None:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                METADATA.create_all(engine)
                return
            except sa.exc.DBAPIError:
                # Another worker created a table between our check and our CREATE
                # (or the cell went down, which the last attempt reports).
                if attempt == _CREATE_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)

    @staticmethod
    def _seed(engine: sa.Engine, sample: dict) -> None:
        now = _now()
        services = [
            {
                "id": i,
                "uuid": None,
                "host": host,
                "binary": binary,
                "zone": zone,
                "disabled": False,
                "disabled_reason": None,
                "forced_down": False,
                "updated_at": now,
            }
            for i, host, binary, zone in sample["services"]
        ]
        nodes = [
            {
                "id": i,
                "uuid": None,
                "host": host,
                "hypervisor_hostname": hostname,
                "hypervisor_type": "QEMU",
                "host_ip": ip,
            }
            for i, host, hostname, ip in sample["compute_nodes"]
        ]
        try:
            with engine.begin() as conn:
                if conn.execute(sa.select(sa.func.count()).select_from(SERVICES)).scalar():
                    return
                conn.execute(SERVICES.insert(), services)
                conn.execute(COMPUTE_NODES.insert(), nodes)
        except sa.exc.IntegrityError:
            pass  # another worker seeded this cell first

    # Reading ---------------------------------------------------------------------------------

    def _each_cell(self, *statements) -> tuple[list[tuple[str, list[dict]]], list[str]]:
        """``([(cell, rows of each statement)], cells that did not answer)``, every cell asked at once.

        A cell not prepared yet is prepared first.  The cells that did not
        answer within ``cell_timeout`` are logged and left out (module doc).
        """

        def read(name: str, engine: sa.Engine) -> list[list[dict]]:
            if name not in self._ready:
                self._prepare_cell(name, engine)
            with engine.connect() as conn:
                return [[dict(row) for row in conn.execute(statement).mappings()] for statement in statements]

        gathered = self.lookup.scatter_gather(read)
        for name in gathered.unanswered:
            # As nova's list calls do below 2.69: the cells that answered are listed.
            LOG.warning("demo cell %s left out of a list: it did not answer", name)
        return list(gathered.answers.items()), gathered.unanswered

    def services(self, host: str | None = None, binary: str | None = None) -> tuple[list[tuple[str, dict]], list[str]]:
        """``([(cell, service)], cells that did not answer)``: every service, optionally of one host and/or binary."""
        query = sa.select(SERVICES).order_by(SERVICES.c.id)
        if host is not None:
            query = query.where(SERVICES.c.host == host)
        if binary is not None:
            query = query.where(SERVICES.c.binary == binary)
        answered, unanswered = self._each_cell(query)
        return [(cell, row) for cell, (rows,) in answered for row in rows], unanswered

    def nodes(self, hostname_part: str | None = None) -> tuple[list[tuple[str, dict, dict | None]], list[str]]:
        """``([(cell, node, its compute service or None)], cells that did not answer)``.

        Every compute node, or those whose hypervisor hostname contains
        *hostname_part*; each with its host's ``nova-compute`` service, read
        in the same visit to its cell.
        """
        query = sa.select(COMPUTE_NODES).order_by(COMPUTE_NODES.c.id)
        if hostname_part is not None:
            # A bound LIKE pattern, its wildcards escaped: the part is matched as text.
            escaped = hostname_part.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(COMPUTE_NODES.c.hypervisor_hostname.like("%" + escaped + "%", escape="\\"))
        computes = sa.select(SERVICES).where(SERVICES.c.binary == "nova-compute").order_by(SERVICES.c.id)
        answered, unanswered = self._each_cell(query, computes)
        found = []
        for cell, (nodes, services) in answered:
            by_host = {}
            for service in services:
                by_host.setdefault(service["host"], service)
            found.extend((cell, node, by_host.get(node["host"])) for node in nodes)
        return found, unanswered

    def _first(self, cell: str, statement) -> dict | None:
        """The first row of *statement* in *cell*.

        Raises :class:`~tenancy_mw.cells.outcomes.CellsUnavailable` if the cell does not answer in time,
        as every read and write in one cell does.
        """

        def read(_name: str, engine: sa.Engine) -> dict | None:
            with engine.connect() as conn:
                row = conn.execute(statement).mappings().first()
            return dict(row) if row is not None else None

        return self.lookup.run_in_cell(cell, read)

    def service(self, cell: str, ident: int) -> dict | None:
        """Service *ident* of *cell*, or ``None``."""
        return self._first(cell, sa.select(SERVICES).where(SERVICES.c.id == ident))

    def compute_service(self, cell: str, host: str) -> dict | None:
        """The ``nova-compute`` service of *host* in *cell*, or ``None``."""
        return self._first(
            cell, sa.select(SERVICES).where(SERVICES.c.host == host, SERVICES.c.binary == "nova-compute")
        )

    def node(self, cell: str, ident: int) -> dict | None:
        """Compute node *ident* of *cell*, or ``None``."""
        return self._first(cell, sa.select(COMPUTE_NODES).where(COMPUTE_NODES.c.id == ident))

    # Writing ---------------------------------------------------------------------------------

    def update_service(self, cell: str, ident: int, changes: dict) -> dict | None:
        """Apply *changes* to service *ident* of *cell*; the service after, or ``None`` if it is gone."""
        statement = SERVICES.update().where(SERVICES.c.id == ident).values(**changes, updated_at=_now())

        def update(_name: str, engine: sa.Engine) -> dict | None:
            with engine.begin() as conn:
                if conn.execute(statement).rowcount != 1:
                    return None
                row = conn.execute(sa.select(SERVICES).where(SERVICES.c.id == ident)).mappings().first()
            return dict(row) if row is not None else None

        return self.lookup.run_in_cell(cell, update)

    def delete_service(self, cell: str, ident: int) -> bool:
        """Delete service *ident* of *cell* and, for a compute service, its host's compute nodes."""

        def delete(_name: str, engine: sa.Engine) -> bool:
            with engine.begin() as conn:
                row = conn.execute(sa.select(SERVICES).where(SERVICES.c.id == ident)).mappings().first()
                if row is None:
                    return False
                conn.execute(SERVICES.delete().where(SERVICES.c.id == ident))
                if row["binary"] == "nova-compute":
                    conn.execute(COMPUTE_NODES.delete().where(COMPUTE_NODES.c.host == row["host"]))
            return True

        return self.lookup.run_in_cell(cell, delete)

    def close(self) -> None:
        """Stop the cells' threads and close their connections."""
        self.lookup.close()
