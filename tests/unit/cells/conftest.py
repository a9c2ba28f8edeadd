"""What the cells' tests share: the three cell databases and a check that lookups are over."""

from __future__ import annotations

import time

import pytest

from tenancy_mw.cells.lookup import CellLookup
from tests.conftest import require
from tests.support import cells as cellsupport


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    """The three cells of tests.support.cells (SQLite, PostgreSQL, MariaDB): ``{name: URL}``."""
    yield from cellsupport.three_cells(require, tmp_path_factory.mktemp("cells"))


def wait_idle(lookup: CellLookup, timeout: float = 10.0) -> None:
    """Wait until every cell's lookups are over (they run on the cells' threads); check none holds a connection."""
    deadline = time.monotonic() + timeout
    for cell in lookup._cells:
        while cell.busy and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cell.busy == 0, "cell %s: %d lookups still running" % (cell.name, cell.busy)
    for name, engine in lookup.engines.items():
        checked_out = getattr(engine.pool, "checkedout", lambda: 0)()
        assert checked_out == 0, "cell %s: %d connections still checked out" % (name, checked_out)
