"""``tenant_admin``: the tenants spec's admin API for any service, and the tenant-state check.

The spec says every service MUST offer tenant admin calls on
``/{version}/{tenantId}``.  This filter answers them itself, from a tenant
registry in SQL (:mod:`tenancy_mw.tenants.registry`), so the wrapped
service does not have to:

============================================  ==========================================================
Call                                          Answer
============================================  ==========================================================
``GET /{v}/{t}``                              ``200`` and the representation, ``ETag`` and the metadata
                                              headers (``204`` with ``representations = false``;
                                              with ``version_discovery``, see below);
                                              ``404`` unknown or purged; ``410`` deleted
``HEAD /{v}/{t}``                             ``204``, the same headers, no body; ``404``/``410``
``PUT /{v}/{t}``                              ``201`` created, ``202`` modified (or unchanged: PUT is
                                              idempotent); body a JSON object (empty: ``{}``), at most
                                              ``max_body_bytes``; ``400``/``413``/``415`` for a bad
                                              body; ``409`` when deleted, or when the representation
                                              differs and ``updatable = false``
``DELETE /{v}/{t}``                           ``204`` (marked deleted, recoverable); ``404``; ``410``
``POST /{v}/{t}/action/restore``              ``200`` and the representation (``204`` without); ``404``;
                                              ``409`` when the tenant is not deleted
``GET /{v}/{t}/{path}/action/move?dest=D``    the move action document and its ``ETag``
``POST /{v}/{t}/{path}/action/move?dest=D``   ``303``, ``Location`` at the resource's new home; with
                                              ``If-Match``, only if the document's ETag still matches,
                                              else ``412``
``GET|POST /{v}/{t}/action/move?dest=D``      the same for all of the tenant's resources; ``303`` to
                                              the destination tenant, which keeps the source tenant
============================================  ==========================================================

Moves need ``move_provider``, a small interface the service implements
(:mod:`tenancy_mw.tenants.moves`); without it, move URLs go to the service.  Move
errors: ``400`` when ``dest`` is missing, repeated, not a valid tenant id
or the source itself; ``404`` when the destination tenant does not exist
(``409`` when it is deleted); ``404``/``410`` when the resource does not
exist or is deleted; ``400`` for an ``If-Match`` that is not a list of
entity tags.  A moved resource's old path answers ``301`` with
``Location`` at its new one (a move call there: at the move URL of the
new place).  With ``If-Match``, any change since the ``GET`` (the
resource moved, deleted, changed, a tenant changed) is ``412``.

Version discovery on the admin endpoint: ``version_discovery``
    ``/{v}/{t}`` is also the URL a compute client is given as its
    endpoint, and python-novaclient (the ``nova`` command line too) GETs it
    for the service's version document before anything else.  With
    ``version_discovery = true``, ``GET /{v}/{t}`` answers ``200`` with the
    tenant's representation (none with ``representations = false``) plus a
    ``version`` member: what the service itself answers, under that name,
    to a plain ``GET /{v}`` below the same mount (the filter asks it once
    per such GET, with none of the client's credentials, cookies, tenant
    header, conditions or version headers).  ``ETag`` and the metadata
    headers stay the tenant's (the ``ETag`` is the representation's, not
    the body's); ``HEAD`` is unchanged.  A ``PUT`` may send the ``version``
    member back as a ``GET`` showed it (it is dropped, not stored); any
    other ``version`` member is ``400``.  When the service has no such
    document, fails, or answers more than 64 KiB or JSON that is not
    JSON's, the tenant is shown as without the option (logged).

The tenant-state check
    Every other request under ``/{v}/{t}/...`` passes to the service only
    while the tenant is active: an unknown (or purged) tenant is answered
    ``404``, a deleted one ``410`` (``check_tenant_state``, on by default).
    A request whose tenant ``tenant_path`` took from the token
    (``token_tenant``, a path without a tenant) is checked the same way,
    and is never an admin call.  Run the same filter on the public endpoint
    with ``admin_api = false``: it answers no admin call (put ``admin_cull``
    before it, which culls them) and still checks tenant states and
    redirects moved resources.

Which paths name a tenant
    ``tenant_path``'s decision (``environ['tenancy.tenant_segment']``) when
    it runs before this filter; else this filter's own layout options
    (``tenant_in_path``, ``tenantless_collections``,
    ``extra_tenantless_collections``, ``tenant_id_pattern``,
    ``version_pattern``: :class:`~tenancy_mw.tenants.ids.TenantLayout`).  A
    collection is never a tenant: ``GET /v2.1/servers`` on the admin
    endpoint is the service's server list, passed on, not "get tenant
    servers".

Caching across worker processes
    The check reads tenant states from an in-process cache that keeps each
    state ``cache_ttl`` seconds (default 5), so checking a tenant does not
    cost a database round trip per request.  Each worker process (and
    host) has its own cache: a tenant deleted through one worker is seen as
    deleted by the others within ``cache_ttl`` seconds, and an id looked up
    before it was created is seen as unknown for at most as long.  The
    admin calls themselves always read the database.  ``cache_ttl = 0``
    reads the database on every request.

Consistency of moves
    A move, conditional or not, runs inside one registry transaction that
    locks both tenants' rows (``SELECT ... FOR UPDATE`` on PostgreSQL and
    MariaDB/MySQL, ``BEGIN IMMEDIATE`` on SQLite): the ``If-Match`` check
    and the move are atomic with respect to other moves, deletes and PUTs
    of those tenants, across processes and hosts.

Usage in ``api-paste.ini`` (after ``tenant_path``, which finds the tenant)::

    [pipeline:admin]
    pipeline = request_id tenant_path tenant_admin service

    [pipeline:public]
    pipeline = request_id admin_cull tenant_path tenant_admin_public service

    [filter:tenant_admin]
    use = egg:tenancy_mw#tenant_admin
    connection = postgresql+psycopg2://svc@db/svc
    move_provider = svc.moves:ServiceMoves

    [filter:tenant_admin_public]
    use = egg:tenancy_mw#tenant_admin
    connection = postgresql+psycopg2://svc@db/svc
    admin_api = false

The registry's tables come from ``tenancy-mw-manage db upgrade --url URL
--component tenants``; deleted tenants are removed for good by
``tenancy-mw-manage tenants purge --url URL --retention 30d``.

From Python::

    >>> import os, tempfile
    >>> from tenancy_mw import migrations
    >>> from tenancy_mw.tenants.admin_filter import TenantAdmin
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "tenants.sqlite")
    >>> migrations.upgrade(url, components=["tenants"])
    ['tenants']
    >>> def service_app(environ, start_response):
    ...     start_response("204 No Content", [])
    ...     return []
    >>> admin_app = TenantAdmin(service_app, {"connection": url})
    >>> from webtest import TestApp
    >>> TestApp(admin_app).get("/v2.1/acme/servers", status=404).json["errors"][0]["code"]
    'tenancy.tenant-not-found'
    >>> admin_app.close()
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from datetime import timezone
from email.utils import format_datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.paths import SAFE_IN_SEGMENT, CanonicalPath, PathRefused, canonical_path, shorten
from tenancy_mw.core.sql import error_summary
from tenancy_mw.extras import missing_extra
from tenancy_mw.tenants.ids import (
    InvalidTenantId,
    TenantLayout,
    UnknownPathSegment,
    tenant_layout_opts,
    validate_tenant_id,
)
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, load_provider
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY, TENANT_SEGMENT_KEY, TENANT_SOURCE_KEY, mount_length
from tenancy_mw.tenants.registry import (
    ACTIVE,
    DELETED,
    Tenant,
    TenantConflict,
    TenantGone,
    TenantNotFound,
    TenantRegistry,
    TenantStateCache,
    canonical_document_json,
)

try:
    import sqlalchemy as sa
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["TenantAdmin", "list_opts", "parse_if_match", "set_defaults"]

LOG = logging.getLogger(__name__)

OPTS = [
    cfg.StrOpt(
        "connection",
        secret=True,
        help="SQLAlchemy URL of the tenant registry database (required), e.g. "
        "postgresql+psycopg2://svc@db/svc. Every pipeline and host of a service uses the same one. "
        "Create its tables with: tenancy-mw-manage db upgrade --url URL --component tenants.",
    ),
    cfg.BoolOpt(
        "admin_api",
        default=True,
        help="Answer the tenant admin calls (GET/HEAD/PUT/DELETE of /{version}/{tenant}, restore, moves). "
        "false on a public endpoint: only the tenant-state check runs.",
    ),
    cfg.BoolOpt(
        "check_tenant_state",
        default=True,
        help="Answer 404 to requests under an unknown tenant and 410 under a deleted one, before the service.",
    ),
    cfg.FloatOpt(
        "cache_ttl",
        default=5.0,
        min=0,
        help="Seconds a worker process keeps a tenant's state for the tenant-state check. Other workers "
        "see a change within this time. 0: read the registry on every request.",
    ),
    cfg.IntOpt("cache_size", default=10000, min=1, help="Most tenant ids a worker keeps in its state cache."),
    cfg.BoolOpt(
        "representations",
        default=True,
        help="Keep the JSON representation operators PUT and return it on GET (200). false: GET answers "
        "204 and a PUT on an existing tenant 409.",
    ),
    cfg.BoolOpt(
        "updatable",
        default=True,
        help="Let a PUT change an existing tenant's representation (202). false: 409 unless it is the same.",
    ),
    cfg.IntOpt(
        "max_body_bytes",
        default=65536,
        min=2,
        max=1048576,
        help="Largest tenant representation a PUT may send, in bytes (413 beyond).",
    ),
    cfg.BoolOpt(
        "version_discovery",
        default=False,
        help="On the admin API, GET of a tenant also carries the service's version document: the member "
        "'version' of what the service answers at /{version} (the tenant segment dropped) is added to the "
        "representation (200). For clients that discover versions by GETting their endpoint, "
        "/{version}/{tenant} (python-novaclient and its nova command line). A PUT may send that member "
        "back as GET showed it (it is not stored); any other 'version' member is refused (400).",
    ),
    cfg.StrOpt(
        "move_provider",
        help="The service's move interface, as package.module:Name: a callable taking the wrapped WSGI app "
        "and returning a tenancy_mw.tenants.moves.MoveProvider. Unset: move URLs go to the service.",
    ),
    cfg.IntOpt(
        "move_list_limit",
        default=100,
        min=0,
        help="A tenant move action document lists the resources when there are at most this many; beyond, it "
        "carries one state tag for all of them.",
    ),
    cfg.BoolOpt(
        "redirect_moved",
        default=True,
        help="Answer 301, Location at the new place, when the service answers 404 under a moved resource's old path.",
    ),
    # In a pipeline with tenant_path, tenant_path's decision is followed; these decide without it.
    *tenant_layout_opts(),
]

#: The member of the service's version document that ``version_discovery`` adds to a tenant's GET.
DISCOVERY_MEMBER = "version"
#: The largest answer ``version_discovery`` reads from the service (a version document is about 500 bytes).
DISCOVERY_BODY_LIMIT = 65536
# What a version_discovery sub-request copies of the client's environ (and the wsgi.* keys).
_SUB_REQUEST_KEYS = frozenset(
    (
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "REMOTE_ADDR",
        "HTTPS",
        "HTTP_HOST",
        "HTTP_FORWARDED",
        "HTTP_X_FORWARDED_FOR",
        "HTTP_X_FORWARDED_HOST",
        "HTTP_X_FORWARDED_PORT",
        "HTTP_X_FORWARDED_PROTO",
        "HTTP_X_FORWARDED_PREFIX",
        "HTTP_X_OPENSTACK_REQUEST_ID",
        "openstack.request_id",
    )
)

_JSON_TYPES = re.compile(r"\s*application/(?:[\w.+-]+\+)?json\s*(?:;.*)?", re.IGNORECASE)
_ETAG_LIST = re.compile(r'\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*(?:,\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*)*')
_ETAG = re.compile(r'(W/)?"([\x21\x23-\x7e\x80-\xff]*)"')
_TENANT_ALLOW = "DELETE, GET, HEAD, PUT"
_MOVE_ALLOW = "GET, HEAD, POST"
_ACTION_ALLOW = "POST"


class _Answer(Exception):
    """An answer decided deep in a handler (an error or a redirect), rendered by the caller."""

    def __init__(self, status: int, code: str = "", detail: str = "", headers: tuple = (), location: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
        self.location = location


class _RegistryDown(Exception):
    """The registry database could not be read or written."""


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


def _quote(segment: str) -> str:
    return quote(segment, safe=SAFE_IN_SEGMENT)


def _http_date(moment) -> str:
    return format_datetime(moment.replace(tzinfo=timezone.utc), usegmt=True)


def _json_bytes(document: object) -> bytes:
    # ASCII escapes: a lone surrogate an operator PUT cannot break the answer.
    return json.dumps(document, ensure_ascii=True, sort_keys=True).encode("ascii")


def _reject_constant(name: str) -> None:
    raise ValueError("%s is not JSON" % name)


def _unique_object(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise ValueError("key %r appears more than once" % duplicate)
    return dict(pairs)


class TenantAdmin(TenancyMiddleware):
    """WSGI filter: the tenant admin API and the tenant-state check; see the module documentation.

    Example, in plain Python::

        >>> import os, tempfile, webtest
        >>> from tenancy_mw import migrations
        >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "tenants.sqlite")
        >>> _ = migrations.upgrade(url, ["tenants"])
        >>> def service(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [b"served"]
        >>> from tenancy_mw.tenants.path_filter import TenantPath
        >>> admin = TenantAdmin(service, {"connection": url})
        >>> app = webtest.TestApp(TenantPath(admin, {}))
        >>> app.get("/v2.1/acme/servers", status=404).json["errors"][0]["code"]
        'tenancy.tenant-not-found'
        >>> app.put_json("/v2.1/acme", {"tier": "gold"}).status
        '201 Created'
        >>> app.get("/v2.1/acme/servers").text
        'served'
        >>> admin.close()
    """

    opt_group = "tenant_admin"
    opts = OPTS

    def configure(self, options) -> None:
        """Check the options, build the registry (no connection yet) and load the move provider."""
        if not options.connection:
            raise self.config_error(
                "connection", options.connection, "the SQLAlchemy URL of the tenant registry is required"
            )
        try:
            url = sa.engine.make_url(options.connection)
        except sa.exc.ArgumentError as exc:
            raise self.config_error("connection", "***", "not a SQLAlchemy URL: %s" % exc) from None
        self.layout = TenantLayout.from_options(options, self.config_error)
        try:
            self.registry = TenantRegistry(url)
        except (sa.exc.ArgumentError, ImportError) as exc:
            raise self.config_error("connection", url.render_as_string(hide_password=True), str(exc)) from None
        self.admin_api = options.admin_api
        self.check_state = options.check_tenant_state
        self.cache = TenantStateCache(self._load_state, options.cache_ttl, options.cache_size)
        # The cache's dict, read directly on the hot path.
        self._entries = self.cache._entries
        self.representations = options.representations
        self.version_discovery = options.version_discovery
        self.updatable = options.updatable
        self.max_body = options.max_body_bytes
        self.list_limit = options.move_list_limit
        self.redirect_moved = options.redirect_moved
        self._warned_disagreement = False
        self.provider: MoveProvider | None = None
        if options.move_provider and self.admin_api:
            try:
                self.provider = load_provider(options.move_provider, self.application)
            except ValueError as exc:
                raise self.config_error("move_provider", options.move_provider, str(exc)) from None

    def close(self) -> None:
        """Close the tenant registry's connections (a service stopping, a test ending)."""
        self.registry.close()

    # The request path -----------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        tenant_id = environ.get(TENANT_ID_KEY)
        if tenant_id is None or self.admin_api:
            return self._route(environ, start_response)
        # The public endpoint's hot path: tenant_path found the tenant (in the path or the token).
        return self._serve_tenant(environ, start_response, tenant_id)

    def _serve_tenant(self, environ: dict, start_response: Callable, tenant_id: str):
        """Pass a request under *tenant_id* on to the service if the tenant is active (no admin call)."""
        if self.check_state:
            entry = self._entries.get(tenant_id)
            if entry is not None and entry[1] > time.monotonic():
                state = entry[0]
            else:
                try:
                    state = self.cache.state(tenant_id)
                except _RegistryDown:
                    return self._registry_down(environ, start_response)
            if state != ACTIVE:
                return self._state_error(environ, start_response, tenant_id, state)
        if self.redirect_moved:
            return self._serve_redirecting(environ, start_response, tenant_id)
        return self.application(environ, start_response)

    def _tenant_index(self, environ: dict, canonical: CanonicalPath) -> int:
        """tenant_path's decision when it ran before this filter, else this filter's own layout's.

        Raises :class:`~tenancy_mw.tenants.ids.UnknownPathSegment` (own decision only).
        """
        index = environ.get(TENANT_SEGMENT_KEY)
        if index is None:
            return self.layout.tenant_index(canonical, mount_length(environ, canonical))
        return index

    def _route(self, environ: dict, start_response: Callable):
        """Find the tenant and what is asked of it; answer admin calls, check and pass the rest."""
        try:
            canonical = canonical_path(environ)
            index = self._tenant_index(environ, canonical)
        except PathRefused as exc:
            # tenant_path answers these first; this is for a pipeline without it.
            return self.refuse_path(environ, start_response, exc)
        except UnknownPathSegment as exc:
            return self.error(environ, start_response, exc.status, "tenancy." + exc.rule, exc.detail)
        found = environ.get(TENANT_ID_KEY)
        if found is not None and not (0 <= index < len(canonical.segments) and canonical.segments[index] == found):
            return self._serve_other_tenant(environ, start_response, found, canonical, index)
        if index < 0:
            return self.application(environ, start_response)
        tenant_id = canonical.segments[index]
        try:
            validate_tenant_id(tenant_id)
        except InvalidTenantId as exc:
            return self.error(environ, start_response, 400, "tenancy.invalid-tenant-id." + exc.rule, exc.detail)
        rest = canonical.segments[index + 1 :]
        try:
            if self.admin_api:
                if not rest:
                    return self._tenant_call(environ, start_response, tenant_id, canonical, index)
                if rest == ("action", "restore"):
                    return self._restore(environ, start_response, tenant_id)
                if self.provider is not None and rest[-2:] == ("action", "move"):
                    return self._move(environ, start_response, tenant_id, canonical, index)
            if self.check_state:
                state = self.cache.state(tenant_id)
                if state != ACTIVE:
                    return self._state_error(environ, start_response, tenant_id, state)
        except _Answer as answer:
            return self._render(environ, start_response, answer)
        except _RegistryDown:
            return self._registry_down(environ, start_response)
        except Exception:
            # A bug, or the move provider failing: logged with its traceback, shown as none.
            LOG.exception("tenant_admin failed on %s %s", environ.get("REQUEST_METHOD"), str(canonical))
            return self.error(
                environ,
                start_response,
                500,
                "tenancy.admin-failed",
                "The tenant admin call failed; the service log tells why.",
            )
        if self.redirect_moved and rest:
            return self._serve_redirecting(environ, start_response, tenant_id)
        return self.application(environ, start_response)

    def _serve_other_tenant(self, environ: dict, start_response: Callable, found: str, canonical, index: int):
        """The service acts on *found*, which is not this path's tenant segment: check it, answer no admin call."""
        if environ.get(TENANT_SOURCE_KEY) != "token" and not self._warned_disagreement:
            # tenant_path found another tenant segment: a filter between the two
            # rewrote the path, or without tenant_path's decision in environ
            # something else set the tenant.  The service acts on the tenant
            # handed on, so that one is checked; no admin call is answered.
            self._warned_disagreement = True
            LOG.warning(
                "tenant_admin: tenant_path found tenant %r in %r, where this filter finds %s; rewrite no path "
                "between them and give them the same layout options",
                shorten(found),
                shorten(str(canonical)),
                repr(canonical.segments[index]) if 0 <= index < len(canonical.segments) else "none",
            )
        return self._serve_tenant(environ, start_response, found)

    def _load_state(self, tenant_id: str) -> str:
        try:
            return self.registry.state(tenant_id)
        except sa.exc.SQLAlchemyError as exc:
            LOG.error("tenant_admin: the tenant registry is unavailable: %s", error_summary(exc))
            raise _RegistryDown() from None

    def _state_error(self, environ: dict, start_response: Callable, tenant_id: str, state: str):
        if state == DELETED:
            return self.error(
                environ,
                start_response,
                410,
                "tenancy.tenant-deleted",
                "Tenant %r is deleted; nothing under it can be used." % shorten(tenant_id),
            )
        return self.error(
            environ,
            start_response,
            404,
            "tenancy.tenant-not-found",
            "Tenant %r does not exist." % shorten(tenant_id),
        )

    def _registry_down(self, environ: dict, start_response: Callable):
        return self.error(
            environ,
            start_response,
            503,
            "tenancy.registry-unavailable",
            "The tenant registry cannot be reached; try again later.",
            headers=(("Retry-After", "5"),),
        )

    def _render(self, environ: dict, start_response: Callable, answer: _Answer):
        if answer.location:
            return _redirect(environ, start_response, answer.status, answer.location)
        return self.error(environ, start_response, answer.status, answer.code, answer.detail, answer.headers)

    # Redirects of moved resources ---------------------------------------

    def _serve_redirecting(self, environ: dict, start_response: Callable, tenant_id: str):
        """Pass the request on; turn the service's 404 under a moved resource's old path into a 301."""
        held: list = []
        held_body: list = []
        deciding = [True]

        def capture(status, headers, exc_info=None):
            if deciding[0] and not held and status[:3] == "404":
                held.append((status, headers))
                return held_body.append
            return start_response(status, headers, exc_info)

        result = self.application(environ, capture)
        deciding[0] = False
        if not held:
            return result
        try:
            held_body.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        location = self._moved_location(environ, tenant_id)
        if location:
            return _redirect(environ, start_response, 301, location)
        start_response(*held[0])
        return [b"".join(held_body)]

    def _moved_location(self, environ: dict, tenant_id: str, suffix: tuple[str, ...] = ()) -> str | None:
        """Where the resource of this request's path now lives, or ``None`` if it never moved."""
        try:
            canonical = canonical_path(environ)
            index = self._tenant_index(environ, canonical)
        except (PathRefused, UnknownPathSegment):
            return None
        if not 0 <= index < len(canonical.segments) or canonical.segments[index] != tenant_id:
            # No path tenant (the token's): its moves cannot be told from the URL.
            return None
        path = canonical.segments[index + 1 :]
        if suffix and path[-len(suffix) :] == suffix:
            path = path[: -len(suffix)]
        try:
            found = self.registry.find_move(tenant_id, path)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("tenant_admin: could not look up moves of %r: %s", tenant_id, error_summary(exc))
            return None
        if found is None:
            return None
        record, remainder = found
        segments = canonical.segments[:index] + (record.dest_tenant,) + record.dest_path + remainder + suffix
        query = environ.get("QUERY_STRING", "")
        return _url(environ, segments, canonical.trailing_slash and not suffix) + ("?" + query if query else "")

    # Tenant calls -------------------------------------------------------

    def _tenant_call(self, environ, start_response, tenant_id, canonical, index):
        method = environ.get("REQUEST_METHOD", "GET")
        if method in ("GET", "HEAD"):
            tenant = self._read(lambda: self.registry.get(tenant_id))
            if tenant is None:
                raise self._not_found(tenant_id)
            if tenant.state == DELETED:
                raise _Answer(
                    410,
                    "tenancy.tenant-deleted",
                    "Tenant %r is deleted; POST .../action/restore brings it back until it is purged."
                    % shorten(tenant_id),
                    headers=self._metadata(tenant),
                )
            if self.version_discovery and method == "GET":
                return self._show_with_version(environ, start_response, tenant, canonical, index)
            return self._show(environ, start_response, tenant, 200)
        if method == "PUT":
            return self._put(environ, start_response, tenant_id, canonical, index)
        if method == "DELETE":
            try:
                tenant = self._read(lambda: self.registry.delete(tenant_id))
            except TenantNotFound:
                raise self._not_found(tenant_id) from None
            except TenantGone:
                detail = "Tenant %r is already deleted." % shorten(tenant_id)
                raise _Answer(410, "tenancy.tenant-deleted", detail) from None
            self.cache.remember(tenant_id, DELETED)
            LOG.info("tenant_admin: tenant %r deleted", tenant_id)
            start_response("204 No Content", list(self._metadata(tenant)))
            return [b""]
        raise self._not_allowed(method, _TENANT_ALLOW)

    def _restore(self, environ, start_response, tenant_id):
        method = environ.get("REQUEST_METHOD", "GET")
        if method != "POST":
            raise self._not_allowed(method, _ACTION_ALLOW)
        try:
            tenant = self._read(lambda: self.registry.restore(tenant_id))
        except TenantNotFound:
            raise self._not_found(tenant_id) from None
        except TenantConflict as exc:
            raise _Answer(409, "tenancy.tenant-" + exc.reason, str(exc)) from None
        self.cache.remember(tenant_id, ACTIVE)
        LOG.info("tenant_admin: tenant %r restored", tenant_id)
        return self._show(environ, start_response, tenant, 200)

    def _show(self, environ, start_response, tenant: Tenant, status: int, extra_headers: tuple = ()):
        """Answer with the tenant: its representation and metadata headers (or 204 with the headers only)."""
        headers = list(self._metadata(tenant)) + list(extra_headers)
        if status == 200 and (environ.get("REQUEST_METHOD") == "HEAD" or not self.representations):
            start_response("204 No Content", headers)
            return [b""]
        if not self.representations:
            start_response("%d %s" % (status, HTTPStatus(status).phrase), headers + [("Content-Length", "0")])
            return [b""]
        body = _json_bytes(tenant.representation)
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("%d %s" % (status, HTTPStatus(status).phrase), headers)
        return [body]

    def _show_with_version(self, environ, start_response, tenant: Tenant, canonical, index: int):
        """``GET`` of a tenant with ``version_discovery``: the representation plus the service's ``version``."""
        version = self._service_version(environ, canonical, index)
        if version is None:
            return self._show(environ, start_response, tenant, 200)
        document = dict(tenant.representation) if self.representations else {}
        if DISCOVERY_MEMBER in document:
            # Stored before the option was turned on: the tenant's data is not
            # replaced, but a client discovering versions reads it.
            LOG.warning(
                "tenant_admin: version_discovery: tenant %r holds its own %r member, shown instead of the "
                "service's version document; PUT the tenant without it",
                shorten(tenant.id),
                DISCOVERY_MEMBER,
            )
        else:
            document[DISCOVERY_MEMBER] = version
        body = _json_bytes(document)
        headers = list(self._metadata(tenant))
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [body]

    def _service_version(self, environ: dict, canonical, index: int) -> dict | None:
        """The ``version`` member of the service's answer to ``GET /{version}``, or ``None`` (logged).

        The sub-request is a new, plain ``GET`` of the tenant's URL without
        its last segment: of the request it copies only what locates the
        service (server and ``wsgi.*`` keys, ``Host``, forwarding headers)
        and the request id; no credential, cookie, tenant header, condition,
        range, encoding or version header of the client's.
        """
        # The tenant segment may be inside SCRIPT_NAME (tenant_path's
        # strip_tenant on an API mounted at its version): cut the mount there too.
        mount_end = min(index, canonical.prefix_length)
        script, path = (
            "".join("/" + segment for segment in part).encode("utf-8").decode("latin-1")
            for part in (canonical.segments[:mount_end], canonical.segments[mount_end:index])
        )
        sub = {key: value for key, value in environ.items() if key in _SUB_REQUEST_KEYS or key.startswith("wsgi.")}
        sub.update(
            REQUEST_METHOD="GET",
            SCRIPT_NAME=script,
            PATH_INFO=path,
            QUERY_STRING="",
            HTTP_ACCEPT="application/json",
        )
        sub["wsgi.input"] = io.BytesIO(b"")
        statuses: list[str] = []
        written: list[bytes] = []

        def capture(status, headers, exc_info=None):
            statuses.append(status)  # PEP 3333: the last call wins
            return written.append

        where = shorten(script + path or "/")
        try:
            chunks = self.application(sub, capture)
            try:
                size = 0
                for chunk in chunks:
                    written.append(chunk)
                    size += len(chunk)
                    if size > DISCOVERY_BODY_LIMIT:
                        raise ValueError("an answer over %d bytes" % DISCOVERY_BODY_LIMIT)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            status = statuses[-1] if statuses else "nothing"
            document = json.loads(b"".join(written), parse_constant=_reject_constant) if status[:3] == "200" else None
        except Exception as exc:  # the service failing is no reason to fail the tenant's GET
            LOG.warning(
                "tenant_admin: version_discovery: GET %s failed (%s: %s); the tenant is shown without %r",
                where,
                type(exc).__name__,
                shorten(str(exc)),
                DISCOVERY_MEMBER,
            )
            return None
        member = document.get(DISCOVERY_MEMBER) if isinstance(document, dict) else None
        if not isinstance(member, dict):
            LOG.warning(
                "tenant_admin: version_discovery: the service answers GET %s with %s, not a JSON object "
                "holding a %r object; the tenant is shown without it",
                where,
                status,
                DISCOVERY_MEMBER,
            )
            return None
        return member

    @staticmethod
    def _metadata(tenant: Tenant) -> tuple:
        headers = [
            ("ETag", tenant.etag),
            ("Last-Modified", _http_date(tenant.updated)),
            ("X-Tenant-State", tenant.state),
            ("X-Tenant-Created", tenant.summary()["created"]),
            ("X-Tenant-Updated", tenant.summary()["updated"]),
        ]
        if tenant.deleted is not None:
            headers.append(("X-Tenant-Deleted", tenant.summary()["deleted"]))
        return tuple(headers)

    def _put(self, environ, start_response, tenant_id, canonical, index):
        representation = self._representation(environ)
        if self.version_discovery and DISCOVERY_MEMBER in representation:
            # What a GET showed, sent back: the service's document is not the tenant's data.
            if representation[DISCOVERY_MEMBER] != self._service_version(environ, canonical, index):
                raise _Answer(
                    400,
                    "tenancy.representation-reserved-member",
                    "The tenant representation may not hold %r other than the service's version document: "
                    "with version_discovery, GET of the tenant carries that document under this name."
                    % DISCOVERY_MEMBER,
                )
            representation = {k: v for k, v in representation.items() if k != DISCOVERY_MEMBER}
        if not self.representations:
            # Nothing of the body is kept: every tenant has the same, empty one.
            representation = {}
        try:
            result = self._read(lambda: self.registry.put(tenant_id, representation, updatable=self.updatable))
        except TenantConflict as exc:
            raise _Answer(409, "tenancy.tenant-" + exc.reason, str(exc)) from None
        if not result.created and not self.representations:
            raise _Answer(
                409,
                "tenancy.tenant-exists",
                "Tenant %r already exists; this service keeps no tenant representation to update." % shorten(tenant_id),
            )
        self.cache.remember(tenant_id, ACTIVE)
        if result.created:
            LOG.info("tenant_admin: tenant %r created", tenant_id)
            location = _url(environ, canonical.segments[: index + 1], False)
            return self._show(environ, start_response, result.tenant, 201, (("Location", location),))
        if result.changed:
            LOG.info("tenant_admin: tenant %r modified", tenant_id)
        return self._show(environ, start_response, result.tenant, 202)

    def _representation(self, environ: dict) -> dict:
        """The PUT body as a JSON object, or an :class:`_Answer` naming what is wrong."""
        content_type = environ.get("CONTENT_TYPE", "")
        if content_type and not _JSON_TYPES.fullmatch(content_type):
            raise _Answer(
                415,
                "tenancy.representation-not-json",
                "Content-Type %r is not JSON; send the tenant representation as application/json."
                % shorten(content_type),
            )
        raw = self._body(environ)
        if not raw.strip():
            return {}
        try:
            text = raw.decode("utf-8")
            document = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            # ValueError: bad JSON, bytes that are not UTF-8, a repeated key, NaN.
            raise _Answer(
                400,
                "tenancy.representation-not-json",
                "The tenant representation %r is not valid JSON: %s."
                % (shorten(raw.decode("utf-8", "replace")), shorten(str(exc) or type(exc).__name__)),
            ) from None
        if not isinstance(document, dict):
            raise _Answer(
                400,
                "tenancy.representation-not-an-object",
                "The tenant representation must be a JSON object ({...}); got %s %s."
                % (type(document).__name__, shorten(json.dumps(document))),
            )
        try:
            canonical_document_json(document)
        except RecursionError:
            detail = "The tenant representation is nested too deeply."
            raise _Answer(400, "tenancy.representation-not-json", detail) from None
        except ValueError:
            # json.loads reads 1e999 as a float infinity, which JSON cannot carry back.
            detail = "The tenant representation holds a number too large for JSON (such as 1e999)."
            raise _Answer(400, "tenancy.representation-not-json", detail) from None
        return document

    def _body(self, environ: dict) -> bytes:
        limit = self.max_body
        length = environ.get("CONTENT_LENGTH") or ""
        if length:
            # isdigit() alone takes "²" and other digits int() refuses or reads otherwise.
            if not (length.isascii() and length.isdigit()):
                raise _Answer(400, "tenancy.bad-content-length", "Content-Length %r is not a number." % shorten(length))
            if int(length) > limit:
                raise self._too_large(int(length))
        elif not environ.get("wsgi.input_terminated") and "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", ""):
            return b""
        try:
            raw = environ["wsgi.input"].read(int(length) if length else limit + 1)
        except Exception as exc:  # a client that stops early: the server's own error type
            raise _Answer(400, "tenancy.unreadable-body", "The request body could not be read: %s." % exc) from None
        if len(raw) > limit:
            raise self._too_large(len(raw))
        if length and len(raw) < int(length):
            raise _Answer(
                400,
                "tenancy.unreadable-body",
                "The request body ended after %d of the %s bytes its Content-Length announced." % (len(raw), length),
            )
        return raw

    def _too_large(self, size: int) -> _Answer:
        return _Answer(
            413,
            "tenancy.representation-too-large",
            "The tenant representation is %s bytes; at most %d are allowed."
            % ("over %d" % self.max_body if size > self.max_body else size, self.max_body),
        )

    # Moves ----------------------------------------------------------------

    def _move(self, environ, start_response, tenant_id, canonical, index):
        # Under an unknown or deleted tenant every request is 404 or 410, a
        # move URL too, whatever else is wrong with it (checked again under
        # the lock for a POST).
        source = self._read(lambda: self.registry.get(tenant_id))
        self._check_source(tenant_id, source)
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD", "POST"):
            raise self._not_allowed(method, _MOVE_ALLOW)
        path = canonical.segments[index + 1 : -2]
        dest = self._destination(environ, tenant_id)
        if_match = None
        if method == "POST" and "HTTP_IF_MATCH" in environ:
            if_match = parse_if_match(environ["HTTP_IF_MATCH"])
            if if_match is None:
                raise _Answer(
                    400,
                    "tenancy.bad-if-match",
                    'If-Match %r is not * or a list of quoted entity tags such as "abc".'
                    % shorten(environ["HTTP_IF_MATCH"]),
                )
        if method != "POST":
            destination = self._read(lambda: self.registry.get(dest))
            document = self._move_document(environ, tenant_id, source, dest, destination, path, None)
            body = _json_bytes(document)
            headers = [
                ("ETag", _etag(document)),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-cache"),
            ]
            start_response("200 OK", headers)
            return [b"" if method == "HEAD" else body]
        try:
            with self.registry.move_lock(tenant_id, dest) as (conn, tenants):
                document = self._move_document(
                    environ, tenant_id, tenants[tenant_id], dest, tenants[dest], path, if_match
                )
                etag = _etag(document)
                if if_match is not None and "*" not in if_match and etag not in if_match:
                    raise _Answer(
                        412,
                        "tenancy.move-precondition-failed",
                        "The state of the move changed since its ETag was read (now %s); GET the move "
                        "action again and check it." % etag,
                        headers=(("ETag", etag),),
                    )
                if path:
                    new_path = tuple(self.provider.move_resource(tenant_id, path, dest))  # type: ignore[union-attr]  # only with a provider
                    recorded = [(path, new_path)]
                    location = _url(environ, canonical.segments[:index] + (dest,) + new_path, False)
                else:
                    recorded = [(tuple(old), tuple(new)) for old, new in self.provider.move_tenant(tenant_id, dest)]  # type: ignore[union-attr]  # only with a provider
                    location = _url(environ, canonical.segments[:index] + (dest,), False)
                self.registry.record_moves(conn, tenant_id, dest, recorded)
        except MoveRefused as exc:
            status = exc.status if 400 <= exc.status < 500 else 409
            raise _Answer(status, "tenancy.move-refused", exc.detail) from None
        except sa.exc.SQLAlchemyError as exc:
            LOG.error("tenant_admin: move of %r to %r failed in the registry: %s", tenant_id, dest, error_summary(exc))
            raise _RegistryDown() from None
        LOG.info(
            "tenant_admin: moved %r of tenant %r to tenant %r (%d resource%s)",
            "/".join(path) or "*",
            tenant_id,
            dest,
            len(recorded),
            "" if len(recorded) == 1 else "s",
        )
        return _redirect(environ, start_response, 303, location)

    def _destination(self, environ: dict, tenant_id: str) -> str:
        query = environ.get("QUERY_STRING", "")
        try:
            text = query.encode("latin-1").decode("utf-8")
            pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
        except (UnicodeError, ValueError):
            raise _Answer(400, "tenancy.move-bad-query", "The query %r is not valid UTF-8." % shorten(query)) from None
        dests = [value for name, value in pairs if name == "dest"]
        if not dests:
            raise _Answer(
                400,
                "tenancy.move-missing-dest",
                "A move needs the destination tenant: ?dest=TENANT_ID (the query was %r)." % shorten(query),
            )
        if len(dests) > 1:
            raise _Answer(
                400,
                "tenancy.move-repeated-dest",
                "dest is given %d times (%s); give one destination tenant."
                % (len(dests), ", ".join(repr(shorten(d, 40)) for d in dests[:5])),
            )
        dest = dests[0]
        try:
            validate_tenant_id(dest)
        except InvalidTenantId as exc:
            raise _Answer(400, "tenancy.move-invalid-dest." + exc.rule, "dest: " + exc.detail) from None
        if dest == tenant_id:
            raise _Answer(
                400,
                "tenancy.move-same-tenant",
                "dest %r is the tenant the resources are in already; name another tenant." % shorten(dest),
            )
        return dest

    def _check_source(self, tenant_id: str, source: Tenant | None) -> None:
        """404 for an unknown source tenant, 410 for a deleted one (an :class:`_Answer`)."""
        if source is None:
            raise self._not_found(tenant_id)
        if source.state == DELETED:
            raise _Answer(410, "tenancy.tenant-deleted", "Tenant %r is deleted." % shorten(tenant_id))

    def _move_document(self, environ, tenant_id, source, dest, destination, path, if_match) -> dict:
        """The move action document, after checking both tenants and the resource; or an :class:`_Answer`."""
        precondition = if_match is not None
        self._check_source(tenant_id, source)
        if destination is None:
            raise _Answer(
                404,
                "tenancy.move-destination-not-found",
                "The destination tenant %r does not exist; create it first." % shorten(dest),
            )
        if destination.state == DELETED:
            raise _Answer(
                409,
                "tenancy.move-destination-deleted",
                "The destination tenant %r is deleted; restore it first." % shorten(dest),
            )
        document = {"source": source.summary(), "destination": destination.summary()}
        # The destination's resources are affected too (the spec's example: a
        # tenant may hold at most 100 resources): their count and state tag,
        # never their list, are in the document and so in its ETag.
        received = self.provider.tenant_resources(dest, 0)  # type: ignore[union-attr]  # only with a provider
        document["destination"]["resources"] = {
            "count": received.count,
            "tag": received.tag,
            "metadata": received.metadata,
        }
        if path:
            state = self.provider.resource_state(tenant_id, path)  # type: ignore[union-attr]  # only with a provider
            if state is None or state.deleted:
                if precondition:
                    raise _Answer(
                        412,
                        "tenancy.move-precondition-failed",
                        "Resource %r of tenant %r is no longer there as it was when its ETag was read."
                        % (shorten("/".join(path)), shorten(tenant_id)),
                    )
                if state is not None:
                    raise _Answer(
                        410,
                        "tenancy.move-resource-deleted",
                        "Resource %r of tenant %r is deleted." % (shorten("/".join(path)), shorten(tenant_id)),
                    )
                location = self._moved_location(environ, tenant_id, ("action", "move"))
                if location:
                    raise _Answer(301, location=location)
                raise _Answer(
                    404,
                    "tenancy.move-resource-not-found",
                    "Tenant %r has no resource %r to move." % (shorten(tenant_id), shorten("/".join(path))),
                )
            document["resource"] = state.document()
        else:
            resources = self.provider.tenant_resources(tenant_id, self.list_limit)  # type: ignore[union-attr]  # only with a provider
            listed = (
                resources.resources
                if resources.resources is not None and (len(resources.resources) <= self.list_limit)
                else None
            )
            document["resources"] = {
                "count": resources.count,
                "tag": resources.tag,
                "metadata": resources.metadata,
            }
            if listed is not None:
                document["resources"]["list"] = [state.document() for state in listed]
        return {"move": document}

    # Helpers ------------------------------------------------------------

    def _read(self, call):
        """Run a registry call; a database failure becomes :class:`_RegistryDown`."""
        try:
            return call()
        except sa.exc.SQLAlchemyError as exc:
            LOG.error("tenant_admin: the tenant registry is unavailable: %s", error_summary(exc))
            raise _RegistryDown() from None

    @staticmethod
    def _not_found(tenant_id: str) -> _Answer:
        return _Answer(
            404,
            "tenancy.tenant-not-found",
            "Tenant %r does not exist (it was never created, or it was purged)." % shorten(tenant_id),
        )

    @staticmethod
    def _not_allowed(method: str, allow: str) -> _Answer:
        return _Answer(
            405,
            "tenancy.method-not-allowed",
            "Method %r is not allowed here; allowed: %s." % (shorten(method), allow),
            headers=(("Allow", allow),),
        )


