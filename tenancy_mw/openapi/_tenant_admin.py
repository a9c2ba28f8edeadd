"""What ``tenant_admin`` answers (the tenant admin API, the moves) and adds (the tenant-state check, ``301``)."""

from __future__ import annotations

from typing import Any

from tenancy_mw.openapi._build import Context, Operation, header, refuse_path, schema_ref, version_headers

__all__ = ["contribute", "operations"]

_RETRY_AFTER = {"Retry-After": header("Seconds to wait before trying again.", {"type": "integer"})}


def _metadata_headers(*, deleted: bool = False, purging: bool = False) -> dict[str, dict]:
    """The tenant's metadata headers (``tenancy_mw.tenants.admin.api.metadata``).

    Those of a *deleted* tenant add ``X-Tenant-Deleted``, and those of one
    that may be being purged (*purging*) ``X-Tenant-Purge-Started``: an
    answer lists only the headers its tenant can have.
    """
    found = {
        "ETag": header("The strong entity tag of the tenant's representation."),
        "Last-Modified": header("When the tenant last changed (HTTP date)."),
        "X-Tenant-State": header("active or deleted.", {"enum": ["active", "deleted"]}),
        "X-Tenant-Created": header("When the tenant was created (ISO 8601, UTC)."),
        "X-Tenant-Updated": header("When the tenant last changed (ISO 8601, UTC)."),
    }
    if deleted:
        found["X-Tenant-Deleted"] = header("When the tenant was deleted (ISO 8601, UTC).")
    if purging:
        found["X-Tenant-Purge-Started"] = header("When its purge started (ISO 8601, UTC); a tenant being purged only.")
    return found


def operations(middleware: Any, depth: int, context: Context) -> list[Operation]:
    """The admin calls, when ``admin_api`` is on and the URL layout carries tenants."""
    if not (middleware.options.admin_api and context.tenant_in_path):
        return []
    found = _tenant_calls(middleware, depth, context) + [_restore(middleware, depth, context)]
    if getattr(middleware, "provider", None) is not None:
        for path in (context.tenant_path("action", "move"), context.tenant_path("{resource_path}", "action", "move")):
            found += [_move(middleware, depth, path, method) for method in ("get", "head", "post")]
    for operation in found:
        _admin_refusals(middleware, operation, context, depth)
    return found


def _admin_refusals(middleware: Any, operation: Operation, context: Context, depth: int) -> None:
    """What every admin call may answer: the path and tenant id refused, the registry down."""
    fmt, headers = middleware.error_format, version_headers(middleware)
    _path_refusals(middleware, operation, context, depth)
    operation.refuse(
        503, "tenancy.registry-unavailable", "the tenant registry cannot be reached.", fmt, {**headers, **_RETRY_AFTER}
    )


def _path_refusals(middleware: Any, operation: Operation, context: Context, depth: int) -> None:
    """Its refusals of a path it reads itself: no canonical form, a bad tenant id, a segment not of its pattern."""
    fmt, headers = middleware.error_format, version_headers(middleware)
    refuse_path(operation, middleware, "tenant_admin", False)
    if not operation.under_tenant:
        return
    operation.refuse(
        400, "tenancy.invalid-tenant-id.", "the tenant id breaks a rule of TenantId (tenant_admin).", fmt, headers
    )
    if middleware.options.tenant_id_pattern and not context.tenant_path_before(depth):
        operation.refuse(
            404,
            "tenancy.unknown-path-segment",
            "the segment after the version is neither a tenant-less collection nor a tenant id of "
            "tenant_id_pattern (tenant_admin).",
            fmt,
            headers,
        )


def _not_found(operation: Operation, middleware: Any, gone_headers: bool = True) -> None:
    fmt, headers = middleware.error_format, version_headers(middleware)
    operation.refuse(404, "tenancy.tenant-not-found", "the tenant was never created, or it was purged.", fmt, headers)
    gone = {**headers, **_metadata_headers(deleted=True, purging=True)} if gone_headers else headers
    operation.refuse(410, "tenancy.tenant-deleted", "the tenant is deleted (restore brings it back).", fmt, gone)


def _shown(middleware: Any) -> dict:
    """The body of a shown tenant: its representation (with ``version`` under ``version_discovery``)."""
    if middleware.options.version_discovery:
        return {
            "allOf": [
                schema_ref("TenantRepresentation"),
                {
                    "properties": {
                        "version": {
                            "type": "object",
                            "description": "The service's version document (version_discovery).",
                        }
                    }
                },
            ]
        }
    return schema_ref("TenantRepresentation")


