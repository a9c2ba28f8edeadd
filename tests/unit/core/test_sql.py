"""tenancy_mw.core.sql.is_retryable, on errors the three databases really raise.

Each test provokes the error with real connections (two where a race needs
two) and checks what a caller's retry loop would see.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from tenancy_mw.core import sql

SERVERS = ("postgresql", "mariadb")


def _engine_with_rows(url: str, **engine_args) -> tuple[sa.Engine, sa.Table]:
    metadata = sa.MetaData()
    table = sa.Table(
        "race",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n", sa.Integer, nullable=False),
        **sql.table_options(),
    )
    engine = sql.create_engine(url, **engine_args)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": 1, "n": 0}, {"id": 2, "n": 0}])
    return engine, table


def _bump(conn: sa.Connection, table: sa.Table, row: int) -> None:
    conn.execute(table.update().where(table.c.id == row).values(n=table.c.n + 1))


@pytest.mark.parametrize("backend", ("sqlite",) + SERVERS)
def test_a_duplicate_key_is_retryable_only_for_a_caller_that_races_inserts(make_database, backend):
    engine, table = _engine_with_rows(make_database(backend))
    try:
        with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as conn:
            conn.execute(table.insert().values(id=1, n=0))
        assert not sql.is_retryable(raised.value)
        assert sql.is_retryable(raised.value, duplicate_key=True)
        # The driver's own error is read the same way.
        assert sql.is_retryable(raised.value.orig, duplicate_key=True)
    finally:
        engine.dispose()


def test_sqlite_locked_database_is_not_retryable(make_database):
    # Writers queue on the busy timeout; with none, the second writer fails at once.
    engine, table = _engine_with_rows(make_database("sqlite"), connect_args={"timeout": 0})
    try:
        with engine.connect() as first, engine.connect() as second:
            # The caller's timeout stands (the engine's own default is SQLITE_BUSY_TIMEOUT).
            assert second.exec_driver_sql("PRAGMA busy_timeout").scalar() == 0
            first.exec_driver_sql("BEGIN IMMEDIATE")
            _bump(first, table, 1)
            with pytest.raises(sa.exc.OperationalError) as raised:
                second.exec_driver_sql("BEGIN IMMEDIATE")
            first.rollback()
        assert "locked" in str(raised.value)
        assert not sql.is_retryable(raised.value)
        assert not sql.is_retryable(raised.value, duplicate_key=True)
        # A background job that can wait (the uuid backfill) tries again.
        assert sql.is_retryable(raised.value, lock_wait=True)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("query", "connect_args", "milliseconds"),
    [
        ("", {}, sql.SQLITE_BUSY_TIMEOUT * 1000),
        ("?timeout=9", {}, 9000),
        ("", {"timeout": 2}, 2000),
    ],
)
def test_a_sqlite_writer_waits_the_busy_timeout_its_caller_gave(tmp_path, query, connect_args, milliseconds):
    engine = sql.create_engine("sqlite:///%s%s" % (tmp_path / "busy.sqlite", query), connect_args=connect_args)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == milliseconds
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", SERVERS)
def test_a_lock_not_had_in_time_is_retryable_for_a_job_that_can_wait(make_database, backend):
    # PostgreSQL's lock_timeout raises 55P03 (retryable only with lock_wait);
    # MariaDB's innodb_lock_wait_timeout raises 1205 (always retryable).
    engine, table = _engine_with_rows(make_database(backend))
    try:
        with engine.connect() as holder, engine.connect() as waiter:
            _bump(holder, table, 1)  # holds the row lock until rolled back
            if backend == "postgresql":
                waiter.exec_driver_sql("SET lock_timeout = '200ms'")
            else:
                waiter.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
            with pytest.raises(sa.exc.OperationalError) as raised:
                _bump(waiter, table, 1)
            waiter.rollback()
            holder.rollback()
        assert sql.is_retryable(raised.value, lock_wait=True)
        assert sql.is_retryable(raised.value) is (backend == "mariadb")
    finally:
        engine.dispose()


def test_an_error_that_is_not_a_race_is_not_retryable(sql_url):
    engine = sql.create_engine(sql_url)
    try:
        with pytest.raises(sa.exc.DBAPIError) as raised, engine.connect() as conn:
            conn.exec_driver_sql("SELECT * FROM no_such_table")
        assert not sql.is_retryable(raised.value)
        assert not sql.is_retryable(raised.value, duplicate_key=True)
    finally:
        engine.dispose()
    assert not sql.is_retryable(ValueError("not a database error"))


@pytest.mark.parametrize("backend", SERVERS)
def test_a_deadlock_victim_is_retryable(make_database, backend):
    engine, table = _engine_with_rows(make_database(backend))
    errors: list[BaseException] = []
    both_hold_one = threading.Barrier(2, timeout=30)

    def lock_then_wait(first: int, second: int) -> None:
        try:
            with engine.begin() as conn:
                _bump(conn, table, first)
                both_hold_one.wait()
                _bump(conn, table, second)
        except sa.exc.DBAPIError as exc:
            errors.append(exc)

    workers = [threading.Thread(target=lock_then_wait, args=rows) for rows in ((1, 2), (2, 1))]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
    finally:
        engine.dispose()
    assert len(errors) == 1, errors  # the server picks one victim; the other commits
    assert sql.is_retryable(errors[0])


def test_a_postgresql_serialization_failure_is_retryable(make_database):
    engine, table = _engine_with_rows(make_database("postgresql"))
    try:
        with engine.connect() as first, engine.connect() as second:
            first = first.execution_options(isolation_level="REPEATABLE READ")
            first.begin()
            first.execute(sa.select(table.c.n).where(table.c.id == 1)).scalar()  # takes the snapshot
            with second.begin():
                _bump(second, table, 1)
            with pytest.raises(sa.exc.OperationalError) as raised:
                _bump(first, table, 1)
            first.rollback()
        assert getattr(raised.value.orig, "pgcode", None) == "40001"
        assert sql.is_retryable(raised.value)
    finally:
        engine.dispose()


def test_a_mariadb_lock_wait_timeout_is_retryable(make_database):
    engine, table = _engine_with_rows(make_database("mariadb"))
    try:
        with engine.connect() as first, engine.connect() as second:
            first.begin()
            _bump(first, table, 1)
            second.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
            second.commit()  # ends the autobegun transaction; the setting stays
            second.begin()
            with pytest.raises(sa.exc.OperationalError) as raised:
                _bump(second, table, 1)
            second.rollback()
            first.rollback()
        assert raised.value.orig.args[0] == 1205
        assert sql.is_retryable(raised.value)
    finally:
        engine.dispose()
