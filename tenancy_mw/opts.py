"""Every tenancy_mw option, for ``oslo-config-generator``.

Each filter's options live in a group named after the filter (the
``[tenant_path]`` section of a config file); a paste ``[filter:...]``
section takes the same names.

Two kinds of ``oslo.config.opts`` namespace (entry points in setup.cfg):

- ``tenancy_mw``: every filter, :func:`list_opts` below;
- ``tenancy_mw.<filter>`` (``tenancy_mw.tenant_path``, ...): one filter
  alone, the ``list_opts`` of that filter's package, so a service that uses
  one filter generates a sample holding only that filter's options::

      oslo-config-generator --namespace tenancy_mw.tenant_path

Both return copies of the options.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oslo_config import cfg

    from tenancy_mw.core.base import TenancyMiddleware

__all__ = ["FILTERS", "list_opts"]  # noqa: F822 - FILTERS comes from __getattr__, imported when named

#: The filter classes' names and modules, in the order their groups appear in a sample config.
_FILTER_CLASSES = (
    ("tenancy_mw.tenants.path_filter", "TenantPath"),
    ("tenancy_mw.cull.filter", "AdminCull"),
    ("tenancy_mw.cells.filter", "IdResolver"),
    ("tenancy_mw.tenants.admin.filter", "TenantAdmin"),
    ("tenancy_mw.idempotency.filter", "Idempotency"),
    ("tenancy_mw.tags.filter", "TagQueryFilter"),
)


#: Each filter's ``list_opts``, the target of its own namespace (setup.cfg), in the same order.
_NAMESPACE_LISTS = (
    "tenancy_mw.tenants.path_filter:list_opts",
    "tenancy_mw.cull.filter:list_opts",
    "tenancy_mw.cells.filter:list_opts",
    # Its options need no SQL, the filter does: the options module lists them on any install.
    "tenancy_mw.tenants.admin.options:list_opts",
    "tenancy_mw.idempotency:list_opts",
    "tenancy_mw.tags.filter:list_opts",
)


def _filters() -> tuple[type[TenancyMiddleware], ...]:
    # Imported when asked for, so importing this module needs no filter's dependencies.
    return tuple(getattr(importlib.import_module(module), name) for module, name in _FILTER_CLASSES)


def __getattr__(name: str) -> Any:
    """:data:`FILTERS`, the filter classes in sample order, imported when first named."""
    if name == "FILTERS":
        return _filters()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Return ``[(group, [opts])]`` for every filter, as the generator expects.

    Example::

        >>> [group for group, _ in list_opts()]
        ['tenant_path', 'admin_cull', 'id_resolver', 'tenant_admin', 'idempotency', 'tag_query']
    """
    return [pair for path in _NAMESPACE_LISTS for pair in _function(path)()]


def _function(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
