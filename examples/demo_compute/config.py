"""The demo's settings: ``examples/tenancy_mw_demo.conf``, read with oslo.config.

``api-paste.ini`` only wires the two pipelines; its ``[DEFAULT]`` names the
settings file for every section::

    [DEFAULT]
    oslo_config_project = tenancy_mw_demo
    oslo_config_file = %(here)s/tenancy_mw_demo.conf

Each tenancy_mw filter reads its own ``[group]`` of that file (its
``oslo_config_project`` support, :mod:`tenancy_mw.core.base`), and the app reads
``[demo_compute]`` (:data:`OPTS`) and, of ``[id_resolver]``, the ``cells``,
``cell_timeout``, ``pool_size`` and ``pool_recycle`` the ``id_resolver``
filter reads, so the two never disagree on the cells or how long one may
take to answer.

oslo.config's environment source overrides any value of the file:
``OS_<GROUP>__<OPTION>``, e.g. ``OS_DEMO_COMPUTE__DATABASE_URL`` or
``OS_TENANT_ADMIN__CONNECTION``; the tests point a demo at their own
databases that way.  A key in a paste section wins over both (the public
``tenant_admin``'s ``admin_api = false`` is the one the demo sets there).

``python -m demo_compute.config [FILE]`` (run from ``examples/``, as
``make demo`` does) creates the tables the filters need before the servers
start: the tenant registry (``[tenant_admin] connection``) and, with
``backend = sql``, the idempotency store (``[idempotency] connection``),
with tenancy_mw's migrations, as ``tenancy-mw-manage db upgrade`` would.

Relative SQLite paths are relative to the working folder (``examples/``
under ``make demo``), for the filters and the app alike.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from oslo_config import cfg

from tenancy_mw import migrations
from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.core.errors import ERROR_FORMATS
from tenancy_mw.core.paging import DEFAULT_MAX_LIMIT
from tenancy_mw.idempotency import Idempotency
from tenancy_mw.tenants.admin_filter import TenantAdmin

__all__ = ["CONFIG_FILE", "GROUP", "OPTS", "PROJECT", "list_opts", "load", "main", "prepare"]

#: The oslo.config project name of the demo (api-paste.ini's ``oslo_config_project``).
PROJECT = "tenancy_mw_demo"
#: The settings file shipped beside api-paste.ini.
CONFIG_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PROJECT + ".conf")
#: The app's own group.
GROUP = "demo_compute"
#: The app's own options.
OPTS = [
    cfg.StrOpt(
        "database_url",
        default="sqlite:///state/demo.sqlite",
        secret=True,
        help="SQLAlchemy URL of the database of the servers (and their tags); SQLite, PostgreSQL or MariaDB/MySQL.",
    ),
    cfg.StrOpt(
        "error_format",
        default="api-wg",
        choices=ERROR_FORMATS,
        help="Shape of the app's JSON errors (its tag API's too): api-wg, or nova's fault body, the only one "
        "python-novaclient and its nova command line can read. Set the same error_format in every filter's "
        "group, so the filters' errors have the app's shape.",
    ),
    cfg.IntOpt(
        "max_limit",
        default=DEFAULT_MAX_LIMIT,
        min=1,
        help="The most servers a page of the server list holds (nova's [api] max_limit): a larger limit is "
        "capped at it, a list without one is paged at it.",
    ),
]

# Options of the library's filters the demo itself reads: copies, registered
# in the demo's own ConfigOpts, so their names, types and defaults stay the
# library's.
_SHARED = {
    # The app reaches the cells as the filter does: the same cells, timeout and pool (demo_compute.cells).
    IdResolver: ("cells", "cell_timeout", "pool_size", "pool_recycle"),
    TenantAdmin: ("connection",),
    Idempotency: ("backend", "connection"),
}


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """``[(group, [opts])]`` of what :func:`load` registers (the app's own and the shared library options)."""
    found = [(GROUP, list(OPTS))]
    for filter_class, names in _SHARED.items():
        ((group, opts),) = filter_class.list_opts()
        found.append((group, [opt for opt in opts if opt.dest in names]))
    return found


def load(global_conf: Mapping[str, str] | None = None, config_file: str | None = None) -> cfg.ConfigOpts:
    """The demo's settings, from *config_file*, else paste's ``oslo_config_file``, else :data:`CONFIG_FILE`.

    The environment (``OS_<GROUP>__<OPTION>``) wins over the file.
    """
    global_conf = global_conf or {}
    path = config_file or global_conf.get("oslo_config_file") or CONFIG_FILE
    conf = cfg.ConfigOpts()
    for group, opts in list_opts():
        conf.register_opts(opts, group=group)
    conf(
        [],
        project=global_conf.get("oslo_config_project") or PROJECT,
        default_config_files=[path],
        validate_default_values=True,
    )
    return conf


def prepare(conf: cfg.ConfigOpts) -> list[str]:
    """Create (or upgrade) the tables of the tenant registry and of an sql idempotency store; the URLs done."""
    urls = [conf.tenant_admin.connection]
    if conf.idempotency.backend == "sql":
        urls.append(conf.idempotency.connection)
    migrations.upgrade(urls[0], ["tenants"])
    if len(urls) > 1:
        migrations.upgrade(urls[1], ["idempotency"])
    return urls


def main(argv: list[str] | None = None) -> int:
    """``python -m demo_compute.config [FILE]``: :func:`prepare` with the settings of FILE (or the shipped one)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m demo_compute.config [CONFIG_FILE]", file=sys.stderr)
        return 2
    prepare(load(config_file=args[0] if args else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
