"""What every part of ``tenant_admin`` answers with: refusals, redirects, URLs, ETags.

A handler deep in a call refuses by raising the one
:class:`~tenancy_mw.core.errors.Refusal`; the filter renders it in its
``error_format``.  :class:`RegistryDown` is the refusal of the registry
failing, ``503``.  A :class:`Redirect` is raised the same way but is not an
error: its body names the new ``Location``, in no ``error_format``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from datetime import timezone
from email.utils import format_datetime
from http import HTTPStatus
from urllib.parse import quote

from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import SAFE_IN_SEGMENT, shorten
from tenancy_mw.core.sql import error_summary, sa
from tenancy_mw.tenants.registry import canonical_document_json

__all__ = [
    "Redirect",
    "RegistryDown",
    "etag",
    "http_date",
    "json_bytes",
    "not_allowed",
    "not_found",
    "parse_if_match",
    "read_registry",
    "redirect",
    "url",
]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")

_ETAG_LIST = re.compile(r'\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*(?:,\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*)*')
_ETAG = re.compile(r'(W/)?"([\x21\x23-\x7e\x80-\xff]*)"')


class Redirect(Exception):
    """A redirect decided deep in a handler: *status* (``301``, ``303``) to *location*, rendered by :func:`redirect`.

    Not a :class:`~tenancy_mw.core.errors.Refusal`: the request is not
    refused, and the body is ``{"location": ...}`` in every ``error_format``.
    """

    def __init__(self, status: int, location: str) -> None:
        super().__init__(location)
        self.status = status
        self.location = location


class RegistryDown(Refusal):
    """The registry database could not be read or written: ``503``, try again in 5 seconds."""

    def __init__(self) -> None:
        super().__init__(
            503,
            "tenancy.registry-unavailable",
            "The tenant registry cannot be reached; try again later.",
            (("Retry-After", "5"),),
        )


def read_registry(call: Callable):
    """Run a registry call; a database failure is logged and becomes :class:`RegistryDown`."""
    try:
        return call()
    except sa.exc.SQLAlchemyError as exc:
        LOG.error("tenant_admin: the tenant registry is unavailable: %s", error_summary(exc))
        raise RegistryDown() from None


def not_found(tenant_id: str) -> Refusal:
    """``404``: the tenant was never created, or it was purged."""
    return Refusal(
        404,
        "tenancy.tenant-not-found",
        "Tenant %r does not exist (it was never created, or it was purged)." % shorten(tenant_id),
    )


def not_allowed(method: str, allow: str) -> Refusal:
    """``405`` with the ``Allow`` header."""
    return Refusal(
        405,
        "tenancy.method-not-allowed",
        "Method %r is not allowed here; allowed: %s." % (shorten(method), allow),
        headers=(("Allow", allow),),
    )


def parse_if_match(value: str) -> list[str] | None:
    """The strong entity tags of an ``If-Match`` header (``["*"]`` for ``*``); ``None`` if malformed.

    Weak tags (``W/"x"``) are kept with their prefix: ``If-Match`` compares
    strongly, so they never match.

    Example::

        >>> parse_if_match('"a", W/"b"')
        ['"a"', 'W/"b"']
        >>> parse_if_match('abc') is None
        True
    """
    if value.strip() == "*":
        return ["*"]
    if not _ETAG_LIST.fullmatch(value):
        return None
    return [match.group(0) for match in _ETAG.finditer(value)]


def http_date(moment) -> str:
    """*moment* (a naive UTC datetime) as an HTTP date."""
    return format_datetime(moment.replace(tzinfo=timezone.utc), usegmt=True)


def json_bytes(document: object) -> bytes:
    """*document* as the JSON bytes of an answer."""
    # ASCII escapes: a lone surrogate an operator PUT cannot break the answer.
    return json.dumps(document, ensure_ascii=True, sort_keys=True).encode("ascii")


def etag(document: dict) -> str:
    """The strong ``ETag`` of *document*: a hash of its canonical JSON."""
    return '"%s"' % hashlib.sha256(canonical_document_json(document).encode("ascii")).hexdigest()


def url(environ: dict, segments: tuple[str, ...], trailing_slash: bool) -> str:
    """The absolute URL of *segments* on the host the request was sent to, quoted again.

    Example::

        >>> url({"HTTP_HOST": "api:8774"}, ("v2.1", "a b"), False)
        'http://api:8774/v2.1/a%20b'
    """
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST")
    if not host:
        host = environ.get("SERVER_NAME", "localhost")
        port = environ.get("SERVER_PORT", "")
        if port and port != ("443" if scheme == "https" else "80"):
            host += ":" + port
    path = "".join("/" + quote(s, safe=SAFE_IN_SEGMENT) for s in segments)
    return "%s://%s%s%s" % (scheme, host, path, "/" if trailing_slash else "")


def redirect(environ: dict, start_response: Callable, status: int, location: str) -> list[bytes]:
    """Answer *status* (``301``, ``303``) with ``Location`` and a small JSON body naming it."""
    body = json_bytes({"location": location})
    start_response(
        "%d %s" % (status, HTTPStatus(status).phrase),
        [("Location", location), ("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]
