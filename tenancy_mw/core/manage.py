"""``tenancy-mw-manage db ...``: create and migrate the tables of every capability.

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

The group registers without the ``sql`` extra; each verb imports
:mod:`tenancy_mw.migrations` when it runs, so without the extra it says
which one to install.
"""

from __future__ import annotations

import argparse

from tenancy_mw import manage

__all__ = ["register"]


def _db_upgrade(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    url = manage.require_url(args)
    done = migrations.upgrade(url, args.component or None, sql_only=args.sql)
    if not args.sql:
        print("upgraded: %s" % (", ".join(done) or "(no components)"))
    return 0


def _db_downgrade(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    migrations.downgrade(manage.require_url(args), args.component, args.revision)
    print("downgraded %s to %s" % (args.component, args.revision))
    return 0


def _db_current(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    found = migrations.current(manage.require_url(args))
    for name in migrations.components():
        print("%s: %s" % (name, found.get(name, "(not applied)")))
    return 0


def _db_components(args: argparse.Namespace) -> int:
    from tenancy_mw import migrations

    for name in migrations.components():
        print(name)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``db`` group to ``tenancy-mw-manage``."""
    db = subparsers.add_parser("db", help="create and migrate the library's tables")
    verbs = db.add_subparsers(dest="verb", required=True, metavar="VERB")

    upgrade = verbs.add_parser("upgrade", help="apply migrations (all components, or those named)")
    manage.add_url_argument(upgrade)
    upgrade.add_argument("--component", action="append", help="a component to upgrade; repeat for several")
    upgrade.add_argument("--sql", action="store_true", help="print the SQL instead of running it")
    upgrade.set_defaults(func=_db_upgrade)

    downgrade = verbs.add_parser("downgrade", help="take one component back")
    manage.add_url_argument(downgrade)
    downgrade.add_argument("--component", required=True)
    downgrade.add_argument("--revision", default="base", help="target revision (default: base, no tables)")
    downgrade.set_defaults(func=_db_downgrade)

    current = verbs.add_parser("current", help="the revision of each component")
    manage.add_url_argument(current)
    current.set_defaults(func=_db_current)

    listing = verbs.add_parser("components", help="the components that ship migrations")
    listing.set_defaults(func=_db_components)
