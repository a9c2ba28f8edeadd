"""The demo's cell databases: ``services`` and ``compute_nodes`` in two cells, as in nova's cells v2.

Each cell is its own database (SQLite files ``examples/state/cell1.sqlite``
and ``cell2.sqlite`` by default; any SQLAlchemy URLs).  Integer ids are
per cell, so the two cells have a service ``1`` each, a service ``2`` each
and a compute node ``1`` each: only a uuid, or the ``id_resolver`` filter
refusing an ambiguous integer id, tells them apart.

The cells start as a deployment that predates uuids would: rows without
one.  :meth:`DemoCells.prepare` (run when the app starts) creates the
tables, puts the sample rows in, and runs tenancy_mw's online backfill
(:func:`tenancy_mw.cells.backfill.backfill_uuids`), which two workers
starting at once may run together safely.  A cell that cannot be reached
at start is logged and skipped; the filter answers ``503`` for ids that
could be there.

The cell list is the ``cells`` option of the ``id_resolver`` filter
(``[id_resolver]`` of ``tenancy_mw_demo.conf``, ``name=URL, name=URL``),
which the app reads too (:func:`demo_compute.app.app_factory`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

import sqlalchemy as sa

from tenancy_mw.cells.backfill import backfill_uuids
from tenancy_mw.core import sql
from tenancy_mw.core.sql import error_summary

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
        "services": [(1, "cell1-conductor", "nova-conductor", "internal"), (2, "compute1", "nova-compute", "nova"),
                     (3, "compute2", "nova-compute", "nova")],
        "compute_nodes": [(1, "compute1", "compute1.cell1.example", "192.0.2.11"),
                          (2, "compute2", "compute2.cell1.example", "192.0.2.12")],
    },
    {
        "services": [(1, "cell2-conductor", "nova-conductor", "internal"), (2, "compute3", "nova-compute", "nova")],
        "compute_nodes": [(1, "compute3", "compute3.cell2.example", "198.51.100.13")],
    },
]

_CREATE_ATTEMPTS = 5


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)


class DemoCells:
    """The demo's cell databases; one engine per cell.

    :param cells: ``{name: url}`` in order; the first two get the sample rows.
    """

    def __init__(self, cells: dict[str, str]) -> None:
        self.urls = dict(cells)
        self.engines = {name: sql.create_engine(url) for name, url in cells.items()}

    def prepare(self) -> None:
        """Create the tables, add the sample rows, backfill uuids; skip (and log) a cell that is down."""
        for position, (name, engine) in enumerate(self.engines.items()):
            try:
                self._create(engine)
                if position < len(SAMPLE):
                    self._seed(engine, SAMPLE[position])
            except sa.exc.DBAPIError as exc:
                LOG.warning("demo cell %s cannot be prepared now: %s", name, error_summary(exc))
                continue
            for table in ("services", "compute_nodes"):
                (result,) = backfill_uuids({name: self.urls[name]}, table)
                if result.error:
                    LOG.warning("demo cell %s: uuid backfill of %s failed: %s", name, table, result.error)
        for engine in self.engines.values():
            # Nothing open before gunicorn forks (--preload) or between requests.
            engine.dispose()

    @staticmethod
    def _create(engine: sa.Engine) -> None:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                METADATA.create_all(engine)
                return
            except sa.exc.DBAPIError:
                # Another worker created a table between our check and our CREATE
                # (or the cell is down, which the last attempt reports).
                if attempt == _CREATE_ATTEMPTS:
                    raise
                time.sleep(0.1 * attempt)

    @staticmethod
    def _seed(engine: sa.Engine, sample: dict) -> None:
        now = _now()
        services = [
            {"id": i, "uuid": None, "host": host, "binary": binary, "zone": zone, "disabled": False,
             "disabled_reason": None, "forced_down": False, "updated_at": now}
            for i, host, binary, zone in sample["services"]
        ]
        nodes = [
            {"id": i, "uuid": None, "host": host, "hypervisor_hostname": hostname, "hypervisor_type": "QEMU",
             "host_ip": ip}
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

    def _each_cell(self, statement) -> list[tuple[str, dict]]:
        """``(cell, row)`` of *statement* in every cell that answers, cells in order; a failing cell is logged."""
        rows = []
        for name, engine in self.engines.items():
            try:
                with engine.connect() as conn:
                    rows.extend((name, dict(row)) for row in conn.execute(statement).mappings())
            except sa.exc.DBAPIError as exc:
                # As nova's list calls do: the cells that answered are listed.
                LOG.warning("demo cell %s left out of a list: %s", name, error_summary(exc))
        return rows

    def services(self, host: str | None = None, binary: str | None = None) -> list[tuple[str, dict]]:
        """Every service, optionally of one host and/or binary."""
        query = sa.select(SERVICES).order_by(SERVICES.c.id)
        if host is not None:
            query = query.where(SERVICES.c.host == host)
        if binary is not None:
            query = query.where(SERVICES.c.binary == binary)
        return self._each_cell(query)

    def service(self, cell: str, ident: int) -> dict | None:
        """Service *ident* of *cell*, or ``None``."""
        with self.engines[cell].connect() as conn:
            row = conn.execute(sa.select(SERVICES).where(SERVICES.c.id == ident)).mappings().first()
        return dict(row) if row is not None else None

    def compute_service(self, cell: str, host: str) -> dict | None:
        """The ``nova-compute`` service of *host* in *cell*, or ``None``."""
        query = sa.select(SERVICES).where(SERVICES.c.host == host, SERVICES.c.binary == "nova-compute")
        with self.engines[cell].connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row is not None else None

    def nodes(self, hostname_part: str | None = None) -> list[tuple[str, dict]]:
        """Every compute node, or those whose hypervisor hostname contains *hostname_part*."""
        query = sa.select(COMPUTE_NODES).order_by(COMPUTE_NODES.c.id)
        if hostname_part is not None:
            # A bound LIKE pattern, its wildcards escaped: the part is matched as text.
            escaped = hostname_part.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(COMPUTE_NODES.c.hypervisor_hostname.like("%" + escaped + "%", escape="\\"))
        return self._each_cell(query)

    def node(self, cell: str, ident: int) -> dict | None:
        """Compute node *ident* of *cell*, or ``None``."""
        with self.engines[cell].connect() as conn:
            row = conn.execute(sa.select(COMPUTE_NODES).where(COMPUTE_NODES.c.id == ident)).mappings().first()
        return dict(row) if row is not None else None

    # Writing ---------------------------------------------------------------------------------

    def update_service(self, cell: str, ident: int, changes: dict) -> dict | None:
        """Apply *changes* to service *ident* of *cell*; the service after, or ``None`` if it is gone."""
        statement = SERVICES.update().where(SERVICES.c.id == ident).values(**changes, updated_at=_now())
        with self.engines[cell].begin() as conn:
            if conn.execute(statement).rowcount != 1:
                return None
        return self.service(cell, ident)

    def delete_service(self, cell: str, ident: int) -> bool:
        """Delete service *ident* of *cell* and, for a compute service, its host's compute nodes."""
        with self.engines[cell].begin() as conn:
            row = conn.execute(sa.select(SERVICES).where(SERVICES.c.id == ident)).mappings().first()
            if row is None:
                return False
            conn.execute(SERVICES.delete().where(SERVICES.c.id == ident))
            if row["binary"] == "nova-compute":
                conn.execute(COMPUTE_NODES.delete().where(COMPUTE_NODES.c.host == row["host"]))
        return True

    def close(self) -> None:
        """Close every cell's connections."""
        for engine in self.engines.values():
            engine.dispose()
