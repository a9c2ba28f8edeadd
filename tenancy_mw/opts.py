"""Every tenancy_mw option, for ``oslo-config-generator``.

Each filter's options live in a group named after the filter (the
``[tenant_path]`` section of a config file); a paste ``[filter:...]``
section takes the same names.

Two kinds of ``oslo.config.opts`` namespace (entry points in setup.cfg):

- ``tenancy_mw``: every filter, :func:`list_opts` below;
- ``tenancy_mw.<filter>`` (``tenancy_mw.tenants.path_filter``, ...): one filter
  alone, the ``list_opts`` of that filter's module, so a service that uses
  one filter generates a sample holding only that filter's options::

      oslo-config-generator --namespace tenancy_mw.tenant_path

Both return copies of the options.
"""

from __future__ import annotations

from oslo_config import cfg

from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.idempotency.filter import Idempotency
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tenants.admin_filter import TenantAdmin
from tenancy_mw.tenants.path_filter import TenantPath

__all__ = ["FILTERS", "list_opts"]

#: The filter classes, in the order their groups appear in a sample config.
FILTERS: tuple[type[TenancyMiddleware], ...] = (
    TenantPath,
    AdminCull,
    IdResolver,
    TenantAdmin,
    Idempotency,
    TagQueryFilter,
)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Return ``[(group, [opts])]`` for every filter, as the generator expects.

    Example::

        >>> [group for group, _ in list_opts()]
        ['tenant_path', 'admin_cull', 'id_resolver', 'tenant_admin', 'idempotency', 'tag_query']
    """
    return [pair for cls in FILTERS for pair in cls.list_opts()]
