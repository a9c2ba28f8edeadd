"""``make bench`` rows of ``tenant_admin``: the public pipeline's tenant-state check.

The public endpoint runs ``tenant_admin`` with ``admin_api = false`` after
``tenant_path``, which leaves the tenant id in ``environ``; what is left to
time is the state check.  Two rows:

- *hit*: the tenant's state is in the worker's cache (the usual case: the
  cache keeps it ``cache_ttl`` seconds); goal: at most 1/3 of ``RequestId``.
- *miss*: ``cache_ttl = 0``, so every request reads the registry (a SQLite
  file here, one indexed primary-key read); no goal, it shows what the
  cache saves.

A third row, without a goal, times the whole public pipeline of the demo
(``admin_cull``, ``tenant_path``, ``tenant_admin``) on a cache hit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from tenancy_mw import migrations
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.admin_filter import TenantAdmin
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.registry import TenantRegistry

__all__ = ["cases"]


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


def cases(Case, target, tenant: str, goal: float, has_tenant) -> list:
    """The rows, built with run.py's ``Case`` and ``target`` helpers."""
    url = _registry_url(tenant)
    public = {"connection": url, "admin_api": "false"}
    request = dict(target("/v2.1/%s/servers/detail?limit=20" % tenant), **{"tenancy.tenant_id": tenant})
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
    ]
