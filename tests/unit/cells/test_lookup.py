"""CellLookup, the lookup id_resolver asks the cells with, used directly from Python.

Its rules (one cell, several, none, cells that do not answer) across the three
cells of :mod:`tests.support.cells` (SQLite, PostgreSQL, MariaDB); its driver
limits; what a forked worker gets.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import sqlalchemy as sa

from tenancy_mw.cells.lookup import AmbiguousId, CellLookup, CellsUnavailable, RecordNotFound
from tests.support.cells import closed_port_url, row_uuid
from tests.unit.cells.conftest import wait_idle


@pytest.fixture(scope="module")
def lookup(cells):
    helper = CellLookup(cells, cell_timeout=3)
    yield helper
    helper.close()


def test_helper_resolves_to_cell_and_full_row(lookup):
    found = lookup.resolve("services", row_uuid("c-maria", "services", 5), by_uuid=True)
    assert found.cell == "c-maria"
    assert found.row == {"id": 5, "uuid": row_uuid("c-maria", "services", 5), "host": "c-maria-5"}
    found = lookup.resolve("compute_nodes", 2, by_uuid=False)
    assert (found.cell, found.row["hypervisor_hostname"]) == ("c-pg", "c-pg-2")
    assert lookup.resolve("services", "4", by_uuid=False).cell == "c-pg"


def test_helper_raises_the_same_outcomes(lookup):
    with pytest.raises(AmbiguousId) as ambiguous:
        lookup.resolve("services", 1, by_uuid=False)
    assert sorted(ambiguous.value.cells) == ["c-pg", "c-sqlite"]
    with pytest.raises(RecordNotFound):
        lookup.resolve("services", 99, by_uuid=False)
    from tenancy_mw.cells.ids import InvalidId

    with pytest.raises(InvalidId):
        lookup.resolve("services", "1 OR 1=1", by_uuid=False)
    with pytest.raises(InvalidId):
        lookup.resolve("services", "1", by_uuid=True)
    wait_idle(lookup)


def test_helper_with_an_unreachable_cell_raises_cells_unavailable(cells):
    helper = CellLookup(dict(cells, down=closed_port_url("mariadb")), cell_timeout=2)
    try:
        with pytest.raises(CellsUnavailable) as unavailable:
            helper.resolve("services", 3, by_uuid=False)
        assert unavailable.value.cells == ["down"]
    finally:
        helper.close()


def test_helper_refuses_a_cell_timeout_the_drivers_cannot_take():
    with pytest.raises(ValueError, match="cell_timeout"):
        CellLookup({"c1": "sqlite://"}, cell_timeout=40000)


def test_a_forked_worker_gets_its_own_threads_and_connections(cells):
    # gunicorn --preload: the filter is built (and may have run) in the master, then forked.
    import os

    lookup = CellLookup({"c-sqlite": cells["c-sqlite"], "c-pg": cells["c-pg"]}, cell_timeout=3)
    try:
        assert lookup.resolve("services", 4, by_uuid=False).cell == "c-pg"
        pid = os.fork()
        if pid == 0:  # the child: a lookup must work on fresh threads and connections
            code = 1
            try:
                code = 0 if lookup.resolve("services", 3, by_uuid=False).cell == "c-sqlite" else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert lookup.resolve("services", 4, by_uuid=False).cell == "c-pg"
    finally:
        lookup.close()


@pytest.mark.parametrize(
    ("backend", "slow_view"),
    [
        ("postgresql", "CREATE VIEW services AS SELECT id, uuid FROM real_services WHERE pg_sleep(5) IS NOT NULL"),
        ("mariadb", "CREATE VIEW services AS SELECT id, uuid FROM real_services WHERE SLEEP(5) = 0"),
    ],
)
def test_a_slow_query_is_cut_off_by_the_cell_timeout_not_only_abandoned(make_database, backend, slow_view):
    url = make_database(backend)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE real_services (id INTEGER PRIMARY KEY, uuid VARCHAR(36))")
            conn.exec_driver_sql("INSERT INTO real_services VALUES (3, NULL)")
            conn.exec_driver_sql(slow_view)
    finally:
        engine.dispose()
    lookup = CellLookup({"slow": url}, cell_timeout=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(CellsUnavailable):
            lookup.resolve("services", 3, by_uuid=False)
        # The query itself was stopped (statement_timeout, socket read timeout): the cell's
        # thread and connection come back long before the 5 s sleep would end.
        wait_idle(lookup, timeout=3)
        assert time.monotonic() - started < 4
    finally:
        lookup.close()


@pytest.mark.parametrize("ident", [-3, 2**63, 2**70, True])
def test_helper_refuses_an_integer_id_no_record_can_have_as_the_filter_does(lookup, ident):
    # The filter refuses these before any query (400); the helper must not ask the cells either
    # (SQLite cannot even bind 2**70: that cell would look down).
    from tenancy_mw.cells.ids import InvalidId

    with pytest.raises(InvalidId):
        lookup.resolve("services", ident, by_uuid=False)


def test_helper_takes_a_uuid_object(lookup):
    import uuid

    found = lookup.resolve("services", uuid.UUID(row_uuid("c-pg", "services", 4)), by_uuid=True)
    assert (found.cell, found.row["id"]) == ("c-pg", 4)


def test_helper_compares_the_tenant_exactly_too(lookup):
    with pytest.raises(RecordNotFound):
        lookup.resolve("services", 5, by_uuid=False, tenant_column="host", tenant="C-MARIA-5")
    found = lookup.resolve("services", 5, by_uuid=False, tenant_column="host", tenant="c-maria-5")
    assert found.row == {"id": 5, "uuid": row_uuid("c-maria", "services", 5), "host": "c-maria-5"}


def test_a_fork_while_another_thread_builds_statements_does_not_deadlock_the_child():
    # A thread of the parent holds the statements lock at fork(); the child has no such thread, so
    # it must not inherit the lock held.
    import os
    import signal

    lookup = CellLookup({"c1": "sqlite://"}, cell_timeout=1)
    try:
        with lookup._statements_lock:
            pid = os.fork()
            if pid == 0:  # the child: a table never asked for before needs the lock
                try:
                    lookup.statements("compute_nodes")
                finally:
                    os._exit(0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hangs on the statements lock")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        lookup.close()


# Public parts without a test of their own -----------------------------------------------------------


def test_driver_timeouts_tell_each_driver_the_cell_timeout():
    from tenancy_mw.cells.lookup import driver_timeouts

    postgres = driver_timeouts("postgresql+psycopg2://u@db/nova?options=-c%20search_path%3Dnova", 0.5)
    assert postgres["connect_timeout"] == 2  # libpq: whole seconds, at least 2
    assert postgres["options"] == "-c search_path=nova -c statement_timeout=500"
    assert postgres["tcp_user_timeout"] == 500
    assert driver_timeouts("mysql+mysqldb://u@db/nova", 0.5) == {
        "connect_timeout": 1,
        "read_timeout": 1,
        "write_timeout": 1,
    }
    assert driver_timeouts("mariadb+pymysql://u@db/nova", 2.5)["read_timeout"] == 2.5
    assert driver_timeouts("sqlite:////tmp/c.db", 3.0) == {"timeout": 3.0}
    assert driver_timeouts("oracle://u@db/nova", 3.0) == {}


def test_the_outcome_rules_of_what_the_cells_said():
    from tenancy_mw.cells.lookup import Found, Resolved, outcome

    row = {"id": 3, "uuid": None}
    assert outcome(Found(matches=[("c1", row)]), "services", 3, by_uuid=False) == Resolved("c1", row)
    # A uuid is unique: found anywhere, a cell that did not answer cannot change the answer.
    assert outcome(Found([("c1", row)], ["c2"], complete=False), "services", "u", by_uuid=True).cell == "c1"
    with pytest.raises(CellsUnavailable) as unavailable:
        outcome(Found([("c1", row)], ["c2"]), "services", 3, by_uuid=False)
    assert unavailable.value.cells == ["c2"]
    with pytest.raises(CellsUnavailable):
        outcome(Found([], ["c2"]), "services", "u", by_uuid=True)
    with pytest.raises(AmbiguousId) as ambiguous:
        outcome(Found([("c1", row), ("c2", row)]), "services", 3, by_uuid=False)
    assert ambiguous.value.cells == ["c1", "c2"]
    with pytest.raises(RecordNotFound):
        outcome(Found(), "services", 3, by_uuid=False)


def test_the_outcomes_are_the_same_objects_from_lookup_and_outcomes():
    from tenancy_mw.cells import ids, lookup, outcomes

    for name in outcomes.__all__:
        if name != "Lookup":
            assert getattr(lookup, name) is getattr(outcomes, name)
    assert lookup.MAX_CELL_TIMEOUT is ids.MAX_CELL_TIMEOUT
    assert issubclass(lookup.RecordNotFound, lookup.ResolveError)


def test_find_asks_every_cell_and_find_id_builds_the_statement(lookup):
    assert lookup.cell_names == ["c-sqlite", "c-pg", "c-maria"]
    statements = lookup.statements("services")
    assert lookup.statements("services") is statements
    found = lookup.find(statements.by_id, {"ident": 1})
    assert sorted(cell for cell, _ in found.matches) == ["c-pg", "c-sqlite"]
    assert (found.unanswered, found.complete) == ([], True)
    assert lookup.find(statements.by_id, {"ident": 1}, accept=lambda row: False).matches == []
    uuid = row_uuid("c-maria", "services", 5)
    first = lookup.find(statements.by_uuid, {"ident": uuid}, stop_at_first=True)
    assert [cell for cell, _ in first.matches] == ["c-maria"]
    by_tenant = lookup.find_id("services", 5, by_uuid=False, tenant_column="host", tenant="c-maria-5")
    assert by_tenant.matches == [("c-maria", {"id": 5, "uuid": uuid})]
    assert lookup.find_id("services", 5, by_uuid=False, tenant_column="host", tenant="c-pg-4").matches == []
    wait_idle(lookup)


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"cell_timeout": 0}, "cell_timeout"), ({"pool_size": 0}, "pool_size")]
)
def test_a_lookup_refuses_limits_it_cannot_keep(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CellLookup({"c1": "sqlite://"}, **kwargs)


def test_a_tenant_owned_lookup_needs_the_tenant(lookup):
    with pytest.raises(ValueError, match="tenant id"):
        lookup.resolve("services", 5, by_uuid=False, tenant_column="host")


# The service's own work in its cells: scatter_gather and run_in_cell ---------------------------------


def count_services(_cell, engine):
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT COUNT(*) FROM services").scalar()


def test_scatter_gather_answers_per_cell_in_order_and_names_the_cells_that_did_not(cells):
    helper = CellLookup(dict(cells, down=closed_port_url("mariadb")), cell_timeout=2)
    try:
        gathered = helper.scatter_gather(count_services)
        assert gathered.answers == {"c-sqlite": 3, "c-pg": 2, "c-maria": 3}
        assert list(gathered.answers) == ["c-sqlite", "c-pg", "c-maria"]
        assert gathered.unanswered == ["down"]
        only = helper.scatter_gather(lambda cell, engine: cell, cells=["c-maria", "c-pg"])
        assert (only.answers, only.unanswered) == ({"c-pg": "c-pg", "c-maria": "c-maria"}, [])
        with pytest.raises(KeyError, match="nowhere"):
            helper.scatter_gather(count_services, cells=["nowhere"])
        with pytest.raises(CellsUnavailable) as down:
            helper.run_in_cell("down", count_services)
        assert down.value.cells == ["down"]
        wait_idle(helper)
    finally:
        helper.close()


def test_run_in_cell_writes_and_a_failing_work_is_not_answering(cells, caplog):
    helper = CellLookup(cells, cell_timeout=3)

    def rename(_cell, engine):
        with engine.begin() as conn:
            return conn.exec_driver_sql("UPDATE services SET host = 'renamed' WHERE id = 5").rowcount

    def broken(_cell, engine):
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT * FROM no_such_table")

    try:
        assert helper.run_in_cell("c-maria", rename) == 1
        assert helper.resolve("services", 5, by_uuid=False).row["host"] == "renamed"
        with pytest.raises(CellsUnavailable):
            helper.run_in_cell("c-pg", broken)
        assert any("cell c-pg did not answer" in r.getMessage() for r in caplog.records)
        wait_idle(helper)
    finally:
        with helper.engines["c-maria"].begin() as conn:
            conn.exec_driver_sql("UPDATE services SET host = 'c-maria-5' WHERE id = 5")
        helper.close()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_cell_that_goes_silent_costs_its_timeout_not_a_hang(cells, backend):
    from tests.support.cells import BACKEND_OF, CellProxy

    (name,) = [cell for cell, kind in BACKEND_OF.items() if kind == backend]
    with CellProxy(cells[name]) as proxy:
        helper = CellLookup({"c-sqlite": cells["c-sqlite"], "flaky": proxy.url}, cell_timeout=0.5)
        try:
            assert helper.scatter_gather(count_services).unanswered == []
            proxy.go_silent()
            started = time.monotonic()
            gathered = helper.scatter_gather(count_services)
            with pytest.raises(CellsUnavailable):
                helper.run_in_cell("flaky", count_services)
            # Liveness, not speed: two waits of 0.5 s, nowhere near a hang.
            assert time.monotonic() - started < 4
            assert (gathered.answers, gathered.unanswered) == ({"c-sqlite": 3}, ["flaky"])
        finally:
            proxy.refuse()  # the threads still waiting on the silent cell get their error
            helper.close()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_cell_silent_for_a_while_rejoins_and_frees_every_thread(cells, backend):
    # psycopg2 has no read timeout: without the lookup cutting connections
    # past their deadline, the threads reading from a silent cell stay
    # blocked for good, the cell never rejoins, and close() never returns.
    from tests.support.cells import BACKEND_OF, CellProxy

    (name,) = [cell for cell, kind in BACKEND_OF.items() if kind == backend]
    with CellProxy(cells[name]) as proxy:
        helper = CellLookup({"flaky": proxy.url}, cell_timeout=0.5, pool_size=2)
        closed = threading.Thread(target=helper.close, daemon=True)
        try:
            assert helper.scatter_gather(count_services).unanswered == []
            proxy.go_silent()
            for _ in range(4):  # more lookups than the cell has threads
                assert helper.scatter_gather(count_services).unanswered == ["flaky"]
            proxy.resume()
            rejoined_by = time.monotonic() + 15  # liveness: the cut comes 1 s after each deadline
            while helper.scatter_gather(count_services).unanswered:
                assert time.monotonic() < rejoined_by, "the cell never rejoined: its threads stay blocked"
                time.sleep(0.2)
        finally:
            closed.start()
            closed.join(timeout=15)
        assert not closed.is_alive(), "close() waits on a thread blocked on the silent cell"


def test_scatter_gather_waits_longer_only_when_told(tmp_path):
    helper = CellLookup({"c1": "sqlite:///%s" % (tmp_path / "c1.sqlite")}, cell_timeout=0.2)

    def slow(_cell, engine):
        time.sleep(0.5)  # several statements' worth, each within cell_timeout
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT 1").scalar()

    try:
        assert helper.scatter_gather(slow).unanswered == ["c1"]
        wait_idle(helper)
        assert helper.scatter_gather(slow, timeout=5).answers == {"c1": 1}
    finally:
        helper.close()


def test_the_cut_never_touches_a_descriptor_that_names_another_connection_now():
    # A cell connection's descriptor, closed by its driver, may be given to
    # another socket (a WSGI client's): the lookup cuts only the very TCP
    # connection it noted when the cell's connection was made.
    from tenancy_mw.cells.lookup import _shut_down

    listener = socket.create_server(("127.0.0.1", 0))
    try:
        first = socket.create_connection(listener.getsockname())
        noted = (first.fileno(), first.getsockname(), first.getpeername())
        first.close()
        listener.accept()[0].close()
        second = socket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
        with second, peer:
            _shut_down(noted)  # the same number, perhaps; never the same connection
            second.sendall(b"still open")
            assert peer.recv(10) == b"still open"
            _shut_down((second.fileno(), second.getsockname(), second.getpeername()))
            assert peer.recv(10) == b""  # the noted connection itself is cut
    finally:
        listener.close()
