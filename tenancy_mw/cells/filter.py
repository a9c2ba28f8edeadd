"""``id_resolver``: find which cell database a resource id belongs to.

A service that keeps its records in several cell databases (nova's cells
v2) cannot tell from an integer id which cell's record a client means: two
cells may both have a service with id 5.  The uuids spec
(``service-hyper-uuid-in-api``) answers with a microversion from which ids
are uuids.  This filter does the finding for the service, before its code
runs, and never lets a request act on the wrong cell's record:

- At or above ``uuid_microversion`` the id must be a uuid in canonical
  hyphenated form (any case), else ``400``.  Every cell is asked at once;
  the cell that has it answers.
- Below it the id must be a decimal integer, else ``400``; a uuid there is
  ``400`` too, naming the microversion that takes uuids.  An integer id in
  exactly one cell passes; in several cells it is ``400``, explaining the
  ambiguity and naming the microversion that fixes it (for every
  configured resource: nova does this for services only and silently takes
  the first cell's hypervisor).
- Found nowhere: ``404``.  When a cell did not answer within
  ``cell_timeout`` and the answer could depend on it, ``503`` with
  ``Retry-After``, never a false ``404`` or a guess.

What the service gets, on a request that passes
    ``environ['tenancy.cell']`` (the cell's name), ``environ['tenancy.resource_id']``
    (the integer id, an ``int``) and ``environ['tenancy.resource_uuid']`` (the
    row's uuid, a ``str``; ``None`` below the switch for a row not yet
    backfilled), and ``environ['tenancy.resource_table']`` (the table, as
    written in ``resources``: check it before acting, should your router
    read the path differently).  The path itself is not changed.

Which requests it looks at
    Those whose canonical path (:mod:`tenancy_mw.core.paths`), after the version
    segment and, when the path carries one, the tenant segment, follows a
    ``resources`` route: nova serves ``/v2.1/os-services/5`` and
    ``/v2.1/{project_id}/os-services/5`` alike, and both follow
    ``/os-services/{id}``.  Whether the path carries a tenant is
    ``tenant_path``'s decision when it runs before this filter, else this
    filter's own URL layout options (:class:`~tenancy_mw.tenants.ids.TenantLayout`);
    that reading is tried first, then the other, since the service's
    router may read the path either way.  A tenant-owned resource
    (``tenant=COLUMN``) is looked up only under the reading of the
    request's tenant (``environ['tenancy.tenant_id']``: its path segment,
    or with ``tenant_path``'s ``token_tenant`` the token's project when the
    path carries none), never under a collection name.  Empty segments
    (``//``) are ignored and a trailing slash does not matter; literal
    segments compare exactly.  Every method is looked at.  Everything else
    passes untouched, without its version even being read.

Versions
    Read with microversion-parse (``get_version`` with
    ``legacy_version_header``, then ``parse_version_string``): the
    ``OpenStack-API-Version: <type> X.Y`` header wins over the legacy one.
    No header means the service's minimum (``min_microversion`` if set;
    either way below the switch), ``latest`` means ``max_microversion``.  A
    malformed version is ``400``; one above ``max_microversion`` (or below
    ``min_microversion``) is ``406``, as nova answers.  Every answer of this
    filter about an id carries ``Vary`` on the version headers (a path with
    no canonical form is refused whatever its version, without it).

Usage in ``api-paste.ini``::

    [filter:id_resolver]
    use = egg:tenancy_mw#id_resolver
    cells = cell1=postgresql+psycopg2://nova@db1/nova, cell2=postgresql+psycopg2://nova@db2/nova
    resources =
        /os-services/{id} services id uuid except=enable,disable,disable-log-reason,force-down
        /os-hypervisors/{id} compute_nodes id uuid except=detail,statistics
        /os-hypervisors/{id}/uptime compute_nodes id uuid
    uuid_microversion = compute 2.53
    max_microversion = 2.90
    legacy_version_header = X-OpenStack-Nova-API-Version
    cell_timeout = 2

From Python, the filter::

    >>> from tenancy_mw.cells.filter import IdResolver
    >>> def service(environ, start_response):
    ...     start_response("204 No Content", [])
    ...     return []
    >>> app = IdResolver(service, {"cells": "cell1=sqlite://, cell2=sqlite://",
    ...                            "resources": "/os-services/{id} services id uuid",
    ...                            "uuid_microversion": "compute 2.53", "max_microversion": "2.90"})
    >>> from webtest import TestApp
    >>> TestApp(app).get("/v2.1/os-services/five", status=400).json["errors"][0]["code"]
    'tenancy.invalid-id.not-an-integer'
    >>> app.lookup.close()

and the same lookups without WSGI: :class:`tenancy_mw.cells.lookup.CellLookup`
(``lookup.resolve("services", some_id, by_uuid=True)``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.cells.ids import (
    MAX_CELL_TIMEOUT,
    InvalidId,
    SpecError,
    VersionRefused,
    looks_like_uuid,
    parse_cells,
    parse_integer_id,
    parse_resources,
    parse_service_version,
    parse_uuid,
    parse_version,
    requested_version,
)
from tenancy_mw.cells.outcomes import AmbiguousId, CellsUnavailable, Lookup, RecordNotFound, Resolved, outcome
from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.microversions import is_header_name
from tenancy_mw.core.paths import CanonicalPath, PathRefused, canonical_path, shorten
from tenancy_mw.tenants.ids import TenantLayout, UnknownPathSegment, find_version, tenant_layout_opts
from tenancy_mw.tenants.path_filter import (
    TENANT_ID_KEY,
    TENANT_SEGMENT_KEY,
    TENANT_SOURCE_KEY,
    header_environ_key,
    mount_length,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from tenancy_mw.cells.ids import Resource

__all__ = [
    "CELL_KEY",
    "RESOURCE_ID_KEY",
    "RESOURCE_TABLE_KEY",
    "RESOURCE_UUID_KEY",
    "IdResolver",
    "list_opts",
    "set_defaults",
]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.id_resolver")

#: The name of the cell that holds the request's record.
CELL_KEY = "tenancy.cell"
#: The record's integer id (an ``int``).
RESOURCE_ID_KEY = "tenancy.resource_id"
#: The record's uuid (a ``str``, or ``None`` for a row without one yet).
RESOURCE_UUID_KEY = "tenancy.resource_uuid"
#: The table the record is in (as written in ``resources``), so the service can check the
#: id was resolved for the resource it is about to act on.
RESOURCE_TABLE_KEY = "tenancy.resource_table"

_STANDARD_HEADER = "OpenStack-API-Version"

OPTS = [
    cfg.StrOpt(
        "cells",
        default="",
        secret=True,
        help="The cell databases: comma-separated name=SQLAlchemy-URL items, e.g. "
        "'cell1=sqlite:////var/lib/c1.db, cell2=postgresql+psycopg2://u@db2/nova'. A comma inside a URL "
        "must be written %2C.",
    ),
    cfg.MultiStrOpt(
        "resources",
        default=[],
        help="The resources whose ids are resolved, one per line: ROUTE TABLE ID_COLUMN UUID_COLUMN "
        "[except=WORD,...] [tenant=COLUMN], e.g. '/os-services/{id} services id uuid'. ROUTE is matched after "
        "the version segment and the tenant segment if any; it may go on after {id}. except= lists words the "
        "service routes on itself in the id's place (detail, statistics), passed on untouched. tenant= names "
        "the column of a tenant-owned resource's tenant id: only the rows of the tenant_path filter's tenant "
        "are looked at.",
    ),
    cfg.StrOpt(
        "uuid_microversion",
        default="",
        help="The service type and the microversion from which ids are uuids, e.g. 'compute 2.53'.",
    ),
    cfg.StrOpt(
        "max_microversion",
        default="",
        help="The service's newest microversion, which 'latest' means; a request above it gets 406.",
    ),
    cfg.StrOpt(
        "min_microversion",
        help="The service's oldest microversion, which a request without a version header is served at; "
        "a request below it gets 406. Unset: it is below uuid_microversion and lower versions are not refused.",
    ),
    cfg.StrOpt(
        "legacy_version_header",
        help="A service-specific version header read when OpenStack-API-Version names no version for the "
        "service, e.g. X-OpenStack-Nova-API-Version.",
    ),
    cfg.FloatOpt(
        "cell_timeout",
        default=2.0,
        min=0.01,
        max=MAX_CELL_TIMEOUT,
        help="Seconds each cell has to answer a lookup (connecting included). A cell that does not answer "
        "in time makes the answer 503 wherever it could change it.",
    ),
    cfg.IntOpt(
        "pool_size",
        default=5,
        min=1,
        help="Connections (and threads) per cell database: the most lookups a cell runs at once. More wait "
        "in the cell's own queue, within cell_timeout; beyond 4 waiting per connection, a cell that has not "
        "answered any lookup for cell_timeout seconds counts as not answering at once.",
    ),
    cfg.IntOpt(
        "pool_recycle",
        default=600,
        min=1,
        help="Seconds after which a pooled connection is replaced (keep it below the servers' idle timeouts).",
    ),
    # Routes are matched after the version segment and the tenant segment, if any: tenant_path's
    # decision when it ran before this filter, else these options'.
    *tenant_layout_opts(),
]


class IdResolver(TenancyMiddleware):
    """WSGI filter that resolves resource ids across cell databases; see the module documentation.

    :ivar lookup: the :class:`~tenancy_mw.cells.lookup.CellLookup` it asks
        the cells with (one engine per cell, made at load).
    """

    opt_group = "id_resolver"
    opts = OPTS

    def __init__(
        self, application: WSGIApplication, conf: dict | cfg.ConfigOpts | None = None, *, lookup: Lookup | None = None
    ) -> None:
        """Load the filter in front of *application*; *lookup*, if given, replaces the ``cells`` option.

        *lookup* is anything with :class:`~tenancy_mw.cells.lookup.CellLookup`'s ``find_id`` and
        ``close`` (:class:`~tenancy_mw.cells.outcomes.Lookup`): a service whose records are not
        in SQL databases, or that builds its lookup itself.  Without it, the ``cells`` option's
        databases are asked, which needs the ``sql`` extra.
        """
        self._given_lookup = lookup
        super().__init__(application, conf)

    def configure(self, options) -> None:
        """Parse every option; a bad one raises ConfigError naming it.  Creates the cells' engines."""
        cells = self._cells(options)
        try:
            self.resources = parse_resources(options.resources)
        except SpecError as exc:
            raise self.config_error("resources", options.resources, str(exc)) from None
        try:
            self.service_type, self.switch = parse_service_version(options.uuid_microversion)
        except SpecError as exc:
            raise self.config_error("uuid_microversion", options.uuid_microversion, str(exc)) from None
        try:
            self.maximum = parse_version(options.max_microversion)
        except SpecError as exc:
            raise self.config_error("max_microversion", options.max_microversion, str(exc)) from None
        if self.maximum < self.switch:
            raise self.config_error("max_microversion", options.max_microversion, "it is below uuid_microversion")
        self.minimum = None
        if options.min_microversion:
            try:
                self.minimum = parse_version(options.min_microversion)
            except SpecError as exc:
                raise self.config_error("min_microversion", options.min_microversion, str(exc)) from None
            if self.minimum >= self.switch:
                raise self.config_error(
                    "min_microversion", options.min_microversion, "it must be below uuid_microversion"
                )
        header = options.legacy_version_header
        if header is not None and not is_header_name(header):
            raise self.config_error("legacy_version_header", header, "not an HTTP header name")
        self.legacy_headers = [header] if header else []
        # Only the version headers are handed to microversion-parse, not every HTTP_ key.
        self.header_keys = ["HTTP_OPENSTACK_API_VERSION"] + [header_environ_key(h) for h in self.legacy_headers]
        self.vary = ("Vary", ", ".join([_STANDARD_HEADER] + self.legacy_headers))
        self.layout = TenantLayout.from_options(options, self.config_error)
        self.version_re = self.layout.version_re
        self.routes_by_length: dict[int, list] = {}
        for resource in self.resources:
            self.routes_by_length.setdefault(len(resource.segments), []).append(resource)
        self.retry_after = str(max(1, math.ceil(options.cell_timeout)))
        given = self._given_lookup
        self.lookup: Lookup = given if given is not None else self._sql_lookup(cells, options)

    def _cells(self, options) -> dict[str, str]:
        """The ``cells`` option's databases: none when a lookup was given instead."""
        hidden = "(hidden: it may hold passwords)"
        if self._given_lookup is not None:
            if options.cells:
                raise self.config_error("cells", hidden, "give the cells option or a lookup, not both")
            return {}
        try:
            return parse_cells(options.cells)
        except SpecError as exc:
            raise self.config_error("cells", hidden, str(exc)) from None

    @staticmethod
    def _sql_lookup(cells: dict[str, str], options) -> Lookup:
        """A :class:`~tenancy_mw.cells.lookup.CellLookup` of *cells*, with one engine per cell."""
        # Imported here: only a filter that queries databases needs the sql extra (MissingExtra names it).
        from tenancy_mw.cells.lookup import CellLookup

        return CellLookup(
            cells, cell_timeout=options.cell_timeout, pool_size=options.pool_size, pool_recycle=options.pool_recycle
        )

    def match(self, environ: dict):
        """``(resource, id segment, owner)`` of the request, or ``None`` if no route matches.

        Routes are matched after the tenant segment when the path carries
        one, else after the version (``tenant_path``'s decision when it ran,
        else this filter's own layout); then, since the service's router may
        read the path the other way, after the other reading.  *owner* is the
        tenant whose rows a tenant-owned resource is looked up in:
        ``environ['tenancy.tenant_id']`` when the route followed that
        tenant's own reading (its path segment, or no segment for the
        token's tenant), else ``None``: no tenant may be used.  Empty
        segments are ignored.  Raises PathRefused.
        """
        canonical = canonical_path(environ)
        segments = canonical.segments
        # The version is read as tenant_path reads it: the mount's last segment, else the one after the mount.
        mount = mount_length(environ, canonical)
        if "" in segments:
            mount -= segments[:mount].count("")
            segments = canonical.collapsed
        version = find_version(segments, self.version_re, mount)
        if version < 0:
            return None
        # The route under each reading before anything else: most requests follow no route, and
        # need no decision about their tenant.
        matches = self._route_matches(segments, version)
        if not matches:
            return None
        tenant_at = self._tenant_at(environ, canonical, segments, mount)
        tenant = environ.get(TENANT_ID_KEY)
        if tenant_at >= 0:
            readings = ((tenant_at + 1, tenant if tenant == segments[tenant_at] else None), (version + 1, None))
        else:
            token = tenant if environ.get(TENANT_SOURCE_KEY) == "token" else None
            readings = ((version + 1, token), (version + 2, None))
        for start, owner in readings:
            if start in matches:
                resource, ident = matches[start]
                return resource, ident, owner
        return None

    def _route_matches(self, segments: tuple[str, ...], version: int) -> dict[int, tuple[Resource, str]]:
        """``{start: (resource, id segment)}`` of the routes *segments* follow from *start* on.

        *start* is just after the version (no tenant segment) or one further (a tenant segment).
        """
        matches = {}
        routes = self.routes_by_length
        for start in (version + 1, version + 2):
            candidates = routes.get(len(segments) - start)
            if candidates:
                tail = segments[start:]
                for resource in candidates:
                    ident = resource.match(tail)
                    if ident is not None:
                        matches[start] = (resource, ident)
                        break
        return matches

    def _tenant_at(self, environ: dict, canonical: CanonicalPath, segments: tuple[str, ...], mount: int) -> int:
        """Index in *segments* (empty ones left out; *mount* of them the mount's) of the path's tenant, -1 for none."""
        decided = environ.get(TENANT_SEGMENT_KEY)
        if decided is not None:
            # tenant_path's index counts the empty segments; these do not.
            return decided - canonical.segments[:decided].count("") if decided >= 0 else -1
        try:
            own = canonical if segments is canonical.segments else CanonicalPath(segments, canonical.trailing_slash)
            return self.layout.tenant_index(own, mount)
        except UnknownPathSegment:
            # Neither reading is known to be a tenant's: no tenant-owned row is looked at.
            return -1

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Hand on a request whose path names a resource with its record's cell, or refuse it."""
        try:
            matched = self.match(environ)
        except PathRefused as exc:
            return self.refuse_path(environ, start_response, exc)
        if matched is None or matched[1] in matched[0].except_words:
            return self.application(environ, start_response)
        resource, ident, owner = matched
        try:
            by_uuid = self._asks_for_uuids(environ)
            key = self._key(ident, by_uuid)
            tenant = self._tenant(resource, owner, ident, by_uuid)
            resolved = self._resolve(resource, ident, key, by_uuid, tenant)
        except Refusal as refusal:
            return self._answer_varied(environ, start_response, refusal)
        self._hand_on(environ, resource, resolved)
        return self.application(environ, start_response)

    def _asks_for_uuids(self, environ: WSGIEnvironment) -> bool:
        """The microversion gate: whether the request's version takes uuids (else integer ids)."""
        try:
            version = requested_version(
                {key: environ[key] for key in self.header_keys if key in environ},
                self.service_type,
                maximum=self.maximum,
                minimum=self.minimum,
                legacy_headers=self.legacy_headers,
            )
        except VersionRefused as exc:
            code = "tenancy.bad-version" if exc.status == 400 else "tenancy.version-not-acceptable"
            raise Refusal(exc.status, code, exc.detail) from None
        return version is not None and version >= self.switch

    def _key(self, ident: str, by_uuid: bool) -> int | str:
        """The uuid or integer id *ident* spells, as the gate asks for; else refused with 400."""
        if not by_uuid and looks_like_uuid(ident):
            raise Refusal(
                400,
                "tenancy.uuid-needs-microversion",
                "Id %r is a uuid; uuids are taken from microversion %s on (ask for it with the "
                "%s header), integer ids below it." % (ident, self.switch, _STANDARD_HEADER),
            )
        try:
            return parse_uuid(ident) if by_uuid else parse_integer_id(ident)
        except InvalidId as exc:
            raise Refusal(400, "tenancy.invalid-id." + exc.rule, exc.detail) from None

    @staticmethod
    def _tenant(resource: Resource, owner: str | None, ident: str, by_uuid: bool) -> str | None:
        """The tenant whose rows a tenant-owned *resource* is looked up in (``None``: not tenant-owned)."""
        if resource.tenant_column is None:
            return None
        if owner is None:
            # A tenant-owned resource with no tenant, or at a reading of the path that is not its
            # tenant's (a collection name is never one): nothing of it is visible, never another
            # reading's tenant's record.
            raise Refusal(
                404,
                "tenancy.not-found",
                "No record has %s %r here: a tenant's record is found only under its tenant (its URL, or "
                "its token with tenant_path's token_tenant)." % ("uuid" if by_uuid else "id", shorten(ident)),
            )
        return owner

    def _resolve(self, resource: Resource, ident: str, key: int | str, by_uuid: bool, tenant: str | None) -> Resolved:
        """The one cell and row of *key*, asked of every cell (in *tenant*'s rows); else refused: 404/400/503."""
        found = self.lookup.find_id(
            resource.table,
            key,
            by_uuid=by_uuid,
            id_column=resource.id_column,
            uuid_column=resource.uuid_column,
            tenant_column=resource.tenant_column,
            tenant=tenant,
        )
        try:
            return outcome(found, resource.table, key, by_uuid)
        except RecordNotFound:
            raise Refusal(
                404, "tenancy.not-found", "No record has %s %r." % ("uuid" if by_uuid else "id", shorten(ident))
            ) from None
        except AmbiguousId as exc:
            LOG.warning("id_resolver: %s id %s is in cells %s", resource.table, key, ", ".join(exc.cells))
            raise self._ambiguous(key, exc) from None
        except CellsUnavailable as exc:
            LOG.warning("id_resolver: %s", exc)
            raise self._unavailable(ident, exc) from None

    def _ambiguous(self, key: int | str, exc: AmbiguousId) -> Refusal:
        """The 400 of an integer id in several cells, naming the microversion that takes uuids."""
        return Refusal(
            400,
            "tenancy.ambiguous-id",
            "Id %s refers to %d records in different cells, so it cannot say which one is meant. "
            "Use microversion %s or later (%s: %s %s) and the record's uuid instead."
            % (key, len(exc.cells), self.switch, _STANDARD_HEADER, self.service_type, self.switch),
        )

    def _unavailable(self, ident: str, exc: CellsUnavailable) -> Refusal:
        """The 503 of a lookup whose answer depends on cells that did not answer, with Retry-After."""
        return Refusal(
            503,
            "tenancy.cells-unavailable",
            "Id %r could not be looked up: %d cell database%s did not answer in time. Try again later."
            % (shorten(ident), len(exc.cells), "s" if len(exc.cells) > 1 else ""),
            (("Retry-After", self.retry_after),),
        )

    @staticmethod
    def _hand_on(environ: WSGIEnvironment, resource: Resource, resolved: Resolved) -> None:
        """Put the record's cell, table, id and uuid in *environ* for the service."""
        row = resolved.row
        environ[CELL_KEY] = resolved.cell
        environ[RESOURCE_TABLE_KEY] = resource.table
        environ[RESOURCE_ID_KEY] = row[resource.id_column]
        uuid = row[resource.uuid_column]
        # str(): a native uuid column may come back as uuid.UUID.
        environ[RESOURCE_UUID_KEY] = None if uuid is None else str(uuid)

    def _answer_varied(self, environ: dict, start_response: Callable, refusal: Refusal) -> list[bytes]:
        """Answer *refusal* with ``Vary`` first: the answer depends on the microversion headers."""
        varied = Refusal(refusal.status, refusal.code, refusal.detail, (self.vary, *refusal.headers))
        return self.answer(environ, start_response, varied)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.id_resolver`` ``oslo.config.opts`` namespace."""
    return IdResolver.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(cell_timeout=5.0)
        >>> [opt.default for opt in IdResolver.all_opts() if opt.dest == "cell_timeout"]
        [5.0]
        >>> set_defaults(cell_timeout=2.0)
    """
    IdResolver.set_defaults(**defaults)
