"""What ``admin_cull`` adds to every operation it passes on: its refusals of requests it cannot judge."""

from __future__ import annotations

import re
from typing import Any

from tenancy_mw.openapi._build import Context, refuse_path, version_headers

__all__ = ["contribute", "operations"]


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``admin_cull`` answers no call of its own: what it culls is not part of the endpoint's API."""
    return []


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its ``400``/``414`` refusals on every operation after it; its cull where a parameter can make an admin path.

    A tenant, a resource or a tag named like an admin segment (``action``;
    a version-like resource id before ``tags``) makes a call of the
    service's API a path the cull rules refuse (``cull_status``).
    """
    fmt, headers = middleware.error_format, version_headers(middleware)
    culled = (404, "tenancy.not-found") if middleware.cull_status == 404 else (403, "tenancy.admin-call")
    for operation in context.below(depth):
        if any(name != "version" for name in re.findall(r"{(\w+)}", operation.path)):
            operation.refuse(
                *culled,
                "a path parameter that makes the call one of the cull rules' admin paths (such as a tenant, a "
                "resource or a tag named action) (admin_cull, cull_status).",
                fmt,
                headers,
            )
        refuse_path(operation, middleware, "admin_cull", True)
        operation.refuse(
            400,
            "tenancy.",
            "a request admin_cull cannot judge: too many version segments, too "
            "deep a path, a refused method override, an unreadable form (admin_cull).",
            fmt,
            headers,
        )
