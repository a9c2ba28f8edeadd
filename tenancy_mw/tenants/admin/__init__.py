"""``tenant_admin``: the tenants spec's admin API and the tenant-state check (:mod:`.admin.filter` tells all).

The filter's public names, from their modules: :class:`TenantAdmin`,
:func:`list_opts`, :func:`set_defaults` (:mod:`~tenancy_mw.tenants.admin.filter`),
:func:`parse_if_match` (:mod:`~tenancy_mw.tenants.admin.answers`), ``OPTS``
(:mod:`~tenancy_mw.tenants.admin.options`), ``DISCOVERY_MEMBER`` and
``DISCOVERY_BODY_LIMIT`` (:mod:`~tenancy_mw.tenants.admin.discovery`).
"""

from __future__ import annotations

from tenancy_mw.tenants.admin.answers import parse_if_match
from tenancy_mw.tenants.admin.discovery import DISCOVERY_BODY_LIMIT, DISCOVERY_MEMBER
from tenancy_mw.tenants.admin.filter import TenantAdmin, list_opts, set_defaults
from tenancy_mw.tenants.admin.options import OPTS

__all__ = [
    "DISCOVERY_BODY_LIMIT",
    "DISCOVERY_MEMBER",
    "OPTS",
    "TenantAdmin",
    "list_opts",
    "parse_if_match",
    "set_defaults",
]
