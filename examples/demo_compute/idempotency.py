"""The demo's ``[filter:idempotency]``: tenancy_mw's ``idempotency`` filter, its store beside the servers.

A thin ``paste.filter_factory`` around
:class:`tenancy_mw.idempotency.Idempotency` (``egg:tenancy_mw#idempotency``)
that does two things only a demo needs:

- with ``backend = sql``, ``$TENANCY_DEMO_DATABASE_URL`` (the app's own
  override) wins over ``connection``, so the token store always lives in
  the same database as the servers it protects, and a relative SQLite path
  is taken relative to ``api-paste.ini``'s folder, as the app does;
- it creates the store's table at start with the library's migrations
  (``tenancy_mw.migrations.upgrade(url, ["idempotency"])``).  A real
  service runs ``tenancy-mw-manage db upgrade --url URL --component
  idempotency`` when it deploys instead.

Every other option goes to the filter unchanged: ``backend = memcached``
with ``memcached_servers`` switches the demo to memcached.
"""

from __future__ import annotations

import logging
import os
import time

import sqlalchemy as sa

from demo_compute.app import DATABASE_URL_ENV, DEFAULT_DATABASE_URL
from demo_compute.storage import absolute_sqlite_url
from tenancy_mw import migrations
from tenancy_mw.idempotency import Idempotency

__all__ = ["filter_factory"]

LOG = logging.getLogger(__name__)

# Every worker process runs the migration at start; the losers of that race
# get "already exists" errors and simply try again (then find it done).
_UPGRADE_ATTEMPTS = 5


def _upgrade(url: str) -> None:
    for attempt in range(1, _UPGRADE_ATTEMPTS + 1):
        try:
            migrations.upgrade(url, ["idempotency"])
            return
        except sa.exc.DBAPIError:
            if attempt == _UPGRADE_ATTEMPTS:
                raise
            time.sleep(0.2 * attempt)


def filter_factory(global_conf: dict, **local_conf: str):
    """``paste.filter_factory``: the idempotency filter with the demo's database (see the module doc)."""
    conf = dict(local_conf)
    if conf.get("backend") == "sql":
        here = global_conf.get("here") or os.getcwd()
        url = os.environ.get(DATABASE_URL_ENV) or conf.get("connection") or DEFAULT_DATABASE_URL
        url = absolute_sqlite_url(url, here).render_as_string(hide_password=False)
        _upgrade(url)
        conf["connection"] = url
        LOG.info("demo idempotency store: %s", sa.make_url(url).render_as_string(hide_password=True))
    return Idempotency.factory(global_conf, **conf)
