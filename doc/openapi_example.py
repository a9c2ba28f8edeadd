"""The example pipeline of ``doc/openapi.rst``: a compute service's admin endpoint, and its OpenAPI document.

``doc/conf.py`` renders :func:`document` into the page at build time, so
the page always shows what the code describes.

    >>> sorted(document()["paths"]["/compute/{version}/{tenant_id}"])  # the tenant admin API
    ['delete', 'get', 'head', 'put']
"""

from __future__ import annotations

from tenancy_mw.idempotency import Idempotency
from tenancy_mw.openapi import OPENAPI_VERSION, describe_pipeline, merge
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tenants.admin.filter import TenantAdmin
from tenancy_mw.tenants.moves import MoveProvider
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.removal import TenantRemoval


class ExampleMoves(MoveProvider, TenantRemoval):
    """A move provider (and tenant removal) in name only: describing a pipeline never calls it."""

    def __init__(self, application) -> None:
        self.application = application

    def resource_state(self, tenant_id, path):
        raise NotImplementedError

    def tenant_resources(self, tenant_id, list_limit):
        raise NotImplementedError

    def move_resource(self, tenant_id, path, dest_tenant_id):
        raise NotImplementedError

    def move_tenant(self, tenant_id, dest_tenant_id):
        raise NotImplementedError

    def hide_resources(self, tenant_id):
        raise NotImplementedError

    def restore_resources(self, tenant_id):
        raise NotImplementedError

    def purge_resources(self, tenant_id):
        raise NotImplementedError


def service(environ, start_response):
    """The compute service itself (never called here)."""
    start_response("204 No Content", [])
    return [b""]


def document() -> dict:
    """The service's document: its own part (here only ``info``) merged with the filters' fragment."""
    admin = TenantAdmin(
        Idempotency(TagQueryFilter(service, {}), {}),
        # No connection is made to describe the filter.
        {"connection": "sqlite://", "move_provider": "openapi_example:ExampleMoves"},
    )
    try:
        pipeline = TenantPath(admin, {})
        fragment = describe_pipeline(pipeline, tag_collections=("servers",), prefix="/compute")
    finally:
        admin.close()
    own = {"openapi": OPENAPI_VERSION, "info": {"title": "Compute API (admin endpoint)", "version": "2.1"}}
    return merge(own, fragment)