def _tenant_calls(middleware: Any, depth: int, context: Context) -> list[Operation]:
    options, path = middleware.options, context.tenant_path()
    meta = _metadata_headers()
    get = Operation(path, "get", depth, "admin", "Show a tenant")
    if options.representations or options.version_discovery:
        get.respond(
            200, "The tenant's representation; its metadata in the headers.", schema=_shown(middleware), headers=meta
        )
    if not options.representations:
        get.respond(204, "The tenant exists (no representations are kept); its metadata in the headers.", headers=meta)
    head = Operation(path, "head", depth, "admin", "Show a tenant's metadata")
    head.respond(204, "The tenant exists; its metadata in the headers.", headers=meta)
    delete = Operation(path, "delete", depth, "admin", "Delete a tenant (recoverable until it is purged)")
    delete.respond(204, "Marked deleted; the service's resources hidden.", headers=_metadata_headers(deleted=True))
    if getattr(middleware, "removal", None) is not None:  # the move provider is a TenantRemoval
        delete.refuse(
            503,
            "tenancy.removal-failed",
            "the service failed to hide the tenant's resources; nothing changed.",
            middleware.error_format,
            {**version_headers(middleware), **_RETRY_AFTER},
        )
    for operation in (get, head, delete):
        _not_found(operation, middleware, operation is not delete)
    return [get, head, delete, _put(middleware, depth, path)]


def _put(middleware: Any, depth: int, path: str) -> Operation:
    options, fmt, headers = middleware.options, middleware.error_format, version_headers(middleware)
    meta = _metadata_headers()
    put = Operation(path, "put", depth, "admin", "Create or update a tenant")
    put.request_body = {
        "required": False,
        "description": "The tenant's representation, at most max_body_bytes (%d); empty: {}." % options.max_body_bytes,
        "content": {"application/json": {"schema": _shown(middleware)}},
    }
    body = schema_ref("TenantRepresentation") if options.representations else None
    put.respond(
        201,
        "Created.",
        schema=body,
        headers={**meta, "Location": header("The tenant's URL.", {"type": "string", "format": "uri"})},
    )
    if options.representations:
        put.respond(202, "Modified, or unchanged (PUT is idempotent).", schema=body, headers=meta)
    put.refuse(
        400,
        "tenancy.representation-",
        "the body is not a JSON object (not JSON, a repeated key, NaN, "
        "too deep, a number JSON cannot carry, a 'version' member other than GET showed).",
        fmt,
        headers,
    )
    put.refuse(400, "tenancy.bad-content-length", "a Content-Length that is not a number.", fmt, headers)
    put.refuse(400, "tenancy.unreadable-body", "a body that cannot be read, or shorter than its length.", fmt, headers)
    put.refuse(
        409,
        "tenancy.tenant-",
        "the tenant is deleted, or its representation differs and updatable = "
        "false, or it exists and no representations are kept.",
        fmt,
        headers,
    )
    put.refuse(411, "tenancy.length-required", "a chunked body without Content-Length.", fmt, headers)
    put.refuse(413, "tenancy.representation-too-large", "over max_body_bytes.", fmt, headers)
    put.refuse(415, "tenancy.representation-not-json", "a Content-Type that is not JSON.", fmt, headers)
    return put


def _restore(middleware: Any, depth: int, context: Context) -> Operation:
    fmt, headers = middleware.error_format, version_headers(middleware)
    restore = Operation(context.tenant_path("action", "restore"), "post", depth, "admin", "Restore a deleted tenant")
    if middleware.options.representations:
        restore.respond(
            200, "Restored; the representation.", schema=schema_ref("TenantRepresentation"), headers=_metadata_headers()
        )
    else:
        restore.respond(204, "Restored.", headers=_metadata_headers())
    restore.refuse(404, "tenancy.tenant-not-found", "the tenant was never created, or it was purged.", fmt, headers)
    restore.refuse(409, "tenancy.tenant-", "the tenant is not deleted, or is being purged.", fmt, headers)
    if getattr(middleware, "removal", None) is not None:
        restore.refuse(
            503,
            "tenancy.removal-failed",
            "the service failed to restore the tenant's resources; nothing changed.",
            fmt,
            {**headers, **_RETRY_AFTER},
        )
    return restore


