"""The ``tenant_admin`` filter class: its options, the request path and the routing of admin calls.

The filter's documentation is :mod:`tenancy_mw.tenants.admin`'s.  The
paste entry point ``egg:tenancy_mw#tenant_admin`` and the
``oslo.config.opts`` namespace ``tenancy_mw.tenant_admin`` name this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.paths import CanonicalPath, PathRefused, canonical_path, shorten
from tenancy_mw.extras import missing_extra
from tenancy_mw.tenants.admin import redirects, routes
from tenancy_mw.tenants.admin.answers import Answer, RegistryDown, parse_if_match, redirect
from tenancy_mw.tenants.admin.options import OPTS
from tenancy_mw.tenants.admin.state import StateCache, registry_down, state_error, state_loader
from tenancy_mw.tenants.ids import InvalidTenantId, TenantLayout, UnknownPathSegment, validate_tenant_id
from tenancy_mw.tenants.moves import MoveProvider, load_provider
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY, TENANT_SOURCE_KEY
from tenancy_mw.tenants.registry import ACTIVE, TenantRegistry

try:
    import sqlalchemy as sa
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["TenantAdmin", "list_opts", "parse_if_match", "set_defaults"]

LOG = logging.getLogger(__name__)


class TenantAdmin(TenancyMiddleware):
    """WSGI filter: the tenant admin API and the tenant-state check; see :mod:`tenancy_mw.tenants.admin`.

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
        try:
            self.registry = TenantRegistry(url)
        except (sa.exc.ArgumentError, ImportError) as exc:
            raise self.config_error("connection", url.render_as_string(hide_password=True), str(exc)) from None
        self.admin_api = options.admin_api
        self.check_state = options.check_tenant_state
        self.cache = StateCache(state_loader(self.registry), options.cache_ttl, options.cache_size)
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

    def _registry_url(self, connection: str | None) -> sa.engine.URL:
        if not connection:
            raise self.config_error("connection", connection, "the SQLAlchemy URL of the tenant registry is required")
        try:
            return sa.engine.make_url(connection)
        except sa.exc.ArgumentError as exc:
            raise self.config_error("connection", "***", "not a SQLAlchemy URL: %s" % exc) from None

    def close(self) -> None:
        """Close the tenant registry's connections (a service stopping, a test ending)."""
        self.registry.close()

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
            state = self.cache.fresh(tenant_id)
            if state is None:
                try:
                    state = self.cache.state(tenant_id)
                except RegistryDown:
                    return registry_down(self.error, environ, start_response)
            if state != ACTIVE:
                return state_error(self.error, environ, start_response, tenant_id, state)
        if self.redirect_moved:
            return self._serve_redirecting(environ, start_response, tenant_id)
        return self.application(environ, start_response)

    def _route(self, environ: dict, start_response: Callable):
        """Find the tenant and what is asked of it; answer admin calls, check and pass the rest."""
        try:
            canonical = canonical_path(environ)
            index = routes.tenant_index(environ, canonical, self.layout)
        except PathRefused as exc:
            # tenant_path answers these first; this is for a pipeline without it.
            return self.error(environ, start_response, 400, "tenancy.bad-path." + exc.rule, exc.detail)
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
        except Answer as answer:
            return self._render(environ, start_response, answer)
        except RegistryDown:
            return registry_down(self.error, environ, start_response)
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

    def _render(self, environ: dict, start_response: Callable, answer: Answer):
        if answer.location:
            return redirect(environ, start_response, answer.status, answer.location)
        return self.error(environ, start_response, answer.status, answer.code, answer.detail, answer.headers)

    # Redirects of moved resources ---------------------------------------

    def _serve_redirecting(self, environ: dict, start_response: Callable, tenant_id: str):
        """Pass the request on; turn the service's 404 under a moved resource's old path into a 301."""
        return redirects.serve_redirecting(
            self.application, environ, start_response, lambda: self.moved_location(environ, tenant_id)
        )

    def moved_location(self, environ: dict, tenant_id: str, suffix: tuple[str, ...] = ()) -> str | None:
        """Where the resource of this request's path now lives, or ``None`` if it never moved."""
        return redirects.moved_location(self.registry, self.layout, environ, tenant_id, suffix)

    def tenant_index(self, environ: dict, canonical: CanonicalPath) -> int:
        """The index of the tenant segment in *canonical* (see :func:`.routes.tenant_index`)."""
        return routes.tenant_index(environ, canonical, self.layout)


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
