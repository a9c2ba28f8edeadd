"""What ``admin_cull`` adds to every operation it passes on: its refusals of requests it cannot judge."""

from __future__ import annotations

from typing import Any

from tenancy_mw.openapi._build import Context, refuse_path, version_headers

__all__ = ["contribute", "operations"]


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``admin_cull`` answers no call of its own: what it culls is not part of the endpoint's API."""
    return []


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its ``400``/``414`` refusals on every operation after it."""
    fmt, headers = middleware.error_format, version_headers(middleware)
    for operation in context.below(depth):
        refuse_path(operation, middleware, "admin_cull", True)
        operation.refuse(
            400,
            "tenancy.",
            "a request admin_cull cannot judge: too many version segments, too "
            "deep a path, a refused method override, an unreadable form (admin_cull).",
            fmt,
            headers,
        )
