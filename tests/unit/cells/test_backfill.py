"""``ids backfill``: every row ends with exactly one uuid, even with two backfills running at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

import pytest
import sqlalchemy as sa

from tenancy_mw import manage
from tenancy_mw.cells.backfill import backfill_table, backfill_uuids
from tests.support.cells import closed_port_url

MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")
ROWS = 1500


def make_services(url: str, rows: int = ROWS, with_uuid: set[int] = frozenset()) -> dict[int, str]:
    """A ``services`` table of *rows* rows, ids 1..rows, uuid only on *with_uuid*; returns those uuids."""
    metadata = sa.MetaData()
    table = sa.Table(
        "services",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("uuid", sa.String(36), nullable=True),
        sa.Column("host", sa.String(64)),
    )
    given = {ident: str(uuid.uuid4()) for ident in with_uuid}
    engine = sa.create_engine(url)
    try:
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(
                table.insert(), [{"id": i, "uuid": given.get(i), "host": "h%d" % i} for i in range(1, rows + 1)]
            )
    finally:
        engine.dispose()
    return given


def uuids_of(url: str) -> dict[int, str | None]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT id, uuid FROM services")).all())
    finally:
        engine.dispose()


def assert_one_uuid_each(url: str, rows: int = ROWS) -> dict[int, str]:
    found = uuids_of(url)
    assert len(found) == rows
    assert all(value is not None for value in found.values())
    for value in found.values():
        assert str(uuid.UUID(value)) == value  # canonical, lower case
    assert len(set(found.values())) == rows
    return found


def test_backfill_gives_every_row_one_uuid_and_keeps_existing_ones(sql_url):
    kept = make_services(sql_url, rows=250, with_uuid={1, 100, 250})
    (result,) = backfill_uuids({"cell1": sql_url}, "services", batch_size=40)
    assert (result.cell, result.updated, result.remaining, result.error) == ("cell1", 247, 0, None)
    found = assert_one_uuid_each(sql_url, rows=250)
    assert {ident: found[ident] for ident in kept} == kept
    # A second run finds nothing to do.
    (again,) = backfill_uuids({"cell1": sql_url}, "services")
    assert (again.updated, again.remaining) == (0, 0)
    assert uuids_of(sql_url) == found


@pytest.mark.parametrize("backend", ["postgresql", "mariadb", "sqlite"])
def test_two_backfills_at_once_give_each_row_exactly_one_uuid(make_database, backend):
    url = make_database(backend)
    make_services(url)
    barrier = threading.Barrier(2)
    counts, errors = [], []

    def run():
        engine = sa.create_engine(url)
        try:
            barrier.wait()
            counts.append(backfill_table(engine, "services", batch_size=25))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Each row was given a uuid by exactly one of the two: the updates add up to the rows.
    assert sum(updated for updated, _ in counts) == ROWS, counts
    assert [remaining for _, remaining in counts] == [0, 0]
    assert_one_uuid_each(url)


def test_two_commands_at_once_on_postgresql_and_mariadb_cells(make_database):
    pg, maria = make_database("postgresql"), make_database("mariadb")
    for url in (pg, maria):
        make_services(url)
    cells = "pg=%s, maria=%s" % (pg, maria)
    env = dict(os.environ)
    env.pop("TENANCY_MW_CELLS", None)
    command = [MANAGE, "ids", "backfill", "--cells", cells, "--table", "services", "--batch-size", "20"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    per_cell = {"pg": 0, "maria": 0}
    for stdout, _ in outputs:
        for line in stdout.splitlines():
            cell, _, rest = line.partition(": ")
            if cell in per_cell:
                assert rest.endswith(", 0 left without one"), line
                per_cell[cell] += int(rest.split()[0])
    assert per_cell == {"pg": ROWS, "maria": ROWS}, outputs
    assert_one_uuid_each(pg)
    assert_one_uuid_each(maria)


def test_command_reports_a_failing_cell_and_still_does_the_others(tmp_path):
    good = "sqlite:///%s" % (tmp_path / "good.sqlite")
    make_services(good, rows=30)
    env = dict(os.environ, TENANCY_MW_CELLS="good=%s, down=%s" % (good, closed_port_url("postgresql")))
    result = subprocess.run([MANAGE, "ids", "backfill", "--table", "services"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 1
    assert "good: 30 rows given a uuid, 0 left without one" in result.stdout
    assert "down: failed after giving 0 rows a uuid" in result.stdout
    assert "Traceback" not in result.stderr
    assert_one_uuid_each(good, rows=30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cells", "c1=sqlite://", "--table", "services; DROP TABLE x"], "not a table or column"),
        (["--cells", "c1", "--table", "services"], "name=URL"),
        (["--table", "services"], "no cells"),
    ],
)
def test_command_usage_errors_are_one_line(args, message, capsys, monkeypatch):
    # In process (manage.main), to spare three interpreter starts; the subprocess tests above cover the script.
    monkeypatch.delenv("TENANCY_MW_CELLS", raising=False)
    assert manage.main(["ids", "backfill", *args]) == 1
    stderr = capsys.readouterr().err
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_verb_module_is_registered():
    assert "tenancy_mw.cells.manage" in manage.VERB_MODULES
    assert manage.build_parser().parse_args(["ids", "backfill", "--cells", "a=sqlite://", "--table", "t"]).table == "t"
