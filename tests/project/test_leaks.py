"""An unclosed SQLite connection fails the test that left it, on every Python (tests/support/leaks.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LEAKY_TESTS = """
import socket
import sqlite3

import pytest
import sqlalchemy as sa

def test_closes(tmp_path):
    connection = sqlite3.connect(tmp_path / "a.sqlite")
    connection.close()
    engine = sa.create_engine("sqlite:///%s" % (tmp_path / "b.sqlite"))
    with engine.connect():
        pass
    engine.dispose()


def test_with_block_does_not_close(tmp_path):
    with sqlite3.connect(tmp_path / "c.sqlite") as connection:
        connection.execute("select 1")


def test_engine_never_disposed(tmp_path):
    engine = sa.create_engine("sqlite:///%s" % (tmp_path / "d.sqlite"))
    with engine.connect():
        pass


def test_cycle_freed_later(tmp_path):
    holder = {"connection": sqlite3.connect(tmp_path / "e.sqlite"), "socket": socket.socket()}
    holder["self"] = holder


@pytest.fixture
def engine_left_open(tmp_path):
    engine = sa.create_engine("sqlite:///%s" % (tmp_path / "g.sqlite"))
    with engine.connect():
        pass
    return engine


def test_function_fixture_leaks(engine_left_open):
    pass


def test_fails_holding_a_connection(tmp_path):
    connection = sqlite3.connect(tmp_path / "h.sqlite")
    assert connection is None


def test_after_the_failure():
    pass


@pytest.fixture(scope="module")
def module_connection(tmp_path_factory):
    yield sqlite3.connect(tmp_path_factory.mktemp("s") / "f.sqlite")


def test_module_fixture_leaks(module_connection):
    module_connection.execute("select 1")


def test_after_the_leaks():
    pass
"""

# A file of its own, run after LEAKY_TESTS: no SQLite there, so nothing collects the garbage until the end.
SOCKET_TESTS = """
import socket


def test_a_socket_in_a_cycle():
    holder = {"socket": socket.socket()}
    holder["self"] = holder
"""


def test_each_leak_fails_its_own_test(tmp_path):
    (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS)
    (tmp_path / "test_leaky_sockets.py").write_text(SOCKET_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.leaks", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    out = result.stdout
    assert result.returncode == 1, out[-3000:]
    assert "PASSED test_leaky.py::test_closes" in out, out[-3000:]
    for leaky in ("test_with_block_does_not_close", "test_engine_never_disposed", "test_cycle_freed_later"):
        assert "ERROR at teardown of %s" % leaky in out, out[-3000:]
    # The report names where each leaked connection was opened.
    assert "c.sqlite" in out
    opened = LEAKY_TESTS.splitlines().index('    with sqlite3.connect(tmp_path / "c.sqlite") as connection:') + 1
    assert 'test_leaky.py", line %d, in test_with_block_does_not_close' % opened in out, out[-3000:]
    # What else the collection frees with a warning is reported with the same test, not the next one.
    cycle = out.split("ERROR at teardown of test_cycle_freed_later")[1].split("ERROR at")[0]
    assert "e.sqlite" in cycle, out[-3000:]
    assert "unclosed <socket.socket" in cycle, out[-3000:]
    # A function fixture's leak is its test's; a failed test's, held by its traceback until the next test
    # runs, the next test's.
    fixture = out.split("ERROR at teardown of test_function_fixture_leaks")[1].split("ERROR at")[0]
    assert "g.sqlite" in fixture, out[-3000:]
    assert "FAILED test_leaky.py::test_fails_holding_a_connection" in out, out[-3000:]
    after_failure = out.split("ERROR at teardown of test_after_the_failure")[1].split("ERROR at")[0]
    assert "h.sqlite" in after_failure, out[-3000:]
    # The module fixture's connection is freed after the module's last test, which reports it.
    last = out.split("ERROR at teardown of test_after_the_leaks")[1]
    assert "f.sqlite" in last, out[-3000:]
    assert "PASSED test_leaky.py::test_after_the_leaks" in out, out[-3000:]
    # A socket in a reference cycle warns only when the collector runs: after the last test, failing the run.
    assert "PASSED test_leaky_sockets.py::test_a_socket_in_a_cycle" in out, out[-3000:]
    assert "1 leak(s) found after the last test:\nunclosed <socket.socket" in out, out[-3000:]
