"""``tenancy-mw-manage idempotency purge``: delete the expired rows of the ``sql`` store.

::

    tenancy-mw-manage idempotency purge --url postgresql+psycopg2://nova@db/nova
    purged 1234 expired idempotency records

The filter also purges now and then by itself (``purge_interval``); run
this from cron where no request comes for a long time, or to keep the
table small after a burst.
"""

from __future__ import annotations

import argparse

from tenancy_mw import manage  # first: without the sql extra, it names it
from tenancy_mw.core import sql

__all__ = ["register"]


def _purge(args: argparse.Namespace) -> int:
    from tenancy_mw.idempotency.sql_store import purge_expired

    url = manage.require_url(args)  # the shared check: a URL given, and well formed
    engine = sql.create_engine(url)
    try:
        # Without its table, manage.main says so and names db upgrade (needs_tables below).
        deleted = purge_expired(engine)
    finally:
        engine.dispose()
    print("purged %d expired idempotency record%s" % (deleted, "" if deleted == 1 else "s"))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``idempotency`` group to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("idempotency", help="maintain the idempotency filter's sql store")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
    purge = verbs.add_parser("purge", help="delete expired token records")
    manage.add_url_argument(purge)
    purge.set_defaults(func=_purge)
    manage.needs_tables(purge, "idempotency")
