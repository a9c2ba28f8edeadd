"""``tenancy-mw-manage``: the library's one maintenance command.

Verbs, as ``tenancy-mw-manage GROUP VERB [options]``, one group or more per
capability, each defined in that capability's ``manage`` module:

``db upgrade|downgrade|current|components``
    Create and migrate the tables of every capability
    (:mod:`tenancy_mw.core.manage`).
``tenants purge|show``
    The tenant registry (:mod:`tenancy_mw.tenants.manage`).
``idempotency purge``
    The idempotency filter's SQL store (:mod:`tenancy_mw.idempotency.manage`).
``ids backfill``
    Uuids for the rows of every cell (:mod:`tenancy_mw.cells.manage`).
``paste add --service nova|cinder PASTE_FILE`` and ``paste check PASTE_FILE``
    Add the filters to a service's ``api-paste.ini``, and check a paste
    file (:mod:`tenancy_mw.paste_deploy.manage`).

This module holds no verb: it finds them.  Each module named in
:data:`VERB_MODULES` (``tenancy_mw.<capability>.manage``) has a
``register(subparsers)`` function that adds its group to the parser and
sets ``func`` on each verb, a callable taking the parsed arguments and
returning the exit status.  A new capability with verbs adds its
``manage`` module to :data:`VERB_MODULES`.

``--url`` may be left out when ``$TENANCY_MW_DATABASE_URL`` is set.  The
command exits 0 on success, 1 when the work failed (a database that cannot
be reached, say), 2 on a usage error; errors are one line on standard
error, never a traceback.  A verb run on a database without the library's
tables says so and names the ``db upgrade`` command that creates them,
with the ``--component`` the verb needs (:func:`needs_tables`), whatever
the database: this module catches that error for every verb.

The database verbs need the ``sql`` extra (SQLAlchemy, alembic), imported
when one runs; without it they say which extra to install.  The ``paste``
verbs run without it.

From Python::

    >>> import contextlib, io
    >>> from tenancy_mw.manage import main
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     status = main(["db", "components"])
    >>> status, {"tags", "tenants", "idempotency"} <= set(out.getvalue().split())
    (0, True)
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shlex
import sys
from collections.abc import Sequence

from tenancy_mw.extras import MissingExtra

__all__ = [
    "DATABASE_URL_ENV",
    "VERB_MODULES",
    "CommandError",
    "add_url_argument",
    "build_parser",
    "main",
    "needs_tables",
    "require_url",
]

#: Environment variable read when ``--url`` is not given.
DATABASE_URL_ENV = "TENANCY_MW_DATABASE_URL"

#: The ``manage`` module of each capability that has verbs, in ``--help`` order: each has
#: ``register(subparsers)``.  A capability's verbs live there and nowhere else
#: (tests/project/test_house.py checks it).
VERB_MODULES: tuple[str, ...] = (
    "tenancy_mw.core.manage",
    "tenancy_mw.tenants.manage",
    "tenancy_mw.idempotency.manage",
    "tenancy_mw.cells.manage",
    "tenancy_mw.cull.manage",
    "tenancy_mw.paste_deploy.manage",
)


class CommandError(Exception):
    """A failure to report in one line and exit 1 (raised by any verb)."""


def add_url_argument(parser: argparse.ArgumentParser) -> None:
    """Add the ``--url`` option every database verb takes."""
    parser.add_argument(
        "--url",
        default=os.environ.get(DATABASE_URL_ENV),
        help="SQLAlchemy URL of the database (default: $%s)" % DATABASE_URL_ENV,
    )


def require_url(args: argparse.Namespace) -> str:
    """The ``--url`` of a database verb, checked: given (or from the environment) and a SQLAlchemy URL."""
    from tenancy_mw.core.sql import sa

    if not args.url:
        raise CommandError("no database: give --url URL or set $%s" % DATABASE_URL_ENV)
    try:
        sa.engine.make_url(args.url)
    except sa.exc.ArgumentError as exc:
        raise CommandError("--url %r is not a SQLAlchemy URL: %s" % (args.url, exc)) from None
    return args.url


def needs_tables(parser: argparse.ArgumentParser, component: str) -> None:
    """Declare that the verb of *parser* works on the tables of migration *component* (``tenants``, ...).

    On a database without them, the verb fails in one line naming
    ``tenancy-mw-manage db upgrade --url URL --component COMPONENT``; the
    missing table is recognised once, for every verb, by :func:`main`
    (:func:`tenancy_mw.core.sql.missing_table`).
    """
    parser.set_defaults(tables_of=component)


#: The name the verb modules used before :func:`require_url` was public; it stays.
_require_url = require_url


def _verb_modules() -> tuple[list, dict[str, MissingExtra]]:
    """The modules of :data:`VERB_MODULES` that import here, and the error of each that needs a missing extra."""
    loaded, missing = [], {}
    for module_name in VERB_MODULES:
        try:
            loaded.append(importlib.import_module(module_name))
        except MissingExtra as exc:
            missing[module_name] = exc
    return loaded, missing


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser, with every group of :data:`VERB_MODULES` that can be imported here."""
    parser = argparse.ArgumentParser(
        prog="tenancy-mw-manage", description="Maintain the tables of tenancy_mw's filters and check their deployment."
    )
    subparsers = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    for module in _verb_modules()[0]:
        module.register(subparsers)
    return parser


