"""What ``admin_cull`` adds to every operation it passes on: its refusals of requests it cannot judge."""

from __future__ import annotations

import re
from typing import Any

from tenancy_mw.openapi._build import Context, refuse_path, version_headers

__all__ = ["contribute", "operations"]


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``admin_cull`` answers no call of its own: what it culls is not part of the endpoint's API."""
    return []


# The requests it cannot judge, by error code (tenancy_mw.cull.filter, tenancy_mw.cull.forms).
_UNJUDGED = {
    "tenancy.bad-environ": "a WSGI environ it cannot read",
    "tenancy.too-many-versions": "too many versions in Accept or Content-Type",
    "tenancy.path-too-deep": "more path segments than max_segments",
    "tenancy.method-override-refused": "a method override (method_override = refuse)",
    "tenancy.unreadable-form": "a form body it cannot read for a _method field",
}


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its ``400``/``414`` refusals on every operation after it; its cull where a parameter can make an admin path.

    A tenant, a resource or a tag named like an admin segment (``action``)
    makes a call of the service's API a path the cull rules refuse
    (``cull_status``).
    """
    fmt, headers = middleware.error_format, version_headers(middleware)
    culled = (404, "tenancy.not-found") if middleware.cull_status == 404 else (403, "tenancy.admin-call")
    for operation in context.below(depth):
        refuse_path(operation, middleware, "admin_cull", True)
        for code, why in _UNJUDGED.items():
            operation.refuse(400, code, why + " (admin_cull).", fmt, headers)
        if any(name != "version" for name in re.findall(r"{(\w+)}", operation.path)):
            operation.refuse(
                *culled,
                "a path parameter that makes the call one of the cull rules' admin paths (such as a tenant, a "
                "resource or a tag named action) (admin_cull, cull_status).",
                fmt,
                headers,
            )
