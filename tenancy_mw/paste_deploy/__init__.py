"""Deploying the filters in a service's ``api-paste.ini``: the recipe and the checker.

- :func:`add_filters` (``tenancy-mw-manage paste add``): adds the filters
  to nova's or cinder's own installed ``api-paste.ini``, in every pipeline
  that reaches the service's API, in the right place relative to
  ``authtoken`` and ``keystonecontext`` (:mod:`.recipe`);
- :func:`check` (``tenancy-mw-manage paste check``): reads any paste file
  and reports the routes that skip a filter another route to the same app
  runs (or run it with other options), a second stripping ``tenant_path``,
  the orders the filters know to be wrong and the options they would
  refuse (:mod:`.check`).

Both are text and :mod:`configparser` work: they import neither paste,
the service, nor SQLAlchemy, and open no store (the checker builds only
the filters that open nothing: :mod:`.filters`).  See
``doc/deploy-openstack.rst``.

    >>> from tenancy_mw.paste_deploy import add_filters, check
    >>> nova_like = '''
    ... [composite:osapi_compute]
    ... use = call:nova.api.openstack.urlmap:urlmap_factory
    ... /v2.1/+: api
    ... [composite:api]
    ... use = call:nova.api.auth:pipeline_factory_v21
    ... keystone = authtoken keystonecontext app
    ... [filter:authtoken]
    ... paste.filter_factory = keystonemiddleware.auth_token:filter_factory
    ... [filter:keystonecontext]
    ... paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory
    ... [app:app]
    ... paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory
    ... '''
    >>> [str(finding) for finding in check(add_filters(nova_like, "nova"))]
    []
"""

from __future__ import annotations

from tenancy_mw.paste_deploy.check import FINDING_KINDS, Finding, check
from tenancy_mw.paste_deploy.ini import PasteFileError
from tenancy_mw.paste_deploy.recipe import RECIPES, RecipeError, SettingError, add_filters, parse_settings

__all__ = [
    "FINDING_KINDS",
    "RECIPES",
    "Finding",
    "PasteFileError",
    "RecipeError",
    "SettingError",
    "add_filters",
    "check",
    "parse_settings",
]
