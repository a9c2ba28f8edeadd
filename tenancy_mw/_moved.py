"""The module paths of tenancy_mw 0.1 that moved in 0.2.0, kept importable for one release.

Importing an old path gives the new module itself (the same object, every
name of it) and a :class:`DeprecationWarning` that names the new path.
The old paths go in 0.3.0.  ``tenancy_mw.tags``, once the tag model, is
now the tags package: its old names are handed on by that package.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     from tenancy_mw.tenant_ids import validate_tenant_id
    >>> validate_tenant_id.__module__
    'tenancy_mw.tenants.ids'
    >>> print(caught[0].message)
    tenancy_mw.tenant_ids moved to tenancy_mw.tenants.ids in tenancy_mw 0.2.0; import it from there
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

__all__ = ["MOVED", "install", "warn_moved"]

#: Old module path -> new module path, for every module that moved in 0.2.0.
MOVED = {
    "tenancy_mw.base": "tenancy_mw.core.base",
    "tenancy_mw.errors": "tenancy_mw.core.errors",
    "tenancy_mw.paths": "tenancy_mw.core.paths",
    "tenancy_mw.json_body": "tenancy_mw.core.bodies",
    "tenancy_mw.sql": "tenancy_mw.core.sql",
    "tenancy_mw.tenant_ids": "tenancy_mw.tenants.ids",
    "tenancy_mw.tenant_path": "tenancy_mw.tenants.path_filter",
    "tenancy_mw.tenant_registry": "tenancy_mw.tenants.registry",
    "tenancy_mw.manage_tenants": "tenancy_mw.tenants.manage",
    "tenancy_mw.moves": "tenancy_mw.tenants.moves",
    "tenancy_mw.tenant_admin": "tenancy_mw.tenants.admin",
    "tenancy_mw.admin_cull": "tenancy_mw.cull.filter",
    "tenancy_mw.cull_rules": "tenancy_mw.cull.rules",
    "tenancy_mw.overrides": "tenancy_mw.cull.overrides",
    "tenancy_mw.tag_query": "tenancy_mw.tags.filter",
    "tenancy_mw.tag_store": "tenancy_mw.tags.store",
    "tenancy_mw.tag_api": "tenancy_mw.tags.api",
    "tenancy_mw.cell_ids": "tenancy_mw.cells.ids",
    "tenancy_mw.cell_lookup": "tenancy_mw.cells.lookup",
    "tenancy_mw.id_resolver": "tenancy_mw.cells.filter",
    "tenancy_mw.uuid_backfill": "tenancy_mw.cells.backfill",
}


def warn_moved(old: str, new: str) -> None:
    """Warn that *old* (a module path or a name) moved to *new*."""
    warnings.warn(
        "%s moved to %s in tenancy_mw 0.2.0; import it from there" % (old, new),
        DeprecationWarning,
        stacklevel=3,
    )


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED` (after every real finder) and loads each as its new module."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # The import system hands on what sys.modules holds once this returns: the new module.
        warn_moved(module.__name__, MOVED[module.__name__])
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


def install() -> None:
    """Put the finder of the old paths at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
