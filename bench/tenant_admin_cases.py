"""``make bench`` rows of ``tenant_admin``: the public pipeline's tenant-state check.

The public endpoint runs ``tenant_admin`` with ``admin_api = false`` after
``tenant_path``, which leaves the tenant id in ``environ``; what is left to
time is the state check.  Rows:

- *hit*: the tenant's state is in the worker's cache (the usual case: the
  cache keeps it ``cache_ttl`` seconds); goal: at most 1/3 of ``RequestId``.
- *miss*: ``cache_ttl = 0``, so every request reads the registry (a SQLite
  file here, one indexed primary-key read); no goal, it shows what the
  cache saves.
- *public pipeline*, without a goal: the whole public pipeline of the demo
  (``admin_cull``, ``tenant_path``, ``tenant_admin``) on a cache hit.
- *memcached*: ``state_memcached_servers`` set (a real memcached of this
  run, started by ``bench/idempotency_cases.py``; the row is left out when
  Debian's memcached is not installed): the state is in the cache, and each
  request asks memcached for the tenant's generation, one round trip.  No
  goal on time (a network round trip costs far more than a filter; the row
  makes a tenth of the requests, as the idempotency memcached rows); the
  round trips are the goal, :func:`report_lines`: 1 per request.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from io import BytesIO

from idempotency_cases import MEMCACHED, memcached_address

from tenancy_mw import migrations
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.admin_filter import TenantAdmin
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.registry import TenantRegistry

__all__ = ["cases", "report_lines"]


def _registry_url(tenant: str) -> str:
    """A migrated SQLite registry in a temporary folder (removed at exit) holding *tenant*."""
    folder = tempfile.mkdtemp(prefix="tenancy-bench-")
    atexit.register(shutil.rmtree, folder, True)
    url = "sqlite:///" + os.path.join(folder, "tenants.sqlite")
    migrations.upgrade(url, ["tenants"])
    registry = TenantRegistry(url)
    try:
        registry.put(tenant, {"tier": "gold"})
    finally:
        registry.close()
    return url


_registry = {}


def _public(tenant: str) -> dict:
    """The public endpoint's options: a registry holding *tenant* (made once), no admin API."""
    if "url" not in _registry:
        _registry["url"] = _registry_url(tenant)
    return {"connection": _registry["url"], "admin_api": "false"}


def _shared(tenant: str) -> dict:
    return dict(_public(tenant), state_memcached_servers=memcached_address())


def cases(Case, target, tenant: str, goal: float, has_tenant) -> list:
    """The rows, built with run.py's ``Case`` and ``target`` helpers."""
    public = _public(tenant)
    request = dict(target("/v2.1/%s/servers/detail?limit=20" % tenant), **{"tenancy.tenant_id": tenant})
    shared = []
    if os.access(MEMCACHED, os.X_OK):
        shared.append(
            Case(
                "tenant_admin memcached",
                "tenant_admin",
                lambda app: TenantAdmin(app, _shared(tenant)),
                request,
                reaches_app=has_tenant(tenant),
                share=0.1,
            )
        )
    return [
        Case(
            "tenant_admin hit",
            "tenant_admin",
            lambda app: TenantAdmin(app, public),
            request,
            goal=goal,
            reaches_app=has_tenant(tenant),
        ),
        Case(
            "tenant_admin miss",
            "tenant_admin miss",
            lambda app: TenantAdmin(app, dict(public, cache_ttl="0")),
            request,
            reaches_app=has_tenant(tenant),
        ),
        Case(
            "public pipeline",
            "pipeline",
            lambda app: AdminCull(TenantPath(TenantAdmin(app, public), {}), {}),
            target("/v2.1/%s/servers/detail?limit=20" % tenant),
            reaches_app=has_tenant(tenant),
        ),
        *shared,
    ]


def report_lines(base_environ: dict, target, tenant: str) -> list[str]:
    """The memcached round trips of a request on the public endpoint with ``state_memcached_servers``; goal: 1."""
    if not os.access(MEMCACHED, os.X_OK):
        return ["tenant_admin state round trips: %s is not installed; its row is left out" % MEMCACHED]
    admin = TenantAdmin(lambda environ, start_response: start_response("200 OK", []) or [], _shared(tenant))
    environ = dict(base_environ, **target("/v2.1/%s/servers" % tenant), **{"tenancy.tenant_id": tenant})
    counts = []
    for _ in range(3):  # the first may add the generation (two round trips); then the usual case
        before = admin.shared.round_trips
        b"".join(admin(dict(environ, **{"wsgi.input": BytesIO()}), lambda status, headers, exc_info=None: None))
        counts.append(admin.shared.round_trips - before)
    admin.close()
    verdict = "PASS" if counts[-1] == 1 else "MISS"
    return [
        "tenant_admin state round trips per request with state_memcached_servers (goal: 1): %d  %s"
        % (counts[-1], verdict)
    ]
