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

Where a path carries its tenant is the service's URL layout,
:class:`TenantLayout`: nova and cinder serve every route both as
``/{version}/{project_id}/...`` and ``/{version}/...``, so the segment after
the version is a tenant only when it is not one of the service's tenant-less
collections (``servers``, ``os-keypairs``, ``volumes``).  The version is the
last segment of the mount point (``SCRIPT_NAME``) when it is one, else the
first segment after the mount (:func:`find_version`): never a segment a
proxy's forwarded prefix put before the service's own mount.  Every filter
that needs the tenant decides with the same layout.

Example::

    >>> from tenancy_mw.tenants.ids import split_tenant_path, quote_tenant_id
    >>> split_tenant_path("/v1.0/Bob's%20Tenant/widgets")
    TenantPathParts(prefix='', version='v1.0', tenant_id="Bob's Tenant", rest='/widgets')
    >>> quote_tenant_id("Bob's Tenant")
    "Bob's%20Tenant"
    >>> from tenancy_mw.core.paths import canonicalize
    >>> TenantLayout().tenant_index(canonicalize("/v2.1/os-keypairs"))
    -1
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote

# find_version is core.paths' (the core's microversion headers read the version segment too); it stays
# importable from here, where it was defined first.
from tenancy_mw.core.paths import (
    DEFAULT_VERSION_PATTERN,
    SAFE_IN_SEGMENT,
    CanonicalPath,
    Refused,
    canonicalize,
    compile_version_pattern,
    find_version,
    shorten,
    target_path,
    version_pattern_opt,
)

__all__ = [
    "DEFAULT_TENANTLESS_COLLECTIONS",
    "DEFAULT_VERSION_PATTERN",
    "LAYOUTS",
    "MAX_TENANT_ID_LENGTH",
    "InvalidTenantId",
    "LayoutError",
    "TenantLayout",
    "TenantPathParts",
    "UnknownPathSegment",
    "find_version",
    "tenant_layout_opts",
    "tenant_segment_index",
    "quote_tenant_id",
    "split_tenant_path",
    "validate_tenant_id",
]

#: The spec's limit, in characters (code points).
MAX_TENANT_ID_LENGTH = 255

#: The values of ``tenant_in_path``, the default first.
LAYOUTS = ("optional", "always", "never")

