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
``DELETE /{v}/{t}``                           ``204`` (marked deleted, recoverable; the service's resources
                                              hidden); ``404``; ``410``
``POST /{v}/{t}/action/restore``              ``200`` and the representation (``204`` without); ``404``;
                                              ``409`` when the tenant is not deleted, or is being purged
``GET /{v}/{t}/{path}/action/move?dest=D``    the move action document and its ``ETag``
``POST /{v}/{t}/{path}/action/move?dest=D``   ``303``, ``Location`` at the resource's new home; with
                                              ``If-Match``, only if the document's ETag still matches,
                                              else ``412``
``GET|POST /{v}/{t}/action/move?dest=D``      the same for all of the tenant's resources; ``303`` to
                                              the destination tenant, which keeps the source tenant
============================================  ==========================================================

Moves need ``move_provider``, a small interface the service implements
(:mod:`tenancy_mw.tenants.moves`); without it, move URLs go to the service.
When that provider also implements :class:`~tenancy_mw.tenants.removal.TenantRemoval`,
``DELETE`` hides the tenant's resources and restore brings them back
(a failure there is ``503``, the tenant unchanged), and ``tenancy-mw-manage
tenants purge`` deletes them (``doc/tenant-lifecycle.rst``).  Move
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
    deleted by the others within ``cache_ttl`` seconds (measured:
    ``bench/seen_everywhere.py``), and an id looked up before it was
    created is seen as unknown for at most as long.  The admin calls
    themselves always read the database.  ``cache_ttl = 0`` reads the
    database on every request.  With ``state_memcached_servers`` every
    worker and host sees a change on its next request, at one memcached
    round trip per request (:mod:`tenancy_mw.tenants.shared_state`);
    memcached down is ``503`` (``on_state_store_error = fail_closed``) or
    the cache alone (``fail_open``).

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
--component tenants``; deleted tenants are removed for good, with their
resources, by ``tenancy-mw-manage tenants purge --paste api-paste.ini#admin
--retention 30d``.

From Python::

    >>> import os, tempfile
    >>> from tenancy_mw import migrations
    >>> from tenancy_mw.tenants.admin.filter import TenantAdmin
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