def _move(middleware: Any, depth: int, path: str, method: str) -> Operation:
    fmt, headers = middleware.error_format, version_headers(middleware)
    resource = "{resource_path}" in path
    what = "a resource" if resource else "all of a tenant's resources"
    summary = "Move %s to another tenant" if method == "post" else "Show the move action document of %s"
    move = Operation(path, method, depth, "admin", summary % what)
    destination = {"name": "dest", "in": "query", "required": True, "description": "The destination tenant."}
    move.parameter({**destination, "schema": schema_ref("TenantId")})
    if method == "post":
        _move_post(move, fmt, headers)
    else:
        etag = header("The document's strong entity tag, for If-Match.")
        move.respond(200, "The move action document.", schema=schema_ref("MoveDocument"),
                     headers={"ETag": etag, "Cache-Control": header("no-cache.")})  # fmt: skip
    move.refuse(400, "tenancy.move-", "dest is missing, repeated, the source itself, not a valid tenant id, or the "
                "query is not UTF-8.", fmt, headers)  # fmt: skip
    move.refuse(404, "tenancy.tenant-not-found", "the source tenant does not exist.", fmt, headers)
    move.refuse(404, "tenancy.move-destination-not-found", "the destination tenant does not exist.", fmt, headers)
    move.refuse(409, "tenancy.move-destination-deleted", "the destination tenant is deleted.", fmt, headers)
    move.refuse(410, "tenancy.tenant-deleted", "the source tenant is deleted.", fmt, headers)
    move.refuse(500, "tenancy.admin-failed", "the move provider failed (the service log tells why).", fmt, headers)
    if resource:
        move.refuse(404, "tenancy.move-resource-not-found", "the tenant has no such resource.", fmt, headers)
        move.refuse(410, "tenancy.move-resource-deleted", "the resource is deleted.", fmt, headers)
        location = header("The move URL of the resource's new place.")
        move.respond(301, "The resource moved: its move URL at the new place.", schema=schema_ref("Redirect"),
                     headers={"Location": location})  # fmt: skip
    if method == "post":
        # The provider's refusal keeps its status, and a listed status is the one a client reads (not 4XX).
        for status in sorted(s for s in move.responses if s.isdigit() and 400 <= int(s) < 500):
            move.refuse(status, "tenancy.move-refused", "the service's move provider refused with this status.", fmt,
                        headers)  # fmt: skip
    return move


def _move_post(move: Operation, fmt: str, headers: dict) -> None:
    """What only the ``POST`` of a move answers: ``303``, ``If-Match`` and ``412``, the provider's refusal."""
    condition = "The move action document's ETag: move only if nothing changed since."
    move.parameter({"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"},
                    "description": condition})  # fmt: skip
    location = header("The new home: the resource's new URL, or the destination tenant's.")
    move.respond(303, "Moved.", schema=schema_ref("Redirect"), headers={"Location": location})
    move.refuse(412, "tenancy.move-precondition-failed", "the move changed since If-Match's ETag was read (the "
                "current ETag in ETag).", fmt, {**headers, "ETag": header("The current ETag.")})  # fmt: skip
    move.refuse(400, "tenancy.bad-if-match", "If-Match is not * or a list of entity tags.", fmt, headers)
    move.refuse("4XX", "tenancy.move-refused", "the service's move provider refused (its own 4xx; 409 when it "
                "gives another).", fmt, headers)  # fmt: skip


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """On the calls it passes on: its path refusals, the tenant-state check (``404``, ``410``), ``301`` when moved.

    It reads the path itself with ``admin_api`` on, or without a
    ``tenant_path`` before it; the state check covers a call under a
    tenant of the path, or of a confirmed token (``token_tenant``), whose
    moves it cannot tell from the URL (no ``301``).
    """
    options, fmt, headers = middleware.options, middleware.error_format, version_headers(middleware)
    reads_path = options.admin_api or not context.tenant_path_before(depth)
    for operation in context.below(depth):
        if reads_path:
            _path_refusals(middleware, operation, context, depth)
        if not (operation.under_tenant or context.token_tenant):
            continue
        if options.check_tenant_state:
            operation.refuse(
                404, "tenancy.tenant-not-found", "no such tenant (tenant_admin's state check).", fmt, headers
            )
            operation.refuse(
                410, "tenancy.tenant-deleted", "the tenant is deleted (tenant_admin's state check).", fmt, headers
            )
            codes = ["tenancy.registry-unavailable"]
            if getattr(middleware, "shared", None) is not None and options.on_state_store_error == "fail_closed":
                codes.append("tenancy.state-store-unavailable")  # state_memcached_servers down
            for code in codes:
                operation.refuse(
                    503, code, "the tenant's state cannot be read (tenant_admin).", fmt, {**headers, **_RETRY_AFTER}
                )
        if options.redirect_moved and operation.under_tenant:
            operation.respond(
                301,
                "The resource moved to another tenant: Location is its new URL (tenant_admin, redirect_moved).",
                schema=schema_ref("Redirect"),
                headers={"Location": header("The resource's new URL.")},
            )
