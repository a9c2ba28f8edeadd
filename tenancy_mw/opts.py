"""Every tenancy_mw option, for ``oslo-config-generator --namespace tenancy_mw``.

Each filter's options live in a group named after the filter (the
``[tenant_path]`` section of a config file); a paste ``[filter:...]``
section takes the same names.
"""

from __future__ import annotations

from tenancy_mw.admin_cull import AdminCull
from tenancy_mw.id_resolver import IdResolver
from tenancy_mw.idempotency.filter import Idempotency
from tenancy_mw.tag_query import TagQueryFilter
from tenancy_mw.tenant_admin import TenantAdmin
from tenancy_mw.tenant_path import TenantPath

__all__ = ["FILTERS", "list_opts"]

#: The filter classes, in the order their groups appear in a sample config.
FILTERS = (TenantPath, AdminCull, IdResolver, TenantAdmin, Idempotency, TagQueryFilter)


def list_opts():
    """Return ``[(group, [opts])]`` for every filter, as the generator expects.

    Example::

        >>> [group for group, _ in list_opts()]
        ['tenant_path', 'admin_cull', 'id_resolver', 'tenant_admin', 'idempotency', 'tag_query']
    """
    return [(cls.opt_group, cls.all_opts()) for cls in FILTERS]
