"""Cell databases for the id_resolver tests: three cells on three backends, and cells that do not answer.

:func:`three_cells` makes a SQLite file, a PostgreSQL database and a MariaDB
database, each with the ``services`` and ``compute_nodes`` tables of
:data:`ROWS` (integer ids duplicated across cells on purpose), and yields
``{cell name: URL}``.
"""

from __future__ import annotations

import contextlib
import socket
import uuid

import sqlalchemy as sa

from tests.support import databases
from tests.support.servers import free_port

METADATA = sa.MetaData()
SERVICES = sa.Table(
    "services",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uuid", sa.String(36), nullable=True, index=True),
    sa.Column("host", sa.String(255), nullable=False),
)
COMPUTE_NODES = sa.Table(
    "compute_nodes",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uuid", sa.String(36), nullable=True, index=True),
    sa.Column("hypervisor_hostname", sa.String(255), nullable=False),
)


def row_uuid(cell: str, table: str, ident: int) -> str:
    """The uuid the test data gives a row: stable, so tests can name it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "%s/%s/%d" % (cell, table, ident)))


#: cell -> table -> ids.  services 1 and 2 and compute node 1 are in two cells each.
ROWS = {
    "c-sqlite": {"services": [1, 2, 3], "compute_nodes": [1]},
    "c-pg": {"services": [1, 4], "compute_nodes": [1, 2]},
    "c-maria": {"services": [2, 5, 6], "compute_nodes": [3]},
}
#: Rows left without a uuid (not backfilled yet): (cell, table, id).
NO_UUID = {("c-maria", "services", 6)}
BACKEND_OF = {"c-sqlite": "sqlite", "c-pg": "postgresql", "c-maria": "mariadb"}


def fill(url: str, cell: str) -> None:
    """Create the tables in *url* and put *cell*'s rows of :data:`ROWS` in them."""
    engine = sa.create_engine(url)
    try:
        METADATA.create_all(engine)
        with engine.begin() as conn:
            for table, name_column in ((SERVICES, "host"), (COMPUTE_NODES, "hypervisor_hostname")):
                for ident in ROWS[cell][table.name]:
                    value = None if (cell, table.name, ident) in NO_UUID else row_uuid(cell, table.name, ident)
                    conn.execute(table.insert(), {"id": ident, "uuid": value, name_column: "%s-%d" % (cell, ident)})
    finally:
        engine.dispose()


def three_cells(require, tmp_dir) -> dict:
    """Generator: ``{cell: url}`` of three filled cells on SQLite, PostgreSQL and MariaDB; dropped after."""
    made = []
    try:
        cells = {}
        for cell, backend in BACKEND_OF.items():
            if backend == "sqlite":
                url = databases.sqlite_url(tmp_dir / ("%s.sqlite" % cell))
            else:
                generator = databases.server_database(backend, require)
                made.append(generator)
                url = next(generator)
            fill(url, cell)
            cells[cell] = url
        yield cells
    finally:
        for generator in made:
            generator.close()


def closed_port_url(backend: str = "postgresql") -> str:
    """A URL on 127.0.0.1 where nothing listens: connecting is refused at once."""
    port = free_port()
    if backend == "postgresql":
        return "postgresql+psycopg2://root@127.0.0.1:%d/test" % port
    return "mysql+pymysql://root:@127.0.0.1:%d/test" % port


@contextlib.contextmanager
def silent_server():
    """A port that accepts TCP connections and never says a word: a hung database.

    Yields the port.  The kernel completes the handshakes (backlog); no
    greeting ever comes, so a driver without a timeout would wait forever.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