The package :mod:`tenancy_mw.tenants.admin`, one job a module: this one
(the class, the request path), :mod:`~tenancy_mw.tenants.admin.routes`
(the tenant and the action in the path, the dispatch table),
:mod:`~tenancy_mw.tenants.admin.state` (the state check and its cache),
:mod:`~tenancy_mw.tenants.admin.api` (the tenant calls),
:mod:`~tenancy_mw.tenants.admin.representation` (a PUT's body),
:mod:`~tenancy_mw.tenants.admin.move_action` (the move actions),
:mod:`~tenancy_mw.tenants.admin.redirects` (``301`` for moved resources),
:mod:`~tenancy_mw.tenants.admin.discovery` (``version_discovery``),
:mod:`~tenancy_mw.tenants.admin.answers` (errors, redirects, URLs, ETags)
and :mod:`~tenancy_mw.tenants.admin.options`.  Until 0.2.0 this was the
module ``tenancy_mw.tenant_admin``, then ``tenancy_mw.tenants.admin_filter``:
both still import (the package's names).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import PathRefused, canonical_path, shorten
from tenancy_mw.core.sql import sa
from tenancy_mw.tenants.admin import redirects, routes
from tenancy_mw.tenants.admin.answers import Redirect, parse_if_match, redirect
from tenancy_mw.tenants.admin.options import OPTS
from tenancy_mw.tenants.admin.redirects import serve_redirecting
from tenancy_mw.tenants.admin.state import StateCache, state_error, state_generation, state_loader
from tenancy_mw.tenants.ids import InvalidTenantId, TenantLayout, UnknownPathSegment, validate_tenant_id
from tenancy_mw.tenants.moves import MoveProvider, load_provider
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY, TENANT_SOURCE_KEY
from tenancy_mw.tenants.registry import ACTIVE, TenantRegistry
from tenancy_mw.tenants.removal import TenantRemoval
from tenancy_mw.tenants.shared_state import SharedTenantStates

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["TenantAdmin", "list_opts", "parse_if_match", "set_defaults"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")


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
        url = self._registry_url(options.connection)
        self.layout = TenantLayout.from_options(options, self.config_error)
        self.shared = self._shared_states(options)
        try:
            self.registry = TenantRegistry(url, on_change=self.shared.announce if self.shared else None)
        except (sa.exc.ArgumentError, ImportError) as exc:
            raise self.config_error("connection", url.render_as_string(hide_password=True), str(exc)) from None
        self.admin_api = options.admin_api
        self.check_state = options.check_tenant_state
        generation = None
        if self.shared is not None:
            generation = state_generation(self.shared, options.on_state_store_error == "fail_open")
        self.cache = StateCache(state_loader(self.registry), options.cache_ttl, options.cache_size, generation)
        # The cache's mapping, read inline on every public request's path (no call).  With
        # shared states nothing kept is current without asking memcached: an empty one.
        self._states = self.cache.entries if self.shared is None else {}
        self.representations = options.representations
        self.version_discovery = options.version_discovery
        self.updatable = options.updatable
        self.max_body = options.max_body_bytes
        self.list_limit = options.move_list_limit
        self.redirect_moved = options.redirect_moved
        self._warned_disagreement = False
        self.provider: MoveProvider | None = None
        self.removal: TenantRemoval | None = None
        if options.move_provider and self.admin_api:
            self._load_provider(options.move_provider)

    def _load_provider(self, dotted: str) -> None:
        """Load ``move_provider``: its moves (:attr:`provider`) and its removal of tenants (:attr:`removal`)."""
        try:
            loaded = load_provider(dotted, self.application)
        except ValueError as exc:
            raise self.config_error("move_provider", dotted, str(exc)) from None
        self.provider = loaded if isinstance(loaded, MoveProvider) else None
        self.removal = loaded if isinstance(loaded, TenantRemoval) else None
        if self.removal is None:
            LOG.warning(
                "tenant_admin: move_provider %s is no tenancy_mw.tenants.removal.TenantRemoval: a deleted tenant's "
                "resources are neither hidden nor, when it is purged, deleted (doc/tenant-lifecycle.rst)",
                dotted,
            )

    def _shared_states(self, options) -> SharedTenantStates | None:
        """The memcached client of ``state_memcached_servers``, or ``None`` when unset."""
        servers = [server.strip() for server in options.state_memcached_servers if server.strip()]
        if not servers:
            return None
        try:
            return SharedTenantStates(servers, timeout=options.state_store_timeout)
        except ValueError as exc:
            raise self.config_error("state_memcached_servers", options.state_memcached_servers, str(exc)) from None

    def _registry_url(self, connection: str | None) -> sa.engine.URL:
        if not connection:
            raise self.config_error("connection", connection, "the SQLAlchemy URL of the tenant registry is required")
        try:
            return sa.engine.make_url(connection)
        except sa.exc.ArgumentError as exc:
            raise self.config_error("connection", "***", "not a SQLAlchemy URL: %s" % exc) from None

    def close(self) -> None:
        """Close the tenant registry's connections, and memcached's (a service stopping, a test ending)."""
        self.registry.close()
        if self.shared is not None:
            self.shared.close()

    # The request path -----------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Answer an admin call, or check the tenant's state and pass the request on."""
        tenant_id = environ.get(TENANT_ID_KEY)
        if tenant_id is None or self.admin_api:
            return self._route(environ, start_response)
        # The public endpoint's hot path: tenant_path found the tenant (in the path or the token).
        return self._serve_tenant(environ, start_response, tenant_id)

    def _serve_tenant(self, environ: dict, start_response: Callable, tenant_id: str):
        """Pass a request under *tenant_id* on to the service if the tenant is active (no admin call)."""
        if self.check_state:
            entry = self._states.get(tenant_id)
            if entry is not None and entry[1] > time.monotonic():
                state = entry[0]
            else:
                try:
                    state = self.cache.state(tenant_id)
                except Refusal as down:  # RegistryDown, StateStoreDown
                    return self.answer(environ, start_response, down)
            if state != ACTIVE:
                return state_error(self.error, environ, start_response, tenant_id, state)
        if self.redirect_moved:
            # Straight to the helper, no method in between: this is every public request's path.
            return serve_redirecting(self.application, environ, start_response, self.moved_location, tenant_id)
        return self.application(environ, start_response)

    def _route(self, environ: dict, start_response: Callable):
        """Find the tenant and what is asked of it; answer admin calls, check and pass the rest."""
        try:
            canonical = canonical_path(environ)
            index = routes.tenant_index(environ, canonical, self.layout)
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
        return self._serve_target(environ, start_response, routes.Target(tenant_id, canonical, index))

    def _serve_target(self, environ: dict, start_response: Callable, target: routes.Target):
        """Answer the admin call on *target*, or check its tenant's state and pass the request on."""
        rest = target.canonical.segments[target.index + 1 :]
        try:
            action = routes.action_of(rest, self.provider is not None) if self.admin_api else None
            if action is not None:
                return routes.dispatch(self, environ, start_response, target, action)
            if self.check_state:
                state = self.cache.state(target.tenant_id)
                if state != ACTIVE:
                    return state_error(self.error, environ, start_response, target.tenant_id, state)
        except Redirect as moved:
            return redirect(environ, start_response, moved.status, moved.location)
        except Refusal as refusal:  # RegistryDown too
            return self.answer(environ, start_response, refusal)
        except Exception:
            # A bug, or the move provider failing: logged with its traceback, shown as none.
            LOG.exception("tenant_admin failed on %s %s", environ.get("REQUEST_METHOD"), str(target.canonical))
            detail = "The tenant admin call failed; the service log tells why."
            return self.error(environ, start_response, 500, "tenancy.admin-failed", detail)
        if self.redirect_moved and rest:
            return self._serve_redirecting(environ, start_response, target.tenant_id)
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

    # Redirects of moved resources ---------------------------------------

    def _serve_redirecting(self, environ: dict, start_response: Callable, tenant_id: str):
        """Pass the request on; turn the service's 404 under a moved resource's old path into a 301."""
        return serve_redirecting(self.application, environ, start_response, self.moved_location, tenant_id)

    def moved_location(self, environ: dict, tenant_id: str, suffix: tuple[str, ...] = ()) -> str | None:
        """Where the resource of this request's path now lives, or ``None`` if it never moved."""
        return redirects.moved_location(self.registry, self.layout, environ, tenant_id, suffix)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.tenant_admin`` ``oslo.config.opts`` namespace."""
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
