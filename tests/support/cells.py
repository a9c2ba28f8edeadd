"""Cell databases for the id_resolver tests: three cells on three backends, and cells that do not answer.

:func:`three_cells` makes a SQLite file, a PostgreSQL database and a MariaDB
database, each with the ``services`` and ``compute_nodes`` tables of
:data:`ROWS` (integer ids duplicated across cells on purpose), and yields
``{cell name: URL}``.

Cells that do not answer: :func:`closed_port_url` (refused at once),
:func:`silent_server` (accepts, never says a word) and :class:`CellProxy`,
a relay in front of a real database that a test makes go silent, or
refuse, while the service is using it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
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


class CellProxy:
    """A TCP relay on 127.0.0.1 in front of a real database server: a cell a test can take down.

    At first every connection is relayed to the server, byte for byte.
    :meth:`go_silent`: connections stay open and new ones are accepted, but
    nothing is relayed any more, either way: a database host that froze
    (:meth:`resume` relays new connections again).  :meth:`refuse`: the
    port is closed and every connection cut: a database that went away.  Used as a context manager, it closes
    everything on exit.

    Example::

        with CellProxy(postgresql_url) as proxy:
            engine = sa.create_engine(proxy.url)   # the same database, through the relay
            proxy.go_silent()
    """

    def __init__(self, url: str) -> None:
        self.target = sa.make_url(url)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        #: The database's URL through the relay.
        self.url = self.target.set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)
        self._silent = threading.Event()
        self._refused = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="cell-proxy-%d" % self.port, daemon=True).start()

    def __enter__(self) -> CellProxy:
        return self

    def __exit__(self, *_exc) -> None:
        self.refuse()

    def go_silent(self) -> None:
        """From now on relay nothing, and leave every connection open."""
        self._silent.set()

    def resume(self) -> None:
        """Relay new connections again (those accepted while silent stay unanswered)."""
        self._silent.clear()

    def refuse(self) -> None:
        """Close the port and cut every connection."""
        self._refused.set()
        with contextlib.suppress(OSError):
            # Wakes the accept() of the relay's thread: close() alone would leave the port
            # listening until that accept() returned.
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # refused: the listener is closed
            self._keep(client)
            if self._refused.is_set():
                client.close()
                return
            if self._silent.is_set():
                continue  # accepted and held, never answered
            try:
                upstream = socket.create_connection((self.target.host, self.target.port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._keep(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
                if not data:
                    sink.shutdown(socket.SHUT_WR)
                    return
                if not self._silent.is_set():
                    sink.sendall(data)
            except OSError:
                return  # cut
