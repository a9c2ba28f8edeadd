"""Redirects of moved resources: the service's ``404`` under a moved resource's old path becomes a ``301``.

The service's answer is passed on untouched unless it starts with
``404``; only then is it held (read whole), the registry's moves looked
up, and a ``301`` with ``Location`` at the new place sent instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tenancy_mw.core.paths import PathRefused, canonical_path
from tenancy_mw.core.sql import error_summary, sa
from tenancy_mw.tenants.admin.answers import redirect, url
from tenancy_mw.tenants.admin.routes import tenant_index
from tenancy_mw.tenants.ids import TenantLayout, UnknownPathSegment
from tenancy_mw.tenants.registry import TenantRegistry

__all__ = ["moved_location", "serve_redirecting"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")


def serve_redirecting(application: Callable, environ: dict, start_response: Callable, where: Callable, tenant_id: str):
    """Pass the request on; a ``404`` is answered ``301`` when ``where(environ, tenant_id)`` finds the new place.

    *where* is called only for a 404 (no closure is made per request: this is every request's path).
    """
    held: list = []
    held_body: list = []
    deciding = [True]

    def capture(status, headers, exc_info=None):
        if deciding[0] and not held and status[:3] == "404":
            held.append((status, headers))
            return held_body.append
        return start_response(status, headers, exc_info)

    result = application(environ, capture)
    deciding[0] = False
    if not held:
        return result
    try:
        held_body.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    location = where(environ, tenant_id)
    if location:
        return redirect(environ, start_response, 301, location)
    start_response(*held[0])
    return [b"".join(held_body)]


def moved_location(
    registry: TenantRegistry, layout: TenantLayout, environ: dict, tenant_id: str, suffix: tuple[str, ...] = ()
) -> str | None:
    """Where the resource of this request's path now lives, or ``None`` if it never moved."""
    try:
        canonical = canonical_path(environ)
        index = tenant_index(environ, canonical, layout)
    except (PathRefused, UnknownPathSegment):
        return None
    if not 0 <= index < len(canonical.segments) or canonical.segments[index] != tenant_id:
        # No path tenant (the token's): its moves cannot be told from the URL.
        return None
    path = canonical.segments[index + 1 :]
    if suffix and path[-len(suffix) :] == suffix:
        path = path[: -len(suffix)]
    try:
        found = registry.find_move(tenant_id, path)
    except sa.exc.SQLAlchemyError as exc:
        LOG.warning("tenant_admin: could not look up moves of %r: %s", tenant_id, error_summary(exc))
        return None
    if found is None:
        return None
    record, remainder = found
    segments = canonical.segments[:index] + (record.dest_tenant,) + record.dest_path + remainder + suffix
    query = environ.get("QUERY_STRING", "")
    return url(environ, segments, canonical.trailing_slash and not suffix) + ("?" + query if query else "")
