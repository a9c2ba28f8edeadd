"""``tenant_admin``: the tenants spec's admin API and the tenant-state check (:mod:`.admin.filter` tells all).

The filter's public names, from their modules: :class:`TenantAdmin`,
:func:`list_opts`, :func:`set_defaults` (:mod:`~tenancy_mw.tenants.admin.filter`),
:func:`parse_if_match` (:mod:`~tenancy_mw.tenants.admin.answers`), ``OPTS``
(:mod:`~tenancy_mw.tenants.admin.options`), ``DISCOVERY_MEMBER`` and
``DISCOVERY_BODY_LIMIT`` (:mod:`~tenancy_mw.tenants.admin.discovery`).
"""

from __future__ import annotations

import importlib
from typing import Any

#: The package's public names and the module of each, imported when first named: the
#: options module must import without the filter, which needs the ``sql`` extra.
_HOMES = {
    "DISCOVERY_BODY_LIMIT": "tenancy_mw.tenants.admin.discovery",
    "DISCOVERY_MEMBER": "tenancy_mw.tenants.admin.discovery",
    "OPTS": "tenancy_mw.tenants.admin.options",
    "TenantAdmin": "tenancy_mw.tenants.admin.filter",
    "list_opts": "tenancy_mw.tenants.admin.filter",
    "parse_if_match": "tenancy_mw.tenants.admin.answers",
    "set_defaults": "tenancy_mw.tenants.admin.filter",
}

__all__ = sorted(_HOMES)  # noqa: PLE0605 - the names come from __getattr__


def __getattr__(name: str) -> Any:
    """A public name of the filter, from its module (:data:`_HOMES`)."""
    if name not in _HOMES:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    return getattr(importlib.import_module(_HOMES[name]), name)
