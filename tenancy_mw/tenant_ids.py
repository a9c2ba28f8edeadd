"""Tenant ids: validate them, quote them for a URL, find them in a path.

Pure helpers, no WSGI machinery.  The rules come from the tenants spec
(``multi-tenant-tenanting.xml``, "Create a tenant"): a tenant id is a UTF-8
string of 1 to 255 characters that may hold any character but ``/``.  Two
decisions of this library narrow that, because such ids could not travel
safely in a URL or a log line:

- control characters (U+0000 to U+001F and U+007F) are refused;
- ``.`` and ``..`` are refused: in a URL they are dot segments, which
  clients resolve before sending, so they cannot name a tenant;
- text that reads as a percent-escape (``%2F``, ``%41``, ``%u0041``) is
  refused: quoted, it arrives double-encoded, which the canonical path form
  refuses (a router decoding twice would read another path), so such an id
  could never be used in a URL.

"255 characters" counts Unicode code points (``len()`` of the decoded
string), not bytes: ``"∑" * 255`` is valid, ``"∑" * 256`` is not.

Example::

    >>> from tenancy_mw.tenant_ids import split_tenant_path, quote_tenant_id
    >>> split_tenant_path("/v1.0/Bob's%20Tenant/widgets")
    TenantPathParts(prefix='', version='v1.0', tenant_id="Bob's Tenant", rest='/widgets')
    >>> quote_tenant_id("Bob's Tenant")
    "Bob's%20Tenant"
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import quote

from tenancy_mw.paths import CanonicalPath, Refused, canonicalize, shorten, target_path

__all__ = [
    "DEFAULT_VERSION_PATTERN",
    "MAX_TENANT_ID_LENGTH",
    "InvalidTenantId",
    "TenantPathParts",
    "find_version",
    "tenant_segment_index",
    "quote_tenant_id",
    "split_tenant_path",
    "validate_tenant_id",
]

#: The spec's limit, in characters (code points).
MAX_TENANT_ID_LENGTH = 255

#: ``v`` followed by digits and dots: ``v1``, ``v1.0``, ``v2.1``.
DEFAULT_VERSION_PATTERN = r"v[0-9]+(?:\.[0-9]+)*"

# Characters left unescaped by quote_tenant_id: RFC 3986 pchar sub-delims
# plus ':' and '@' (unreserved characters are never escaped by quote()).
_SAFE_IN_SEGMENT = "!$&'()*+,;=:@"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPE_TEXT = re.compile(r"%(?:[0-9A-Fa-f]{2}|[Uu][0-9A-Fa-f]{4})")


class InvalidTenantId(Refused):
    """A tenant id that breaks a rule.

    Its ``rule`` is one of ``"empty"``, ``"too-long"``, ``"slash"``,
    ``"control-character"``, ``"percent-escape"``, ``"dot-segment"``,
    ``"not-a-string"``.
    """


class TenantPathParts(NamedTuple):
    """A path split around its tenant id.

    :ivar prefix: the still-encoded path before the version segment
        (``""`` when the version comes first).
    :ivar version: the version segment, e.g. ``"v2.1"``.
    :ivar tenant_id: the decoded tenant id.
    :ivar rest: the still-encoded path after the tenant segment, ``""``
        or starting with ``/``.
    """

    prefix: str
    version: str
    tenant_id: str
    rest: str


def validate_tenant_id(tenant_id: object) -> str:
    """Return *tenant_id* if it is a valid tenant id, else raise :class:`InvalidTenantId`.

    Example::

        >>> validate_tenant_id("resel1:sub2:acct3")
        'resel1:sub2:acct3'
        >>> validate_tenant_id("resel/sub/acct")
        Traceback (most recent call last):
          ...
        tenancy_mw.tenant_ids.InvalidTenantId: Tenant id 'resel/sub/acct' contains '/', ...
    """
    if not isinstance(tenant_id, str):
        raise InvalidTenantId(
            "not-a-string", "Tenant id %r is not a string." % (tenant_id,), tenant_id
        )
    if not tenant_id:
        raise InvalidTenantId("empty", "Tenant id is empty; it needs 1 to 255 characters.", "")
    if len(tenant_id) > MAX_TENANT_ID_LENGTH:
        raise InvalidTenantId(
            "too-long",
            "Tenant id %r is %d characters long; at most %d are allowed."
            % (shorten(tenant_id), len(tenant_id), MAX_TENANT_ID_LENGTH),
            tenant_id,
        )
    if "/" in tenant_id:
        raise InvalidTenantId(
            "slash",
            "Tenant id %r contains '/', the path separator, which no tenant id"
            " may contain." % shorten(tenant_id),
            tenant_id,
        )
    if not tenant_id.isprintable() and _CONTROL.search(tenant_id):
        raise InvalidTenantId(
            "control-character",
            "Tenant id %r contains a control character." % shorten(tenant_id),
            tenant_id,
        )
    if "%" in tenant_id and _ESCAPE_TEXT.search(tenant_id):
        raise InvalidTenantId(
            "percent-escape",
            "Tenant id %r contains text that reads as a percent-escape; in a URL it would be"
            " double-encoded, which is refused." % shorten(tenant_id),
            tenant_id,
        )
    if tenant_id in (".", ".."):
        raise InvalidTenantId(
            "dot-segment",
            "Tenant id %r cannot be used in a URL path (it is a dot segment)." % tenant_id,
            tenant_id,
        )
    return tenant_id


def quote_tenant_id(tenant_id: str) -> str:
    """Percent-encode a valid tenant id for use as one URL path segment.

    Raises :class:`InvalidTenantId` for an invalid id.

    Example::

        >>> quote_tenant_id("∑∞∆∏")
        '%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F'
    """
    return quote(validate_tenant_id(tenant_id), safe=_SAFE_IN_SEGMENT)


def find_version(segments: tuple[str, ...], pattern: re.Pattern, last_index: int) -> int:
    """Index of the first segment at or before *last_index* that *pattern* matches, or -1."""
    match = pattern.fullmatch
    for index, segment in enumerate(segments[: last_index + 1]):
        if match(segment):
            return index
    return -1


def split_tenant_path(path: str, version_pattern: str = DEFAULT_VERSION_PATTERN) -> TenantPathParts | None:
    """Split a raw (still percent-encoded) path into version, tenant id and rest.

    The version is the first segment, which must match *version_pattern*;
    the tenant id is the next one.  Returns ``None`` for a path that has no
    tenant segment (``/``, ``/v2.1``, ``/v2.1/``, ``/healthcheck``).  Raises
    :class:`~tenancy_mw.paths.PathRefused` for a path with no canonical form
    (for example ``%2F`` in the tenant segment) and :class:`InvalidTenantId`
    for a tenant segment that breaks a tenant id rule (for example an empty
    one in ``/v2.1//servers``).

    Example::

        >>> split_tenant_path("/v2.1/%E2%88%91/servers/1?x=y")
        TenantPathParts(prefix='', version='v2.1', tenant_id='∑', rest='/servers/1')
        >>> split_tenant_path("/v2.1/") is None
        True
    """
    canonical = canonicalize(path)
    tenant_index = tenant_segment_index(canonical, re.compile(version_pattern))
    if tenant_index < 0:
        return None
    tenant_id = validate_tenant_id(canonical.segments[tenant_index])
    raw_segments = _raw_segments(path)
    rest = "".join("/" + s for s in raw_segments[tenant_index + 1:])
    if canonical.trailing_slash:
        rest += "/"
    return TenantPathParts(
        "".join("/" + s for s in raw_segments[: tenant_index - 1]),
        canonical.segments[tenant_index - 1],
        tenant_id,
        rest,
    )


def _raw_segments(path: str) -> list[str]:
    body = target_path(path)[1:]
    if body.endswith("/"):
        body = body[:-1]
    return body.split("/")


def tenant_segment_index(
    canonical: CanonicalPath, pattern: re.Pattern, last_version_index: int = 0
) -> int:
    """Index of the tenant segment in *canonical*, or -1 if it has none.

    The version segment is the first one, at or before *last_version_index*,
    that *pattern* matches; the tenant segment follows it.
    """
    index = find_version(canonical.segments, pattern, last_version_index)
    if index < 0 or index + 1 >= len(canonical.segments):
        return -1
    return index + 1
