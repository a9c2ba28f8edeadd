"""What ``admin_cull`` adds to every operation it passes on: its refusals of requests it cannot judge.

Where it reads a form body (a path that is admin for another method than
the request's) is found by asking the filter itself (its ``judge``), as
:func:`tenancy_mw.openapi.cull` does.
"""

from __future__ import annotations

import io
import itertools
import re
from typing import Any

from tenancy_mw.openapi._build import Context, refuse_path, version_headers, version_sample

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
}

# The values a path parameter is given to find out whether it can make a call's path an admin one: an ordinary
# value, one read as a version (then the segment after it reads as a tenant), the spec's admin segment.
_SAMPLES = ("x1", "v1", "action")


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
        parameter = any(name != "version" for name in re.findall(r"{(\w+)}", operation.path))
        # A path parameter can make a path deeper than max_segments (a tenant id of backslashes); so can a long
        # mount, with one more segment for a version an Accept header names.
        deep = parameter or operation.path.count("/") + 1 > middleware.max_segments
        for code, why in _UNJUDGED.items():
            if code == "tenancy.method-override-refused" and not middleware.refuse_overrides:
                continue
            if code == "tenancy.path-too-deep" and not deep:
                continue
            operation.refuse(400, code, why + " (admin_cull).", fmt, headers)
        # With method_override = refuse it never reads a form: a form body there is method-override-refused.
        if not middleware.refuse_overrides and _reads_form(middleware, operation):
            operation.refuse(
                413,
                "tenancy.form-too-large",
                "a form body over 1 MiB (FORM_BODY_LIMIT) where a path parameter (or the path itself, such as "
                "/{version}/servers, a tenant call to a router) makes the path an admin one for another method, "
                "which a _method field could name (admin_cull).",
                fmt,
                headers,
            )
            operation.refuse(
                400,
                "tenancy.unreadable-form",
                "there, a form body it cannot read for a _method field (cut short, malformed), or method "
                "overrides naming too many methods (admin_cull).",
                fmt,
                headers,
            )
        if parameter:
            operation.refuse(
                *culled,
                "a path parameter that makes the call one of the cull rules' admin paths (such as a tenant, a "
                "resource or a tag named action) (admin_cull, cull_status).",
                fmt,
                headers,
            )


def _reads_form(culler: Any, operation: Any) -> bool:
    """Whether *culler* reads a form body for a ``_method`` field on some call of *operation*.

    It does where the path is an admin call for a method other than the
    request's (then a ``_method`` could name it), which its own rules
    decide: each call made from the template with every parameter one of
    :data:`_SAMPLES` is judged with a form body cut short, which it
    refuses ``400`` only when it reads it.
    """
    names = re.findall(r"{(\w+)}", operation.path)
    version = version_sample(culler)
    samples = tuple(version if sample == "v1" else sample for sample in _SAMPLES)
    values = [(version,) if name == "version" else samples for name in names]
    pieces = re.split(r"{\w+}", operation.path)
    for chosen in itertools.product(*values):
        path = pieces[0] + "".join(value + piece for value, piece in zip(chosen, pieces[1:], strict=True))
        environ = {
            "REQUEST_METHOD": operation.method.upper(),
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "CONTENT_TYPE": "application/x-www-form-urlencoded",
            "CONTENT_LENGTH": "1",
            "wsgi.input": io.BytesIO(b""),
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
        }
        answer = culler.judge(environ)
        if answer is not None and _status(answer).startswith("400"):
            return True
    return False


def _status(answer: Any) -> str:
    """The status line of a refusal *answer* (a callable taking ``start_response``)."""
    statuses: list[str] = []
    answer(lambda status, headers, exc_info=None: statuses.append(status))
    return statuses[0]