#: Every name nova 34.0.0 and cinder 29.0.0 route right after the version
#: without a project id: the first literal segment of each route, read from
#: nova's ``nova/api/openstack/compute/routes.py`` (``ROUTE_LIST``) and from
#: the route table cinder's ``cinder/api/v3/router.py`` builds, its
#: ``ResourceExtension`` collections of ``cinder/api/contrib/`` included
#: (the names both serve are listed once, under nova).
DEFAULT_TENANTLESS_COLLECTIONS: tuple[str, ...] = (
    # nova 34.0.0
    "extensions",
    "flavors",
    "images",
    "limits",
    "os-agents",
    "os-aggregates",
    "os-assisted-volume-snapshots",
    "os-availability-zone",
    "os-baremetal-nodes",
    "os-cells",
    "os-certificates",
    "os-cloudpipe",
    "os-console-auth-tokens",
    "os-fixed-ips",
    "os-floating-ip-dns",
    "os-floating-ip-pools",
    "os-floating-ips",
    "os-floating-ips-bulk",
    "os-fping",
    "os-hosts",
    "os-hypervisors",
    "os-instance_usage_audit_log",
    "os-keypairs",
    "os-migrations",
    "os-networks",
    "os-quota-class-sets",
    "os-quota-sets",
    "os-security-group-default-rules",
    "os-security-group-rules",
    "os-security-groups",
    "os-server-external-events",
    "os-server-groups",
    "os-services",
    "os-simple-tenant-usage",
    "os-snapshots",
    "os-tenant-networks",
    "os-volumes",
    "os-volumes_boot",
    "servers",
    "versions",
    # cinder 29.0.0
    "attachments",
    "backups",
    "capabilities",
    "cgsnapshots",
    "clusters",
    "consistencygroups",
    "default-types",
    "group_snapshots",
    "group_types",
    "groups",
    "manageable_snapshots",
    "manageable_volumes",
    "messages",
    "os-snapshot-manage",
    "os-volume-manage",
    "os-volume-transfer",
    "qos-specs",
    "resource_filters",
    "scheduler-stats",
    "snapshots",
    "types",
    "volume-transfers",
    "volumes",
    "workers",
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPE_TEXT = re.compile(r"%(?:[0-9A-Fa-f]{2}|[Uu][0-9A-Fa-f]{4})")


class InvalidTenantId(Refused):
    """A tenant id that breaks a rule.

    Its ``rule`` is one of ``"empty"``, ``"too-long"``, ``"slash"``,
    ``"control-character"``, ``"percent-escape"``, ``"dot-segment"``,
    ``"not-a-string"`` (and ``"not-utf-8"`` for a token's project id that
    ``tenant_path`` cannot read as text).
    """


class UnknownPathSegment(Refused):
    """A segment after the version that a :class:`TenantLayout` cannot tell apart: answered ``404``.

    Its ``rule`` is ``"unknown-path-segment"`` (error code
    ``tenancy.unknown-path-segment``); ``value`` is the segment.

    Example::

        >>> from tenancy_mw.core.paths import canonicalize
        >>> try:
        ...     TenantLayout(tenant_id_pattern="[0-9a-f]+").tenant_index(canonicalize("/v3/os-widgets"))
        ... except UnknownPathSegment as exc:
        ...     print(exc.status, exc.rule, exc.value)
        404 unknown-path-segment os-widgets
    """

    status = 404


class LayoutError(ValueError):
    """A :class:`TenantLayout` built from a bad option value.

    :ivar option: the option's name (``version_pattern``, ``tenant_in_path``,
        ``tenantless_collections``, ``extra_tenantless_collections`` or
        ``tenant_id_pattern``).
    :ivar value: the bad value.
    :ivar reason: why it is refused.

    Example::

        >>> try:
        ...     TenantLayout(tenant_in_path="sometimes")
        ... except LayoutError as exc:
        ...     print(exc.option, exc.value)
        tenant_in_path sometimes
    """

    def __init__(self, option: str, value: object, reason: str) -> None:
        super().__init__("option %s = %r is invalid: %s" % (option, value, reason))
        self.option = option
        self.value = value
        self.reason = reason


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
        tenancy_mw.tenants.ids.InvalidTenantId: Tenant id 'resel/sub/acct' contains '/', ...
    """
    if not isinstance(tenant_id, str):
        raise InvalidTenantId("not-a-string", "Tenant id %r is not a string." % (tenant_id,), tenant_id)
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
            "Tenant id %r contains '/', the path separator, which no tenant id may contain." % shorten(tenant_id),
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
    return quote(validate_tenant_id(tenant_id), safe=SAFE_IN_SEGMENT)


def split_tenant_path(path: str, version_pattern: str = DEFAULT_VERSION_PATTERN) -> TenantPathParts | None:
    """Split a raw (still percent-encoded) path into version, tenant id and rest.

    The version is the first segment, which must match *version_pattern*;
    the tenant id is the next one: the tenants spec's own layout
    (``tenant_in_path = always``; :class:`TenantLayout` decides for other
    layouts).  Returns ``None`` for a path that has no
    tenant segment (``/``, ``/v2.1``, ``/v2.1/``, ``/healthcheck``).  Raises
    :class:`~tenancy_mw.core.paths.PathRefused` for a path with no canonical form
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
    rest = "".join("/" + s for s in raw_segments[tenant_index + 1 :])
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


def tenant_segment_index(canonical: CanonicalPath, pattern: re.Pattern, prefix_length: int = 0) -> int:
    """Index of the tenant segment in *canonical*, or -1 if it has none.

    The version segment is the one :func:`find_version` reads, the first
    *prefix_length* segments being the mount point; the tenant segment
    follows it, whatever it is: the ``always`` layout of
    :class:`TenantLayout`, which reads the other two.

    Example::

        >>> from tenancy_mw.core.paths import canonicalize
        >>> tenant_segment_index(canonicalize("/v2.1/servers"), re.compile(DEFAULT_VERSION_PATTERN))
        1
    """
    index = find_version(canonical.segments, pattern, prefix_length)
    if index < 0 or index + 1 >= len(canonical.segments):
        return -1
    return index + 1


class TenantLayout:
    """Where a service's URLs carry the tenant: the one decision every tenant-using filter shares.

    Built from the five options of :func:`tenant_layout_opts`:

    ``version_pattern``
        What a whole version segment matches; the tenant, if any, follows it.
        The version is the last segment of the mount point (``SCRIPT_NAME``)
        when it matches, else the first segment after it
        (:func:`find_version`).
    ``tenant_in_path``
        ``"optional"`` (the default): the segment after the version is the
        tenant unless it is one of ``tenantless_collections`` (or such a
        name with a format suffix, ``volumes.json``, which the Routes
        library routes as ``volumes``), as nova's and cinder's routers read
        it.  ``"always"``: it is always the tenant (the tenants spec's
        layout).  ``"never"``: no path carries a tenant.
    ``tenantless_collections``
        The names the service routes without a tenant; compared exactly
        (case-sensitive, as Routes compares them).  Giving it replaces the
        default list.
    ``extra_tenantless_collections``
        More such names, added to ``tenantless_collections``: the way to add
        a collection the default list lacks and keep the others.
    ``tenant_id_pattern``
        ``None`` (any valid tenant id), or a regular expression every path
        tenant fully matches.  With it, a segment that is neither a listed
        collection nor a match cannot be told apart, and
        :meth:`tenant_index` refuses it (:class:`UnknownPathSegment`, 404):
        fail closed, never guess.

    A bad value raises :class:`LayoutError` naming the option.

    Example::

        >>> from tenancy_mw.core.paths import canonicalize
        >>> layout = TenantLayout()
        >>> layout.tenant_index(canonicalize("/v2.1/6f70656e/servers"))
        1
        >>> layout.tenant_index(canonicalize("/v2.1/servers/detail"))
        -1
        >>> TenantLayout(tenant_in_path="always").tenant_index(canonicalize("/v2.1/servers"))
        1
        >>> nova = TenantLayout(tenant_id_pattern="[0-9a-f-]+")
        >>> nova.tenant_index(canonicalize("/v2.1/os-widgets"))
        Traceback (most recent call last):
          ...
        tenancy_mw.tenants.ids.UnknownPathSegment: Path segment 'os-widgets' after version 'v2.1' is ...
        >>> TenantLayout(tenantless_collections=["a/b"])
        Traceback (most recent call last):
          ...
        tenancy_mw.tenants.ids.LayoutError: option tenantless_collections = 'a/b' is invalid: ...
    """

    __slots__ = ("collections", "tenant_id_pattern", "tenant_in_path", "tenant_re", "version_pattern", "version_re")

    def __init__(
        self,
        version_pattern: str = DEFAULT_VERSION_PATTERN,
        tenant_in_path: str = "optional",
        tenantless_collections: Iterable[str] = DEFAULT_TENANTLESS_COLLECTIONS,
        tenant_id_pattern: str | None = None,
        extra_tenantless_collections: Iterable[str] = (),
    ) -> None:
        self.version_pattern = version_pattern
        try:
            self.version_re = compile_version_pattern(version_pattern)
        except ValueError as exc:
            raise LayoutError("version_pattern", version_pattern, str(exc)) from None
        if tenant_in_path not in LAYOUTS:
            raise LayoutError("tenant_in_path", tenant_in_path, "choose one of %s" % ", ".join(LAYOUTS))
        self.tenant_in_path = tenant_in_path
        self.collections = frozenset(
            _segment_names("tenantless_collections", tenantless_collections)
            + _segment_names("extra_tenantless_collections", extra_tenantless_collections)
        )
        self.tenant_id_pattern = tenant_id_pattern or None
        self.tenant_re = _compile("tenant_id_pattern", tenant_id_pattern) if tenant_id_pattern else None

    @classmethod
    def from_options(
        cls, options: Any, config_error: Callable[[str, Any, str], Exception] | None = None
    ) -> TenantLayout:
        """The layout of a filter's option values (``options.version_pattern`` and the four others).

        A bad value raises ``config_error(option, value, reason)`` (a
        filter's :meth:`~tenancy_mw.core.base.TenancyMiddleware.config_error`, so
        the ``ConfigError`` names the filter), or :class:`LayoutError`
        without it.

        Example::

            >>> from types import SimpleNamespace
            >>> options = SimpleNamespace(version_pattern="v[0-9]+", tenant_in_path="never",
            ...                           tenantless_collections=[], tenant_id_pattern=None,
            ...                           extra_tenantless_collections=[])
            >>> TenantLayout.from_options(options).tenant_in_path
            'never'
        """
        try:
            return cls(
                options.version_pattern,
                options.tenant_in_path,
                options.tenantless_collections,
                options.tenant_id_pattern,
                options.extra_tenantless_collections,
            )
        except LayoutError as exc:
            if config_error is None:
                raise
            raise config_error(exc.option, exc.value, exc.reason) from None

    def is_collection(self, segment: str) -> bool:
        """Whether *segment* names a tenant-less collection: a listed name, or one with a format suffix.

        Example::

            >>> TenantLayout().is_collection("volumes.json"), TenantLayout().is_collection("Servers")
            (True, False)
        """
        if segment in self.collections:
            return True
        # Routes serves "{collection}.:(format)" too: volumes.json is volumes.
        head, dot, tail = segment.rpartition(".")
        return bool(dot and tail and head in self.collections)

    def tenant_index(self, canonical: CanonicalPath, prefix_length: int = 0) -> int:
        """Index of the tenant segment in *canonical*, or -1 when the path carries none.

        The first *prefix_length* segments are the mount point (a filter
        passes ``canonical.prefix_length``, the segments of ``SCRIPT_NAME``,
        less a tenant segment its ``tenant_path`` stripped into it:
        :func:`tenancy_mw.tenants.path_filter.mount_length`).  The version is the
        mount's last segment when ``version_pattern`` matches it, else the
        first segment after the mount when it matches
        (:func:`find_version`): the service's own mount is appended to
        ``SCRIPT_NAME`` last, so a proxy's forwarded prefix before it is
        never read, and no tenant is ever taken from inside the mount.
        Raises :class:`UnknownPathSegment` for a segment the layout cannot
        tell apart (see the class).  An empty segment is left to the
        caller, which refuses it as a tenant id.

        Example (nova's ``/v2.1`` mount: the version is in ``SCRIPT_NAME``)::

            >>> from tenancy_mw.core.paths import canonicalize
            >>> mounted = canonicalize("/v2.1/6f70656e/servers", prefix_length=1)
            >>> TenantLayout().tenant_index(mounted, mounted.prefix_length)
            1
            >>> TenantLayout(tenant_in_path="never").tenant_index(mounted, mounted.prefix_length)
            -1

        A client's ``X-Forwarded-Prefix: /v1/aaaa`` before that mount::

            >>> forwarded = canonicalize("/v1/aaaa/v2.1/servers", prefix_length=3)
            >>> TenantLayout().tenant_index(forwarded, forwarded.prefix_length)
            -1
        """
        mode = self.tenant_in_path
        if mode == "never":
            return -1
        # find_version(), inlined: this runs on every request.  index is the tenant's, after the version.
        segments = canonical.segments
        match = self.version_re.fullmatch
        if 0 < prefix_length <= len(segments) and match(segments[prefix_length - 1]):
            index = prefix_length
        elif 0 <= prefix_length < len(segments) and match(segments[prefix_length]):
            index = prefix_length + 1
        else:
            return -1
        if index >= len(segments):
            return -1
        segment = segments[index]
        if mode == "optional" and (segment in self.collections or ("." in segment and self.is_collection(segment))):
            return -1
        tenant_re = self.tenant_re
        if tenant_re is not None and segment and not tenant_re.fullmatch(segment):
            raise self._unknown(segment, segments[index - 1])
        return index

    def _unknown(self, segment: str, version: str) -> UnknownPathSegment:
        if self.tenant_in_path == "always":
            detail = "Tenant segment %r after version %r does not match this service's tenant ids (%r)." % (
                shorten(segment),
                shorten(version),
                self.tenant_id_pattern,
            )
        else:
            # Not "tenantless_collections": giving that option replaces the default
            # list, and following the advice would make /v2.1/servers a tenant.
            detail = (
                "Path segment %r after version %r is neither a tenant id of this service (%r) nor one of its "
                "tenant-less collections; if the service serves %r without a project id, add it to the "
                "extra_tenantless_collections option of every tenancy_mw filter (it adds to the default "
                "tenantless_collections)."
                % (shorten(segment), shorten(version), self.tenant_id_pattern, shorten(segment))
            )
        return UnknownPathSegment("unknown-path-segment", detail, segment)


def _segment_names(option: str, names: Iterable[str] | None) -> list[str]:
    """The names of a collections option, stripped, empty ones left out; :class:`LayoutError` for a bad one."""
    found = []
    for name in names or ():
        name = name.strip() if isinstance(name, str) else name
        if name == "":
            continue
        try:
            validate_tenant_id(name)
        except InvalidTenantId as exc:
            raise LayoutError(option, name, "not a path segment: " + exc.detail) from None
        found.append(name)
    return found


def _compile(option: str, pattern: object) -> re.Pattern:
    if not isinstance(pattern, str):
        raise LayoutError(option, pattern, "a regular expression is required")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise LayoutError(option, pattern, str(exc)) from None


def tenant_layout_opts() -> list:
    """New copies of the layout options: ``version_pattern``, ``tenant_in_path``,
    ``tenantless_collections``, ``extra_tenantless_collections``, ``tenant_id_pattern``.

    Declared once here; ``tenant_path``, ``tenant_admin`` and ``id_resolver``
    each add a copy to their own options (so each keeps its own defaults)
    and build a :class:`TenantLayout` from them with
    :meth:`TenantLayout.from_options`.  oslo.config is imported only here,
    when called.

    Example::

        >>> [opt.dest for opt in tenant_layout_opts()]
        ['version_pattern', 'tenant_in_path', 'tenantless_collections', 'extra_tenantless_collections',
         'tenant_id_pattern']
    """
    from oslo_config import cfg

    return [
        version_pattern_opt(
            "). The version is the last segment of the mount point (SCRIPT_NAME) when it matches, else the first "
            "segment after the mount; the tenant, when the path carries one, is the segment after it."
        ),
        _tenant_in_path_opt(),
        cfg.ListOpt(
            "tenantless_collections",
            default=list(DEFAULT_TENANTLESS_COLLECTIONS),
            help="Names the service routes right after the version segment without a tenant (tenant_in_path = "
            "optional): such a segment, or the name with a format suffix (volumes.json), is never a tenant. "
            "Compared exactly. The default holds every such name of nova 34 and cinder 29; a value replaces it, so "
            "to add a name keep the default and use extra_tenantless_collections.",
        ),
        cfg.ListOpt(
            "extra_tenantless_collections",
            default=[],
            help="More names the service routes without a tenant, added to tenantless_collections (which keeps "
            "its default): the way to add a collection the default list lacks, as a "
            "tenancy.unknown-path-segment 404 advises.",
        ),
        cfg.StrOpt(
            "tenant_id_pattern",
            help="Regular expression every tenant id in a path fully matches, e.g. [0-9a-f-]+ as nova's and "
            "cinder's routers take project ids. A segment after the version that matches neither it nor a "
            "tenant-less collection is answered 404 (tenancy.unknown-path-segment). Unset: any valid tenant id.",
        ),
    ]


def _tenant_in_path_opt() -> object:
    """The ``tenant_in_path`` option of :func:`tenant_layout_opts`: its three layouts."""
    from oslo_config import cfg

    return cfg.StrOpt(
        "tenant_in_path",
        default="optional",
        choices=[
            (
                "optional",
                "/{version}/{tenant}/... and /{version}/{collection}/..., as nova and cinder route: the segment "
                "after the version is the tenant unless it is one of tenantless_collections",
            ),
            ("always", "/{version}/{tenant}/... only (the tenants spec's layout)"),
            ("never", "no path carries the tenant (tenant_path's token_tenant takes the token's project)"),
        ],
        help="Where the service's URLs carry the tenant. Give every tenancy_mw filter of a pipeline the same "
        "layout options; a filter after tenant_path follows tenant_path's decision.",
    )
