"""The options of ``tenant_admin`` (group ``[tenant_admin]``, namespace ``tenancy_mw.tenant_admin``)."""

from __future__ import annotations

import copy
import sys
from typing import Any

from oslo_config import cfg

from tenancy_mw.core.base import COMMON_OPTS
from tenancy_mw.tenants.ids import tenant_layout_opts

__all__ = ["OPTS", "list_opts", "set_defaults"]

OPTS = [
    cfg.StrOpt(
        "connection",
        secret=True,
        help="SQLAlchemy URL of the tenant registry database (required), e.g. "
        "postgresql+psycopg2://svc@db/svc. Every pipeline and host of a service uses the same one. "
        "Create its tables with: tenancy-mw-manage db upgrade --url URL --component tenants.",
    ),
    cfg.BoolOpt(
        "admin_api",
        default=True,
        help="Answer the tenant admin calls (GET/HEAD/PUT/DELETE of /{version}/{tenant}, restore, moves). "
        "false on a public endpoint: only the tenant-state check runs.",
    ),
    cfg.BoolOpt(
        "check_tenant_state",
        default=True,
        help="Answer 404 to requests under an unknown tenant and 410 under a deleted one, before the service.",
    ),
    cfg.FloatOpt(
        "cache_ttl",
        default=5.0,
        min=0,
        help="Seconds a worker process keeps a tenant's state for the tenant-state check. Other workers "
        "and hosts see a change within this time: measured with 2 hosts x 4 gunicorn workers and the default 5, "
        "a DELETE was refused by every worker 4.5 s at worst after its 204, on SQLite, PostgreSQL and MariaDB "
        "registries (bench/seen_everywhere.py; doc/tenant_admin.rst has the table). With state_memcached_servers, "
        "on the next request (measured the same way: no request sent after the 204 was served). 0: read the "
        "registry on every request.",
    ),
    cfg.IntOpt("cache_size", default=10000, min=1, help="Most tenant ids a worker keeps in its state cache."),
    cfg.ListOpt(
        "state_memcached_servers",
        default=[],
        help="memcached servers as host:port, comma-separated, through which every worker and host sees a tenant's "
        "state change on its very next request: each request under a tenant asks memcached for the tenant's "
        "generation (one round trip), and each registry write that changes a state replaces it. Give the same list "
        "to every tenant_admin filter sharing the registry (admin and public endpoints, every host) and to "
        "'tenancy-mw-manage tenants purge --state-memcached-servers'. Keys are spread over the servers by "
        "consistent hashing, as idempotency's memcached_servers. Unset: changes are seen within cache_ttl.",
    ),
    cfg.FloatOpt(
        "state_store_timeout",
        default=1.0,
        min=0.01,
        help="Connect and read timeout of every call to state_memcached_servers, seconds.",
    ),
    cfg.StrOpt(
        "on_state_store_error",
        default="fail_closed",
        choices=[
            ("fail_closed", "answer 503 with Retry-After: 1; the service is not called"),
            (
                "fail_open",
                "check the tenant with this worker's cache, as without memcached (a change made "
                "elsewhere is seen within cache_ttl), with an error in the log",
            ),
        ],
        help="What a request under a tenant gets when the memcached server of its tenant's generation is down or "
        "slow (state_memcached_servers), as idempotency's on_store_error.",
    ),
    cfg.BoolOpt(
        "representations",
        default=True,
        help="Keep the JSON representation operators PUT and return it on GET (200). false: GET answers "
        "204 and a PUT on an existing tenant 409.",
    ),
    cfg.BoolOpt(
        "updatable",
        default=True,
        help="Let a PUT change an existing tenant's representation (202). false: 409 unless it is the same.",
    ),
    cfg.IntOpt(
        "max_body_bytes",
        default=65536,
        min=2,
        max=1048576,
        help="Largest tenant representation a PUT may send, in bytes (413 beyond).",
    ),
    cfg.BoolOpt(
        "version_discovery",
        default=False,
        help="On the admin API, GET of a tenant also carries the service's version document: the member "
        "'version' of what the service answers at /{version} (the tenant segment dropped) is added to the "
        "representation (200). For clients that discover versions by GETting their endpoint, "
        "/{version}/{tenant} (python-novaclient and its nova command line). A PUT may send that member "
        "back as GET showed it (it is not stored); any other 'version' member is refused (400).",
    ),
    cfg.StrOpt(
        "move_provider",
        help="The service's provider, as package.module:Name: a callable taking the wrapped WSGI app and "
        "returning a tenancy_mw.tenants.moves.MoveProvider (moves), a tenancy_mw.tenants.removal.TenantRemoval "
        "(a deleted tenant's resources hidden, restored, purged), or an object that is both. Unset: move URLs go "
        "to the service and tenants are removed from the registry only.",
    ),
    cfg.IntOpt(
        "move_list_limit",
        default=100,
        min=0,
        help="A tenant move action document lists the resources when there are at most this many; beyond, it "
        "carries one state tag for all of them.",
    ),
    cfg.BoolOpt(
        "redirect_moved",
        default=True,
        help="Answer 301, Location at the new place, when the service answers 404 under a moved resource's old path.",
    ),
    # In a pipeline with tenant_path, tenant_path's decision is followed; these decide without it.
    *tenant_layout_opts(),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of ``tenant_admin``'s options: the ``tenancy_mw.tenant_admin`` ``oslo.config.opts`` namespace.

    The filter needs the ``sql`` extra (its registry is a database); its
    options do not, so ``oslo-config-generator`` lists them on any install.
    Once the filter is imported, its own list is given, with whatever
    :func:`set_defaults` changed.

        >>> [(group, len(opts) > 10) for group, opts in list_opts()]
        [('tenant_admin', True)]
    """
    loaded = sys.modules.get("tenancy_mw.tenants.admin.filter")
    if loaded is not None:
        return loaded.TenantAdmin.list_opts()
    return [("tenant_admin", copy.deepcopy(list(COMMON_OPTS) + list(OPTS)))]


def set_defaults(**defaults: Any) -> None:
    """Change ``tenant_admin``'s defaults for the process (:func:`tenancy_mw.tenants.admin.filter.set_defaults`)."""
    from tenancy_mw.tenants.admin.filter import set_defaults as filter_set_defaults

    filter_set_defaults(**defaults)
