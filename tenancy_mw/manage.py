"""``tenancy-mw-manage``: the library's one maintenance command.

Verbs, as ``tenancy-mw-manage GROUP VERB [options]``:

``db upgrade --url URL [--component NAME ...] [--sql]``
    Create or migrate the tables of the library's components (all of them,
    or those named) with Alembic (:mod:`tenancy_mw.migrations`).  ``--sql``
    prints the SQL instead of running it.
``db downgrade --url URL --component NAME [--revision REV]``
    Take one component back (to ``base`` by default: drop its tables).
``db current --url URL``
    The revision each applied component is at.
``db components``
    The components that ship migrations.
``paste add --service nova|cinder PASTE_FILE`` and ``paste check PASTE_FILE``
    Add the filters to a service's ``api-paste.ini``, and check a paste
    file (:mod:`tenancy_mw.paste_deploy.manage`).

Components add their own groups (``tenants purge``, ``idempotency purge``,
``ids backfill``, ...): each module named in :data:`VERB_MODULES` has a
``register(subparsers)`` function that adds its group to the parser and
sets ``func`` on each verb, a callable taking the parsed arguments and
returning the exit status.

``--url`` may be left out when ``$TENANCY_MW_DATABASE_URL`` is set.  The
command exits 0 on success, 1 when the work failed (a database that cannot
be reached, say), 2 on a usage error; errors are one line on standard
error, never a traceback.

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
import sys
from collections.abc import Sequence

from tenancy_mw.extras import MissingExtra

__all__ = ["DATABASE_URL_ENV", "VERB_MODULES", "CommandError", "add_url_argument", "build_parser", "main"]

#: Environment variable read when ``--url`` is not given.
DATABASE_URL_ENV = "TENANCY_MW_DATABASE_URL"

#: Modules that add verb groups to the command (each has ``register(subparsers)``).
VERB_MODULES: tuple[str, ...] = (
    "tenancy_mw.cells.backfill",
    "tenancy_mw.tenants.manage",
    "tenancy_mw.idempotency.manage",
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


def _require_url(args: argparse.Namespace) -> str:
    from tenancy_mw.core.sql import sa

    if not args.url:
        raise CommandError("no database: give --url URL or set $%s" % DATABASE_URL_ENV)
    try:
        sa.engine.make_url(args.url)
    except sa.exc.ArgumentError as exc:
        raise CommandError("--url %r is not a SQLAlchemy URL: %s" % (args.url, exc)) from None
    return args.url


def _db_upgrade(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    url = _require_url(args)
    done = migrations.upgrade(url, args.component or None, sql_only=args.sql)
    if not args.sql:
        print("upgraded: %s" % (", ".join(done) or "(no components)"))
    return 0


def _db_downgrade(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    migrations.downgrade(_require_url(args), args.component, args.revision)
    print("downgraded %s to %s" % (args.component, args.revision))
    return 0


def _db_current(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    found = migrations.current(_require_url(args))
    for name in migrations.components():
        print("%s: %s" % (name, found.get(name, "(not applied)")))
    return 0


def _db_components(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    for name in migrations.components():
        print(name)
    return 0


def _register_db(subparsers: argparse._SubParsersAction) -> None:
    db = subparsers.add_parser("db", help="create and migrate the library's tables")
    verbs = db.add_subparsers(dest="verb", required=True, metavar="VERB")

    upgrade = verbs.add_parser("upgrade", help="apply migrations (all components, or those named)")
    add_url_argument(upgrade)
    upgrade.add_argument("--component", action="append", help="a component to upgrade; repeat for several")
    upgrade.add_argument("--sql", action="store_true", help="print the SQL instead of running it")
    upgrade.set_defaults(func=_db_upgrade)

    downgrade = verbs.add_parser("downgrade", help="take one component back")
    add_url_argument(downgrade)
    downgrade.add_argument("--component", required=True)
    downgrade.add_argument("--revision", default="base", help="target revision (default: base, no tables)")
    downgrade.set_defaults(func=_db_downgrade)

    current = verbs.add_parser("current", help="the revision of each component")
    add_url_argument(current)
    current.set_defaults(func=_db_current)

    listing = verbs.add_parser("components", help="the components that ship migrations")
    listing.set_defaults(func=_db_components)


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
    _register_db(subparsers)
    for module in _verb_modules()[0]:
        module.register(subparsers)
    return parser


def _failure_status(exc: Exception) -> int | None:
    """Report a known failure in one line and return the exit status; None for anything else."""
    # The SQL modules are imported only by the verbs that use them: look for them, never import them here.
    migrations = sys.modules.get("tenancy_mw.migrations")
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    if isinstance(exc, CommandError) or (migrations and isinstance(exc, migrations.MigrationError)):
        print("tenancy-mw-manage: %s" % exc, file=sys.stderr)
        return 1 if isinstance(exc, CommandError) else 2
    if sqlalchemy_exc and isinstance(exc, sqlalchemy_exc.SQLAlchemyError):
        from tenancy_mw.core import sql

        # One line: the database's own message, without SQLAlchemy's traceback.
        print("tenancy-mw-manage: database error: %s" % sql.error_summary(exc), file=sys.stderr)
        return 1
    if isinstance(exc, (OSError, MissingExtra)):
        # A SQLite file whose folder cannot be made or read; a verb run without its extra.
        print("tenancy-mw-manage: %s" % exc, file=sys.stderr)
        return 1
    return None


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
        status = _failure_status(exc)
        if status is None:
            raise
        return status


def _groups(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