def _etag(document: dict) -> str:
    return '"%s"' % hashlib.sha256(canonical_document_json(document).encode("ascii")).hexdigest()


def _url(environ: dict, segments: tuple[str, ...], trailing_slash: bool) -> str:
    """The absolute URL of *segments* on the host the request was sent to, quoted again."""
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST")
    if not host:
        host = environ.get("SERVER_NAME", "localhost")
        port = environ.get("SERVER_PORT", "")
        if port and port != ("443" if scheme == "https" else "80"):
            host += ":" + port
    return "%s://%s%s%s" % (scheme, host, "".join("/" + _quote(s) for s in segments), "/" if trailing_slash else "")


def _redirect(environ: dict, start_response: Callable, status: int, location: str) -> list[bytes]:
    body = _json_bytes({"location": location})
    start_response(
        "%d %s" % (status, HTTPStatus(status).phrase),
        [("Location", location), ("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.tenants.admin_filter`` ``oslo.config.opts`` namespace."""
    return TenantAdmin.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(cache_ttl=30.0)
        >>> [opt.default for opt in TenantAdmin.all_opts() if opt.dest == "cache_ttl"]
        [30.0]
        >>> set_defaults(cache_ttl=5.0)
    """
    TenantAdmin.set_defaults(**defaults)
