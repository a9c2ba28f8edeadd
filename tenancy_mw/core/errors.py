"""The one error renderer of every tenancy_mw filter.

Two shapes, chosen per filter by its ``error_format`` option, so a filter's
errors look like the wrapped service's own:

``api-wg`` (default), the OpenStack API-WG errors guideline::

    {"errors": [{"request_id": "req-...", "code": "tenancy.tenant-id-too-long",
                 "status": 400, "title": "Bad Request",
                 "detail": "Tenant id 'xxx...' is 256 characters long; ..."}]}

``nova``, nova's legacy fault body::

    {"badRequest": {"code": 400, "message": "Tenant id 'xxx...' is ..."}}

``request_id`` is the id oslo.middleware's ``RequestId`` filter put in
``environ['openstack.request_id']`` when it ran before this filter, else
``null``.  A ``HEAD`` request gets the headers without the body.

Building the answer needs no webob: it is a few bytes of JSON.

Example, inside a WSGI callable::

    return render_error(environ, start_response, 404, "tenancy.not-found",
                        "No such tenant 'acme'.")

**One way to refuse from deep in a call.**  A helper that decides a
request must be refused raises :class:`Refusal` (status, code, detail and
any extra headers); the filter's top catches it and answers with
:meth:`~tenancy_mw.core.base.TenancyMiddleware.answer`, which renders it
here in the filter's ``error_format``.  Nothing is raised on a request that
passes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenancy_mw.core.paths import PathRefused

__all__ = [
    "BAD_PATH_CODE",
    "ERROR_FORMATS",
    "REQUEST_ID_KEY",
    "Refusal",
    "error_body",
    "render_error",
    "render_path_refusal",
    "render_refusal",
]

#: The error code of a request path with no canonical form; the broken rule follows it.
BAD_PATH_CODE = "tenancy.bad-path"

#: The values of every filter's ``error_format`` option.
ERROR_FORMATS = ("api-wg", "nova")

#: Where oslo.middleware's ``RequestId`` leaves the request id.
REQUEST_ID_KEY = "openstack.request_id"

# The names nova gives its fault bodies, by status.
_NOVA_FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}


class Refusal(Exception):
    """A request refused with a JSON error: *status*, error *code*, *detail*, extra *headers*.

    Raised by a filter's helpers and rendered once, at the filter's top, by
    :func:`render_refusal` (through ``TenancyMiddleware.answer``).

    Example::

        >>> refusal = Refusal(405, "tenancy.method-not-allowed", "No.", headers=(("Allow", "GET"),))
        >>> refusal.status, refusal.code, refusal.detail, refusal.headers
        (405, 'tenancy.method-not-allowed', 'No.', (('Allow', 'GET'),))
        >>> str(refusal)
        'No.'
    """

    def __init__(self, status: int, code: str, detail: str, headers: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = tuple(headers)

    def __repr__(self) -> str:
        return "Refusal(%d, %r, %r)" % (self.status, self.code, self.detail)


def error_body(
    status: int, code: str, detail: str, *, error_format: str = "api-wg", request_id: str | None = None
) -> dict:
    """The JSON-ready body of an error, in *error_format*.

    Example::

        >>> error_body(403, "tenancy.forbidden", "No.", error_format="nova")
        {'forbidden': {'code': 403, 'message': 'No.'}}
    """
    if error_format == "nova":
        name = _NOVA_FAULT_NAMES.get(status, "computeFault")
        return {name: {"code": status, "message": detail}}
    return {
        "errors": [
            {
                "request_id": request_id,
                "code": code,
                "status": status,
                "title": HTTPStatus(status).phrase,
                "detail": detail,
            }
        ]
    }


def render_error(
    environ: dict,
    start_response: Callable,
    status: int,
    code: str,
    detail: str,
    *,
    error_format: str = "api-wg",
    headers: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    """Answer the request in *environ* with a JSON error; return the WSGI body.

    :param status: the HTTP status code.
    :param code: a stable, dotted error code such as ``"tenancy.bad-path"``
        (the API-WG ``code`` field; not shown in the ``nova`` shape).
    :param detail: one or two sentences for the client, naming the
        offending value.
    :param headers: extra response headers.
    """
    body = json.dumps(
        error_body(
            status,
            code,
            detail,
            error_format=error_format,
            request_id=environ.get(REQUEST_ID_KEY),
        )
    ).encode("utf-8")
    response_headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    ]
    response_headers.extend(headers)
    start_response("%d %s" % (status, HTTPStatus(status).phrase), response_headers)
    if environ.get("REQUEST_METHOD") == "HEAD":
        return [b""]
    return [body]


def render_refusal(
    environ: dict, start_response: Callable, refusal: Refusal, *, error_format: str = "api-wg"
) -> list[bytes]:
    """Answer the request in *environ* with *refusal*, in *error_format*; return the WSGI body."""
    return render_error(
        environ,
        start_response,
        refusal.status,
        refusal.code,
        refusal.detail,
        error_format=error_format,
        headers=refusal.headers,
    )


def render_path_refusal(
    environ: dict,
    start_response: Callable,
    refused: PathRefused,
    *,
    error_format: str = "api-wg",
    headers: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    """Answer a request whose path has no canonical form, as every filter does.

    The status is *refused*'s (``400``, or ``414`` for a request target
    over a filter's limit), the code ``tenancy.bad-path.<rule>``, the
    detail *refused*'s sentence; *headers* are extra response headers.
    Filters call it through
    :meth:`~tenancy_mw.core.base.TenancyMiddleware.refuse_path`.
    """
    code = BAD_PATH_CODE + "." + refused.rule
    return render_error(
        environ, start_response, refused.status, code, refused.detail, error_format=error_format, headers=headers
    )
