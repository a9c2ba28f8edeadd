"""The tenant calls: ``GET``/``HEAD``/``PUT``/``DELETE`` of ``/{v}/{t}`` and ``POST .../action/restore``.

Each handler takes the filter, the request and its
:class:`~tenancy_mw.tenants.admin.routes.Target`; it answers, or raises an
:class:`.Refusal`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import shorten
from tenancy_mw.tenants.admin.answers import http_date, json_bytes, not_found, read_registry, url
from tenancy_mw.tenants.admin.discovery import drop_version_member, service_version, with_version
from tenancy_mw.tenants.admin.representation import read_representation
from tenancy_mw.tenants.registry import ACTIVE, DELETED, Tenant, TenantConflict, TenantGone, TenantNotFound
from tenancy_mw.tenants.removal import RemovalFailed

if TYPE_CHECKING:
    from tenancy_mw.tenants.admin.filter import TenantAdmin
    from tenancy_mw.tenants.admin.routes import Target

__all__ = ["delete_tenant", "metadata", "put_tenant", "removal_failed", "restore_tenant", "show", "show_tenant"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")


def show_tenant(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
    """``GET``/``HEAD``: the tenant (``200``, or ``204`` without representations); ``404``; ``410``."""
    tenant_id = target.tenant_id
    tenant = read_registry(lambda: admin.registry.get(tenant_id))
    if tenant is None:
        raise not_found(tenant_id)
    if tenant.state == DELETED:
        raise Refusal(
            410,
            "tenancy.tenant-deleted",
            "Tenant %r is deleted; POST .../action/restore brings it back until it is purged." % shorten(tenant_id),
            headers=metadata(tenant),
        )
    if admin.version_discovery and environ.get("REQUEST_METHOD", "GET") == "GET":
        version = service_version(admin.application, environ, target.canonical, target.index)
        if version is not None:
            representation = tenant.representation if admin.representations else {}
            body = json_bytes(with_version(representation, version, tenant.id))
            headers = [*metadata(tenant), ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            start_response("200 OK", headers)
            return [body]
    return show(admin, environ, start_response, tenant, 200)


def put_tenant(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
    """``PUT``: ``201`` created (with ``Location``), ``202`` modified or unchanged; ``409`` when refused."""
    tenant_id = target.tenant_id
    representation = read_representation(environ, admin.max_body)
    if admin.version_discovery:
        representation = drop_version_member(
            representation, lambda: service_version(admin.application, environ, target.canonical, target.index)
        )
    if not admin.representations:
        # Nothing of the body is kept: every tenant has the same, empty one.
        representation = {}
    try:
        result = read_registry(lambda: admin.registry.put(tenant_id, representation, updatable=admin.updatable))
    except TenantConflict as exc:
        raise Refusal(409, "tenancy.tenant-" + exc.reason, str(exc)) from None
    if not result.created and not admin.representations:
        raise Refusal(
            409,
            "tenancy.tenant-exists",
            "Tenant %r already exists; this service keeps no tenant representation to update." % shorten(tenant_id),
        )
    admin.cache.remember(tenant_id, ACTIVE)
    if result.created:
        LOG.info("tenant_admin: tenant %r created", tenant_id)
        location = url(environ, target.canonical.segments[: target.index + 1], False)
        return show(admin, environ, start_response, result.tenant, 201, (("Location", location),))
    if result.changed:
        LOG.info("tenant_admin: tenant %r modified", tenant_id)
    return show(admin, environ, start_response, result.tenant, 202)


def delete_tenant(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
    """``DELETE``: ``204``, the tenant marked deleted (recoverable), its resources hidden; ``404``; ``410``."""
    tenant_id = target.tenant_id
    try:
        tenant = read_registry(lambda: admin.registry.delete(tenant_id, admin.removal))
    except TenantNotFound:
        raise not_found(tenant_id) from None
    except TenantGone:
        raise Refusal(410, "tenancy.tenant-deleted", "Tenant %r is already deleted." % shorten(tenant_id)) from None
    except RemovalFailed as exc:
        raise removal_failed(exc, "deleted") from None
    admin.cache.remember(tenant_id, DELETED)
    LOG.info("tenant_admin: tenant %r deleted", tenant_id)
    start_response("204 No Content", list(metadata(tenant)))
    return [b""]


def restore_tenant(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
    """``POST .../action/restore``: ``200``, the tenant (resources back); ``404``; ``409`` (not deleted, purging)."""
    tenant_id = target.tenant_id
    try:
        tenant = read_registry(lambda: admin.registry.restore(tenant_id, admin.removal))
    except TenantNotFound:
        raise not_found(tenant_id) from None
    except TenantConflict as exc:
        raise Refusal(409, "tenancy.tenant-" + exc.reason, str(exc)) from None
    except RemovalFailed as exc:
        raise removal_failed(exc, "restored") from None
    admin.cache.remember(tenant_id, ACTIVE)
    LOG.info("tenant_admin: tenant %r restored", tenant_id)
    return show(admin, environ, start_response, tenant, 200)


def removal_failed(exc: RemovalFailed, verb: str) -> Refusal:
    """``503``: the service's :class:`~tenancy_mw.tenants.removal.TenantRemoval` failed (logged with its cause).

    The registry's change was rolled back: the tenant is as it was.
    """
    LOG.error("tenant_admin: %s", exc, exc_info=exc.__cause__)
    return Refusal(
        503,
        "tenancy.removal-failed",
        "Tenant %r was not %s: the service failed to %s its resources; nothing changed, try again later "
        "(the service log tells why)." % (shorten(exc.tenant_id), verb, exc.step),
        (("Retry-After", "5"),),
    )


def show(admin: TenantAdmin, environ, start_response, tenant: Tenant, status: int, extra_headers: tuple = ()):
    """Answer with the tenant: its representation and metadata headers (or 204 with the headers only)."""
    headers = list(metadata(tenant)) + list(extra_headers)
    if status == 200 and (environ.get("REQUEST_METHOD") == "HEAD" or not admin.representations):
        start_response("204 No Content", headers)
        return [b""]
    if not admin.representations:
        start_response("%d %s" % (status, HTTPStatus(status).phrase), headers + [("Content-Length", "0")])
        return [b""]
    body = json_bytes(tenant.representation)
    headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    start_response("%d %s" % (status, HTTPStatus(status).phrase), headers)
    return [body]


def metadata(tenant: Tenant) -> tuple:
    """The tenant's metadata headers: ``ETag``, ``Last-Modified`` and the ``X-Tenant-*`` ones."""
    summary = tenant.summary()
    headers = [
        ("ETag", tenant.etag),
        ("Last-Modified", http_date(tenant.updated)),
        ("X-Tenant-State", tenant.state),
        ("X-Tenant-Created", summary["created"]),
        ("X-Tenant-Updated", summary["updated"]),
    ]
    if tenant.deleted is not None:
        headers.append(("X-Tenant-Deleted", summary["deleted"]))
    if tenant.purge_started is not None:
        headers.append(("X-Tenant-Purge-Started", tenant.purge_started.strftime("%Y-%m-%dT%H:%M:%SZ")))
    return tuple(headers)
