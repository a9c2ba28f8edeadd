"""tenancy_mw: paste-deployable WSGI filters for multi-tenant OpenStack-style services.

A package per capability, each holding its filters, its pure parts, its
storage and its ``tenancy-mw-manage`` verbs, over one small core
(``doc/contributing.rst`` draws the house):

- :mod:`tenancy_mw.tenants`: ``tenant_path`` (:class:`TenantPath`, the
  tenant of a request: the path's segment or the token's project) and
  ``tenant_admin`` (:class:`TenantAdmin`, the tenant admin API and the
  tenant state check);
- :mod:`tenancy_mw.cull`: ``admin_cull`` (:class:`AdminCull`, admin calls
  kept off a public endpoint);
- :mod:`tenancy_mw.idempotency`: ``idempotency`` (:class:`Idempotency`, a
  retried ``POST`` with the same client token runs once);
- :mod:`tenancy_mw.tags`: ``tag_query`` (:class:`TagQueryFilter`, the tag
  query parameters checked and parsed for the service), the tag store and
  the tag API;
- :mod:`tenancy_mw.cells`: ``id_resolver`` (:class:`IdResolver`, uuids for
  database ids across cells, gated by microversion);
- :mod:`tenancy_mw.paste_deploy`: the recipe and checker of a service's
  ``api-paste.ini``;
- :mod:`tenancy_mw.openapi`: OpenAPI 3.1 descriptions of what the filters
  of a pipeline add to a service's API, for its API reference;
- :mod:`tenancy_mw.core`: the base class, errors, canonical paths, request
  bodies and SQL helpers every capability uses.

Each filter is a ``paste.filter_factory`` entry point (``use =
egg:tenancy_mw#NAME``) and a plain class::

    >>> from tenancy_mw import TenantPath
    >>> TenantPath.__module__
    'tenancy_mw.tenants.path_filter'

The six classes are imported on first use, so ``import tenancy_mw`` loads
nothing of SQLAlchemy or WSGI machinery.
"""

from tenancy_mw import _moved

__version__ = "0.2.0"

#: The six filter classes: name -> module that defines it.
FILTERS = {
    "TenantPath": "tenancy_mw.tenants.path_filter",
    "TenantAdmin": "tenancy_mw.tenants.admin.filter",
    "AdminCull": "tenancy_mw.cull.filter",
    "Idempotency": "tenancy_mw.idempotency.filter",
    "TagQueryFilter": "tenancy_mw.tags.filter",
    "IdResolver": "tenancy_mw.cells.filter",
}

__all__ = ["FILTERS", "__version__", *FILTERS]

_moved.install()


def __getattr__(name: str):
    """The filter classes of :data:`FILTERS`, imported when first named."""
    if name in FILTERS:
        import importlib

        return getattr(importlib.import_module(FILTERS[name]), name)
    raise AttributeError("module 'tenancy_mw' has no attribute %r" % name)
