"""``tenant_admin``'s 0.2 module path: the filter now lives in the package :mod:`tenancy_mw.tenants.admin`.

Every name this module had is handed on from there (the same objects);
import them from :mod:`tenancy_mw.tenants.admin`.

    >>> from tenancy_mw.tenants import admin
    >>> from tenancy_mw.tenants.admin_filter import TenantAdmin
    >>> TenantAdmin is admin.TenantAdmin
    True
"""

from __future__ import annotations

from tenancy_mw.tenants.admin import DISCOVERY_BODY_LIMIT as DISCOVERY_BODY_LIMIT
from tenancy_mw.tenants.admin import DISCOVERY_MEMBER as DISCOVERY_MEMBER
from tenancy_mw.tenants.admin import OPTS as OPTS
from tenancy_mw.tenants.admin import TenantAdmin, list_opts, parse_if_match, set_defaults

__all__ = ["TenantAdmin", "list_opts", "parse_if_match", "set_defaults"]
