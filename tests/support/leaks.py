"""A pytest plugin: a test that leaves a SQLite connection unclosed fails, on every Python.

Python 3.13 warns (``ResourceWarning``) when an unclosed ``sqlite3``
connection is freed; older Pythons say nothing, and on any Python the
warning comes from the garbage collector as an "unraisable exception",
whenever the collector happens to run: in another test, or after the last
one.  So a leak did not reliably fail the test that made it.

Here (``-p tests.support.leaks`` in ``pyproject.toml``, so it covers the
doctests of the package, ``doc/`` and ``README.rst`` too), every
``sqlite3.connect`` (SQLAlchemy's SQLite dialect included) makes a
:class:`CheckedConnection`, which records the place that opened it and
notes, when freed, that it was never closed.  After each test's teardown
the collector runs (only when the test opened a connection or one is still
open, so the rest of the suite pays nothing; what survives a passing
test's collection is frozen, :func:`gc.freeze`, so the next one looks only
at newer objects, until the last test of a module or class, whose fixtures
end) and the test fails with an error naming where each leaked connection
was opened.  A leak found only after the last test, a SQLite connection or anything else that warns when
the collector frees it (a socket or file left in a reference cycle), fails
the run.
"""

from __future__ import annotations

import gc
import sqlite3
import sqlite3.dbapi2
import sys
import traceback
import warnings
import weakref

import pytest

__all__ = ["CheckedConnection", "LeakedConnections"]


class LeakedConnections(Exception):
    """A test left SQLite connections unclosed (each listed with where it was opened), or other leaks."""


#: Descriptions of connections freed without close(), since the last check.
_leaked: list[str] = []
#: Connections opened and not yet closed.
_open: weakref.WeakSet[CheckedConnection] = weakref.WeakSet()
_opened = 0
_opened_at_last_check = 0
#: The last test failed: the next check unfreezes first (its traceback was kept alive).
_unfreeze_next = False
_original_connect = sqlite3.connect
_NOT_THE_OPENER = (__file__, "/sqlalchemy/", "/_pytest/", "/pytest/", "/pluggy/", "<frozen ")


class CheckedConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that notes being freed without :meth:`close`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Where the test code opened it: the frames outside this file, SQLAlchemy and pytest.
        frames = [f for f in traceback.extract_stack() if not any(part in f.filename for part in _NOT_THE_OPENER)]
        self.opened_at = "".join(traceback.format_list(frames[-10:]))
        self.database = args[0] if args else kwargs.get("database")
        self.closed = False

    def close(self) -> None:
        """Close, as sqlite3 does, and remember that it was closed."""
        self.closed = True
        _open.discard(self)
        super().close()

    def __del__(self) -> None:
        if not self.closed:
            _leaked.append("SQLite connection to %r opened at:\n%s" % (self.database, self.opened_at))
            # Closed here, so Python 3.13's own ResourceWarning does not report it a second time.
            self.close()


def _connect(*args, **kwargs):
    global _opened
    kwargs.setdefault("factory", CheckedConnection)
    connection = _original_connect(*args, **kwargs)
    if isinstance(connection, CheckedConnection):
        _open.add(connection)
        _opened += 1
    return connection


def _leaks_since_last_check(freeze_survivors: bool = False) -> list[str]:
    """Collect garbage when a connection was opened or is open, and return (and forget) what leaked.

    *freeze_survivors*: leave what survives the collection out of later ones
    (:func:`gc.freeze`), until :func:`pytest_runtest_teardown` or the end
    of the session unfreezes it.
    """
    global _opened_at_last_check
    found: list[str] = []
    if _opened != _opened_at_last_check or len(_open):
        _opened_at_last_check = _opened
        # Under the test's warning filters (errors): what else this collection frees
        # with a warning (a socket, a file) is reported with the test, not the next one.
        found += _collect_garbage()
        if freeze_survivors:
            # Each test's collection then looks at that test's objects, not at the
            # whole suite's (0.8 s a test before).  A connection freed by its last
            # reference is still reported at once; one in a cycle with a frozen
            # object, at the next unfreeze.
            gc.freeze()
    found[:0] = _leaked
    del _leaked[:]
    return found


def _collect_garbage() -> list[str]:
    """Collect garbage; return the warnings and errors the freed objects' finalizers raised."""
    raised: list[str] = []

    def record(unraisable) -> None:
        raised.append("%s: %r" % (unraisable.exc_value, unraisable.object))

    previous = sys.unraisablehook
    sys.unraisablehook = record
    try:
        gc.collect()
    finally:
        sys.unraisablehook = previous
    return raised


def pytest_configure(config: pytest.Config) -> None:
    """Make every SQLite connection of this process a :class:`CheckedConnection`."""
    sqlite3.connect = sqlite3.dbapi2.connect = _connect


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give sqlite3 its own ``connect`` back."""
    sqlite3.connect = sqlite3.dbapi2.connect = _original_connect


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the test's own teardown: fail it when it leaked a SQLite connection."""
    global _unfreeze_next
    result = yield
    # pytest lets go of the test's fixture values only after this hook: now,
    # so a leak among them is freed, not frozen.
    if isinstance(getattr(item, "funcargs", None), dict):
        item.funcargs.clear()
    if _unfreeze_next or nextitem is None or nextitem.parent is not item.parent:
        # After a failed test (its traceback, held until the next test runs,
        # keeps its locals) or once a module's or class's fixtures are torn
        # down, what was frozen is looked at again, so a leak of theirs is
        # found now rather than at a later unfreeze.
        gc.unfreeze()
    failed = getattr(sys, "last_value", None) is not None
    _unfreeze_next = failed
    leaked = _leaks_since_last_check(freeze_survivors=not failed)
    if leaked:
        raise LeakedConnections("%d leak(s):\n%s" % (len(leaked), "\n".join(leaked)))
    return result


def _other_leaks_in_garbage() -> list[str]:
    """What the collector frees now that warns of a leak (a socket or file left in a reference cycle, say).

    pytest reports such a warning only while a test runs and only when
    something collects the garbage then; once the tests are done, nothing
    would fail the run.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        return _collect_garbage()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A leak seen only once every test is done (a session fixture's, a socket in a cycle) fails the run."""
    gc.unfreeze()
    leaked = _leaks_since_last_check()
    leaked += _other_leaks_in_garbage()
    if leaked:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("%d leak(s) found after the last test:\n%s" % (len(leaked), "\n".join(leaked)))
