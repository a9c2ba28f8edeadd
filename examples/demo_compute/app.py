"""The demo's WSGI app: a tenant's servers under ``/v2.1/{project_id}/servers``.

==========  ====================================  ====================================
Method      Path                                  Answer
==========  ====================================  ====================================
GET         ``/``                                 ``{"versions": [...]}``
GET         ``/v2.1``, ``/v2.1/``                 ``{"version": {"id": "v2.1", ...}}``
POST        ``/v2.1/{project_id}/servers``        ``201``, ``{"server": {...}}``,
                                                  ``Location`` header
GET         ``/v2.1/{project_id}/servers``        ``{"servers": [...]}``, a page
                                                  (``limit``, ``marker``) and
                                                  ``servers_links`` to the next
GET         ``.../servers/detail``                the same list
GET         ``/v2.1/{project_id}/servers/{id}``   ``{"server": {...}}``
DELETE      ``/v2.1/{project_id}/servers/{id}``   ``204``
GET, PUT,   ``/v2.1/{project_id}/servers/{id}/``  the tag API (from 2.26; see
DELETE      ``tags[/{tag}]``                      :mod:`demo_compute.tags`)
==========  ====================================  ====================================

``os-services`` and ``os-hypervisors`` (under ``/v2.1`` or
``/v2.1/{project_id}``), across the demo's cell databases, are served by
:mod:`demo_compute.cells_api`, behind tenancy_mw's ``id_resolver``.

From microversion 2.26 a server shows its ``tags``, and the list takes
``tags``, ``tags-any``, ``not-tags`` and ``not-tags-any``
(:mod:`demo_compute.tags`, parsed by the ``tag_query`` filter).

The list is paged as nova pages it (:mod:`tenancy_mw.core.paging`): by
server id, ascending; ``limit`` servers at most (capped at ``[demo_compute]
max_limit``, 1000; without one, that many), those after the server
``marker``, which must be one of the tenant's (else ``400``, "marker [ID]
not found").  A full page links to the next in
``"servers_links": [{"rel": "next", "href": ...}]``, the request's URL
(its tag filters included) with ``marker`` set to the page's last id.  The
tag filters' SQL condition is built for the page (its marker in every tag
subquery).  A malformed ``limit`` or ``marker`` is ``400`` naming it.

Requests under ``/v2.1`` are served at the microversion the client asks
for (:mod:`demo_compute.microversions`: ``2.1`` to ``2.53``, nova's headers,
``400`` malformed, ``406`` out of range); every answer there carries it in
``OpenStack-API-Version`` and ``X-OpenStack-Nova-API-Version``, with
``Vary`` (those ``400`` and ``406`` ``Vary`` alone), and the version
document advertises the range.  The filters in front say the same in their
own answers (their ``microversions`` option, the same range).  Handlers read it
from ``environ['demo_compute.microversion']``.

The body of a create is ``{"server": {"name": "web1"}}``.  A server is
``{"id", "name", "tenant_id", "created", "links"}``.

The tenant comes only from ``environ['tenancy.tenant_id']``, which the
``tenant_path`` filter sets after checking the path's tenant segment; this
app never reads a header or decodes the path itself to find it.  Without
that filter in front, every servers URL is answered ``400``.

Errors are JSON in the API-WG shape of :mod:`tenancy_mw.core.errors`, with the
request id of oslo.middleware's ``request_id`` filter; bad input is a
``4xx`` naming the value, never a ``500``.

The app routes with the Routes library (:mod:`demo_compute.router`) on
:func:`tenancy_mw.core.paths.canonical_path`, the client's own path as the
filters decided on it, so it works the same whether ``tenant_path`` strips
the tenant segment (``strip_tenant = true``) or not; a method a path does
not take is ``405`` with ``Allow``.

Made by :func:`app_factory` from ``api-paste.ini``::

    [app:demo_compute]
    paste.app_factory = demo_compute.app:app_factory

its settings read from ``tenancy_mw_demo.conf`` (:mod:`demo_compute.config`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from urllib.parse import quote

from sqlalchemy.engine import make_url
from webob import Request, Response

from demo_compute import API_VERSION, cells_api, config, microversions
from demo_compute.cells import DemoCells
from demo_compute.router import MethodNotAllowed, NoRoute, Router
from demo_compute.storage import InvalidName, MarkerNotFound, ServerStore, validate_name
from demo_compute.tags import TAG_METHODS, BadCreateTags, NoTagQuery, ServerTags
from tenancy_mw.cells.ids import parse_cells
from tenancy_mw.core.bodies import BodyError, read_json_body
from tenancy_mw.core.errors import render_error
from tenancy_mw.core.paging import DEFAULT_MAX_LIMIT, InvalidPage, next_link, parse_page
from tenancy_mw.core.paths import PathRefused, canonical_path, shorten
from tenancy_mw.tenants.ids import DEFAULT_VERSION_PATTERN, InvalidTenantId, find_version, quote_tenant_id
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY

__all__ = [
    "MAX_BODY_BYTES",
    "MICROVERSION_KEY",
    "DemoCompute",
    "app_factory",
    "close_pipeline",
]

LOG = logging.getLogger(__name__)

#: Where the version a request is served at is kept (a microversion_parse.Version).
MICROVERSION_KEY = "demo_compute.microversion"

#: Largest request body read; a create body is a few dozen bytes.
MAX_BODY_BYTES = 64 * 1024

_VERSION_RE = re.compile(DEFAULT_VERSION_PATTERN)
# Characters a path segment keeps unescaped when links are rebuilt; the same
# set as tenancy_mw.tenants.ids.quote_tenant_id uses.
_SAFE_IN_SEGMENT = "!$&'()*+,;=:@"
_CREATE_EXAMPLE = '{"server": {"name": "web1"}}'


def _quote_segment(segment: str) -> str:
    return quote(segment, safe=_SAFE_IN_SEGMENT)


def _json_response(document: dict, status: int = 200, headers: dict | None = None) -> Response:
    # ensure_ascii=False: tenant ids and names are shown as the UTF-8 text
    # they are, not as \\u escapes.
    body = json.dumps(document, ensure_ascii=False).encode("utf-8")
    response = Response(body=body, status=status, content_type="application/json", charset=None)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


#: An error answer, raised from deep in a handler and rendered by :meth:`DemoCompute.__call__`.
_Fail = cells_api.ApiError


class DemoCompute:
    """The demo service, a plain WSGI callable; see the module documentation.

    :param store: where the servers are kept.
    :param cells: the ``os-services``/``os-hypervisors`` API over the cell databases, if any.
    :param error_format: the shape of its JSON errors, ``"api-wg"`` or ``"nova"`` (:mod:`tenancy_mw.core.errors`).
    :param max_limit: the most servers a page of the list holds.
    """

    def __init__(
        self,
        store: ServerStore,
        cells: cells_api.CellsApi | None = None,
        error_format: str = "api-wg",
        max_limit: int = DEFAULT_MAX_LIMIT,
    ) -> None:
        self.store = store
        self.error_format = error_format
        #: The most servers of a page (nova's ``[api] max_limit``).
        self.max_limit = max_limit
        #: os-services and os-hypervisors across the cells, when the demo has cells.
        self.cells_api = cells
        #: Tags on servers (microversion 2.26 and later): :mod:`demo_compute.tags`.
        self.tags = ServerTags(store, error_format)
        self._routes = self._router()

    def __call__(self, environ: dict, server_start_response: Callable):
        """Answer one request."""

        def start_response(status, headers, exc_info=None):
            # Every answer under /v2.1, errors included, says the version it
            # was served at, as nova's do (none for a version it cannot
            # serve: Vary alone, as the filters' answers say too).
            if MICROVERSION_KEY in environ:
                headers = list(headers) + microversions.response_headers(environ[MICROVERSION_KEY])
            return server_start_response(status, headers, exc_info)

        try:
            response = self._route(Request(environ))
        except _Fail as fail:
            return render_error(
                environ,
                start_response,
                fail.status,
                fail.code,
                fail.detail,
                error_format=self.error_format,
                headers=fail.headers,
            )
        except Exception:
            # A bug or a database outage: log the traceback, show none.
            LOG.exception("demo_compute failed on %s %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
            return render_error(
                environ,
                start_response,
                500,
                "demo.internal-error",
                "The demo service failed to answer this request; its log tells why.",
                error_format=self.error_format,
            )
        return response(environ, start_response)

    # Routing ---------------------------------------------------------------

    def _router(self) -> Router:
        """The demo's routes (Routes, :mod:`demo_compute.router`); handlers are methods of this app."""
        router = Router()
        router.connect("/", "versions", ("GET", "HEAD"))
        router.connect("/%s" % API_VERSION, "version_document", ("GET", "HEAD"))
        if self.cells_api is not None:
            # Before the servers: os-services and os-hypervisors are no project.
            for scope in ("/%s" % API_VERSION, "/%s/{project_id}" % API_VERSION):
                for path, handler, methods in self.cells_api.ROUTES:
                    router.connect(scope + path, "cells." + handler, methods)
        # nova (since Mitaka) shows the version document at the project's URL
        # too: python-novaclient GETs its endpoint, /v2.1/{project_id}, to
        # discover versions.  (On the admin endpoint tenant_admin answers that
        # URL, and its version_discovery adds this app's /v2.1 document.)
        # Never for the cells' collection names (their own routes, or 404 without cells).
        not_a_collection = "(?!(?:%s)$)[^/]+" % "|".join(
            sorted({re.escape(path.split("/")[1]) for path, _, _ in cells_api.CellsApi.ROUTES})
        )
        router.connect(
            "/%s/{project_id}" % API_VERSION,
            "tenant_version_document",
            ("GET", "HEAD"),
            {"project_id": not_a_collection},
        )
        servers = "/%s/{project_id}/servers" % API_VERSION
        router.connect(servers, "server_list", ("GET", "HEAD"))
        router.connect(servers, "server_create", ("POST",))
        router.connect(servers + "/detail", "server_list_detail", ("GET", "HEAD"))
        # "detail" names the list, never a server (so DELETE .../detail is
        # not offered in an Allow header).
        server_id = {"server_id": r"(?!detail(?:/|$))[^/]+"}
        router.connect(servers + "/{server_id}", "server_show", ("GET", "HEAD"), server_id)
        router.connect(servers + "/{server_id}", "server_delete", ("DELETE",), server_id)
        # The tag API's methods only, so a 405's Allow (an OPTIONS, a POST) names just
        # those it serves (with every method, Allow offered POST and PATCH, which it refuses).
        for path in ("/{server_id}/tags", "/{server_id}/tags/{tag}"):
            router.connect(servers + path, "server_tags", TAG_METHODS, server_id)
        return router

    def _route(self, req: Request) -> Response:
        try:
            canonical = canonical_path(req.environ)
        except PathRefused as exc:
            # tenant_path answers these before us; this is for a pipeline without it.
            raise _Fail(400, "demo.bad-path." + exc.rule, exc.detail) from None
        segments = canonical.segments
        version_index = find_version(segments, _VERSION_RE, canonical.prefix_length)
        if version_index >= 0 and segments[version_index] != API_VERSION:
            raise _Fail(
                404,
                "demo.unknown-version",
                "API version %r is not served here; this service has %s only."
                % (shorten(segments[version_index]), API_VERSION),
            )
        # Routes see the path from the version on (from the mount's end at the root).
        start = version_index if version_index >= 0 else canonical.prefix_length
        mount = self._url(req, segments[:start])
        if version_index >= 0:
            # Under /v2.1 only: nova's root versions document is not under
            # microversion control (no version headers, no 406 there).
            try:
                req.environ[MICROVERSION_KEY] = microversions.negotiate(req.environ)
            except microversions.VersionError as exc:
                req.environ[MICROVERSION_KEY] = None
                code = "demo.bad-version" if exc.status == 400 else "demo.version-not-acceptable"
                raise _Fail(exc.status, code, exc.detail) from None
        try:
            handler, args = self._routes.match(segments[start:], req.method)
        except MethodNotAllowed as exc:
            allow = ", ".join(exc.allow)
            raise _Fail(
                405,
                "demo.method-not-allowed",
                "Method %r is not allowed here; allowed: %s." % (shorten(req.method), allow),
                headers=(("Allow", allow),),
            ) from None
        except NoRoute:
            raise _Fail(404, "demo.not-found", "Nothing is at %r." % shorten(str(canonical))) from None
        if handler.startswith("cells."):
            assert self.cells_api is not None  # only connected with cells
            args.pop("project_id", None)
            status, document = self.cells_api.handle(
                handler[len("cells.") :], req, req.environ[MICROVERSION_KEY], **args
            )
            return _json_response(document, status) if document is not None else Response(status=status)
        if "project_id" in args:
            tenant_id = self._tenant(req, args.pop("project_id"))
            base = "%s/%s/%s" % (mount, API_VERSION, quote_tenant_id(tenant_id))
            return getattr(self, "_" + handler)(req, tenant_id, base, **args)
        return getattr(self, "_" + handler)(req, mount)

    def _versions(self, req: Request, mount: str) -> Response:
        return _json_response({"versions": [self._version(mount)]})

    def _version_document(self, req: Request, mount: str) -> Response:
        document = self._version(mount)
        document["media-types"] = [
            {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
        ]
        return _json_response({"version": document})

    def _tenant_version_document(self, req: Request, tenant_id: str, base: str) -> Response:
        # Links point at /v2.1/, as nova's do: the version, not the project.
        return self._version_document(req, base.rsplit("/", 2)[0])

    @staticmethod
    def _tenant(req: Request, segment: str) -> str:
        tenant_id = req.environ.get(TENANT_ID_KEY)
        if tenant_id is None:
            raise _Fail(
                400,
                "demo.no-tenant",
                "No tenant id was found for tenant segment %r: the tenant_path filter must run before"
                " this app (check the pipeline in api-paste.ini)." % shorten(segment),
            )
        if tenant_id != segment:
            # Only a misconfigured pipeline (tenant_path with another
            # version_pattern) gets here; never guess which one is right.
            raise _Fail(
                400,
                "demo.tenant-mismatch",
                "The tenant_path filter found tenant %r but this app routes on tenant segment %r:"
                " their version patterns differ." % (shorten(tenant_id), shorten(segment)),
            )
        return tenant_id

    @staticmethod
    def _url(req: Request, segments: tuple[str, ...]) -> str:
        """The request's host URL followed by *segments*, quoted again."""
        return req.host_url + "".join("/" + _quote_segment(segment) for segment in segments)

    @staticmethod
    def _version(mount: str) -> dict:
        return {
            "id": API_VERSION,
            "status": "CURRENT",
            "version": str(microversions.MAX_VERSION),
            "min_version": str(microversions.MIN_VERSION),
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": "%s/%s/" % (mount, API_VERSION)}],
        }

    # Servers ---------------------------------------------------------------

    def _server_create(self, req: Request, tenant_id: str, base: str) -> Response:
        body = self._server_from_body(req)
        name = self._name(body)
        try:
            tags = self.tags.tags_to_create(req.environ, body)
        except BadCreateTags as exc:
            raise _Fail(400, "demo.invalid-tags", exc.detail) from None
        try:
            server = self.store.create_server(tenant_id, name)
        except (InvalidName, InvalidTenantId) as exc:
            raise _Fail(400, "demo.invalid-input", exc.detail) from None
        if tags:
            self.tags.store.replace_tags(server["id"], tags)
        view = self._view(server, base)
        self.tags.add_to_views(req.environ, [view])
        return _json_response({"server": view}, 201, {"Location": view["links"][0]["href"]})

    def _server_list(self, req: Request, tenant_id: str, base: str, detail: bool = False) -> Response:
        try:
            page = parse_page(req.query_string, self.max_limit)
        except InvalidPage as exc:
            raise _Fail(400, "demo.invalid-page." + exc.rule, exc.detail) from None
        try:
            tag_query = self.tags.list_query(req.environ)
        except NoTagQuery as exc:
            raise _Fail(400, "demo.no-tag-query", exc.detail) from None
        where = None
        # limit=0 reads no server (list_servers only checks the marker): no condition to build.
        if tag_query is not None and page.limit:
            where = self.tags.condition(tag_query, self.store.servers.c.id, marker=page.marker, limit=page.limit)
        try:
            servers = self.store.list_servers(tenant_id, where, marker=page.marker, limit=page.limit)
        except MarkerNotFound as exc:
            raise _Fail(400, "demo.marker-not-found", exc.detail) from None
        views = [self._view(server, base) for server in servers]
        self.tags.add_to_views(req.environ, views)
        document: dict = {"servers": views}
        url = "%s/servers%s" % (base, "/detail" if detail else "")
        if req.query_string:
            url += "?" + req.query_string
        link = next_link(url, [view["id"] for view in views], page)
        if link is not None:
            # nova's key, only when there is a next page.
            document["servers_links"] = [link]
        return _json_response(document)

    def _server_list_detail(self, req: Request, tenant_id: str, base: str) -> Response:
        # A demo server has no more fields than the list shows, so the detailed
        # list (what openstacksdk and novaclient ask for by default) is the same.
        return self._server_list(req, tenant_id, base, detail=True)

    def _server_show(self, req: Request, tenant_id: str, base: str, server_id: str) -> Response:
        server = self.store.get_server(tenant_id, server_id)
        if server is None:
            raise self._no_server(server_id)
        view = self._view(server, base)
        self.tags.add_to_views(req.environ, [view])
        return _json_response({"server": view})

    def _server_delete(self, req: Request, tenant_id: str, base: str, server_id: str) -> Response:
        if not self.store.delete_server(tenant_id, server_id):
            raise self._no_server(server_id)
        self.tags.forget(server_id)
        return Response(status=204)

    def _server_tags(self, req: Request, tenant_id: str, base: str, server_id: str, tag: str | None = None) -> Response:
        answer = self.tags.respond(req, server_id, tag)
        if answer is None:
            # Below 2.26 there are no tags, as in nova: not found.
            raise _Fail(404, "demo.not-found", "Nothing is at %r." % shorten(req.path))
        return answer

    @staticmethod
    def _no_server(server_id: str) -> _Fail:
        # The same answer for a server of another tenant as for none at all:
        # a tenant cannot even learn that another tenant's server exists.
        return _Fail(404, "demo.server-not-found", "This tenant has no server %r." % shorten(server_id))

    @staticmethod
    def _server_from_body(req: Request) -> dict:
        try:
            document = read_json_body(req.environ, MAX_BODY_BYTES, _CREATE_EXAMPLE)
        except BodyError as exc:
            raise _Fail(exc.status, "demo." + exc.rule, exc.detail) from None
        server = document.get("server") if isinstance(document, dict) else None
        if not isinstance(server, dict):
            raise _Fail(
                400,
                "demo.bad-body",
                "The request body %s is not of the form %s."
                % (shorten(json.dumps(document, ensure_ascii=False)), _CREATE_EXAMPLE),
            )
        return server

    @staticmethod
    def _name(server: dict) -> str:
        if "name" not in server:
            raise _Fail(
                400,
                "demo.missing-name",
                "The server %s has no name; send %s."
                % (shorten(json.dumps(server, ensure_ascii=False)), _CREATE_EXAMPLE),
            )
        try:
            return validate_name(server["name"])
        except InvalidName as exc:
            raise _Fail(400, "demo.invalid-name", exc.detail) from None

    @staticmethod
    def _view(server: dict, base: str) -> dict:
        return {
            "id": server["id"],
            "name": server["name"],
            "tenant_id": server["tenant_id"],
            "created": server["created"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "links": [{"rel": "self", "href": "%s/servers/%s" % (base, server["id"])}],
            # nova's fields that its clients read in every view (the nova
            # command line's list and show fail without them); a demo server
            # has no lifecycle, flavor, image or network, so they are constant.
            "status": "ACTIVE",
            "flavor": {},
            "image": "",
            "addresses": {},
        }


def app_factory(global_conf: dict, **local_conf: str) -> DemoCompute:
    """``paste.app_factory``: the demo app, configured by the demo's settings file.

    The database is ``[demo_compute] database_url`` and the cells are
    ``[id_resolver] cells`` of ``tenancy_mw_demo.conf`` (the file paste's
    ``oslo_config_file`` names; :mod:`demo_compute.config`), where the
    environment's ``OS_DEMO_COMPUTE__DATABASE_URL`` and
    ``OS_ID_RESOLVER__CELLS`` win.  ``database_url`` and ``cells`` given in
    the paste section win over both.  An unknown key in the section is an
    error: it is usually a typo.

    The cells are reached with the filter's ``cell_timeout``, ``pool_size``
    and ``pool_recycle`` (:class:`demo_compute.cells.DemoCells`): building
    the app waits at most ``cell_timeout`` for cells that are down, however
    many.
    """
    unknown = sorted(set(local_conf) - {"database_url", "cells"})
    if unknown:
        raise ValueError(
            "demo_compute: unknown option(s) %s; the options are database_url and cells" % ", ".join(unknown)
        )
    settings = config.load(global_conf)
    url = make_url(local_conf.get("database_url") or settings.demo_compute.database_url)
    LOG.info("demo_compute: database %s", url.render_as_string(hide_password=True))
    cells = None
    cell_urls = local_conf.get("cells") or settings.id_resolver.cells
    if cell_urls:
        resolver = settings.id_resolver
        demo_cells = DemoCells(
            parse_cells(cell_urls),
            cell_timeout=resolver.cell_timeout,
            pool_size=resolver.pool_size,
            pool_recycle=resolver.pool_recycle,
        )
        demo_cells.prepare()
        cells = cells_api.CellsApi(demo_cells)
    return DemoCompute(
        ServerStore(url), cells, settings.demo_compute.error_format, max_limit=settings.demo_compute.max_limit
    )


def close_pipeline(app) -> None:
    """Close what a loaded pipeline opened (the demo's store and cells, the filters' registry and
    lookups), following ``.application`` from *app*: for a pipeline loaded only to be read, as
    the docs' build reads each endpoint's OpenAPI document."""
    from tenancy_mw.tenants.admin.filter import TenantAdmin

    seen = set()
    while app is not None and id(app) not in seen:
        seen.add(id(app))
        cells_api = getattr(app, "cells_api", None)
        for closable in (
            getattr(app, "store", None),
            getattr(app, "lookup", None),
            getattr(cells_api, "cells", None),
            app if isinstance(app, TenantAdmin) else None,
        ):
            if hasattr(closable, "close"):
                closable.close()
        app = getattr(app, "application", None)