def _failure_status(exc: Exception, args: argparse.Namespace) -> int | None:
    """Report a known failure of the verb *args* ran in one line and return the exit status; None for anything else."""
    # The SQL modules are imported only by the verbs that use them: look for them, never import them here.
    migrations = sys.modules.get("tenancy_mw.migrations")
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    if isinstance(exc, CommandError) or (migrations and isinstance(exc, migrations.MigrationError)):
        print("tenancy-mw-manage: %s" % exc, file=sys.stderr)
        return 1 if isinstance(exc, CommandError) else 2
    if sqlalchemy_exc and isinstance(exc, sqlalchemy_exc.SQLAlchemyError):
        from tenancy_mw.core import sql

        table = sql.missing_table(exc)
        if table is not None:
            print("tenancy-mw-manage: %s" % _missing_tables(table, args), file=sys.stderr)
            return 1
        # One line: the database's own message, without SQLAlchemy's traceback.
        print("tenancy-mw-manage: database error: %s" % sql.error_summary(exc), file=sys.stderr)
        return 1
    if isinstance(exc, (OSError, MissingExtra)):
        # A SQLite file whose folder cannot be made or read; a verb run without its extra.
        print("tenancy-mw-manage: %s" % exc, file=sys.stderr)
        return 1
    return None


def _missing_tables(table: str, args: argparse.Namespace) -> str:
    """What a verb that found *table* missing says: the library's tables are not there, and what makes them."""
    from tenancy_mw.core.sql import sa

    given = sa.engine.make_url(args.url)
    # Shown as given, to copy, but never a password.
    url = given.render_as_string(hide_password=bool(given.password))
    component = getattr(args, "tables_of", None)
    command = "tenancy-mw-manage db upgrade --url %s" % shlex.quote(url)
    if component:
        command += " --component %s" % component
    missing = "has no table %s" % table if table else "lacks a table"
    return "the database %s: tenancy_mw's tables are not there (or not up to date); create them with: %s" % (
        missing,
        command,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with *argv* (default: ``sys.argv[1:]``); return the exit status."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    missing = _verb_modules()[1]
    if missing and argv and not argv[0].startswith("-") and argv[0] not in _groups(parser):
        # The group may be one whose module needs an extra: say which, rather than "invalid choice".
        first = next(iter(missing.values()))
        print("tenancy-mw-manage: unknown group %r; some groups need an extra: %s" % (argv[0], first), file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        status = _failure_status(exc, args)
        if status is None:
            raise
        return status


def _groups(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


if __name__ == "__main__":  # pragma: no cover
    # Run as ``python -m tenancy_mw.manage``, this module is __main__ and the
    # verbs raise tenancy_mw.manage's CommandError, another class: run that module's main.
    from tenancy_mw.manage import main as _main

    sys.exit(_main())
