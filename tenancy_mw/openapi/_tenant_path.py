"""What ``tenant_path`` adds to every operation it passes on: its refusals of the path and the tenant id."""

from __future__ import annotations

from typing import Any

from tenancy_mw.openapi._build import Context, refuse_path, version_headers

__all__ = ["contribute", "operations"]


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``tenant_path`` answers no call of its own."""
    return []


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its refusals on every operation after it: ``400``/``414`` for the path, the tenant id's rules."""
    options = middleware.options
    fmt, headers = middleware.error_format, version_headers(middleware)
    for operation in context.below(depth):
        refuse_path(operation, middleware, "tenant_path", True)
        operation.refuse(
            400, "tenancy.bad-environ", "a WSGI environ the filter cannot read (tenant_path).", fmt, headers
        )
        if not operation.under_tenant:
            if options.token_tenant:
                operation.refuse(
                    400,
                    "tenancy.invalid-tenant-id.",
                    "the token's project id is not a valid tenant id (tenant_path, token_tenant).",
                    fmt,
                    headers,
                )
            continue
        operation.refuse(
            400,
            "tenancy.invalid-tenant-id.",
            "the tenant id breaks a rule of TenantId, named after the dot (tenant_path).",
            fmt,
            headers,
        )
        if options.tenant_id_pattern:
            operation.refuse(
                404,
                "tenancy.unknown-path-segment",
                "the segment after the version is neither a "
                "tenant-less collection nor a tenant id of tenant_id_pattern (tenant_path).",
                fmt,
                headers,
            )
        if options.check_token_project:
            operation.refuse(
                403,
                "tenancy.project-mismatch",
                "the token's project is not the path's tenant and it has none of admin_roles (tenant_path).",
                fmt,
                headers,
            )
        if options.strip_tenant:
            operation.refuse(
                503,
                "tenancy.misconfigured-pipeline",
                "the path was rewritten before the tenant segment could be stripped, or another tenant_path "
                "stripped it already (tenant_path, strip_tenant).",
                fmt,
                headers,
            )
