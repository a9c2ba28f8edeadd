"""The tenant admin API and a bit of public API behind real routers.

Every handler answers JSON ``{"handler": "admin:..."}`` or
``{"handler": "public:..."}``, so a test can tell which kind of handler a
request reached.  The routers, each used as its own documentation says:

- Routes, as nova uses it: a ``routes.Mapper`` and ``RoutesMiddleware``
  (which honours ``_method`` in the query and in form posts);
- pecan ``RestController`` trees, with ``get_one(self, tenant_id)`` and with
  ``get_one(self, *args)`` (which looks for child controllers at any depth);
- Flask and Django, with the routes written the obvious way;
- Paste's ``urlmap`` and nova's version-routing urlmap
  (:mod:`tests.support.nova_urlmap`) in front of them.

:data:`DEPLOYMENTS` puts them together the ways a service does, each with
the place the filters go (in front of everything, or inside a mount).
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable

ADMIN_TENANT = {"PUT": "admin:create-tenant", "DELETE": "admin:delete-tenant"}


def _json(start_response, handler: str, status: str = "200 OK"):
    body = json.dumps({"handler": handler}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


# Routes, as nova builds its APIRouter: Mapper.connect with method conditions.


def routes_app(with_version: bool = True) -> Callable:
    """A Routes router for ``/{version}/{tenant}/...`` (or ``/{tenant}/...`` under a version mount)."""
    import routes
    import routes.middleware

    mapper = routes.Mapper()
    prefix = "/{version}/{tenant}" if with_version else "/{tenant}"
    connect = mapper.connect
    connect(prefix, handler="admin:create-tenant", conditions={"method": ["PUT"]})
    connect(prefix, handler="admin:delete-tenant", conditions={"method": ["DELETE"]})
    connect(prefix, handler="public:tenant", conditions={"method": ["GET", "HEAD"]})
    connect(prefix + "/action", handler="admin:tenant-action")
    connect(prefix + "/action/{name}", handler="admin:tenant-action")
    connect(prefix + "/{resource:.*}/action/move", handler="admin:move")
    connect(prefix + "/servers", handler="public:servers")
    connect(prefix + "/servers/{id}", handler="public:server")
    connect(prefix + "/servers/{id}/action", handler="public:server-action", conditions={"method": ["POST"]})

    def dispatch(environ, start_response):
        match = environ["wsgiorg.routing_args"][1]
        if not match:
            return _json(start_response, "none", "404 Not Found")
        return _json(start_response, match["handler"])

    return routes.middleware.RoutesMiddleware(dispatch, mapper)


# pecan RestController trees.


def pecan_app(varargs: bool) -> Callable:
    """A pecan app: ``/{version}`` -> tenants RestController -> ``action`` and ``servers`` children."""
    import pecan
    from pecan import expose
    from pecan.rest import RestController

    class ActionController(RestController):
        _custom_actions = {"move": ["GET", "POST"], "restore": ["POST"]}

        @expose("json")
        def get_all(self, *args):
            return {"handler": "admin:tenant-action"}

        @expose("json")
        def move(self, *args, **kw):
            return {"handler": "admin:move"}

        @expose("json")
        def restore(self, *args, **kw):
            return {"handler": "admin:restore"}

    class ServersController(RestController):
        _custom_actions = {"action": ["POST"]}

        @expose("json")
        def get_all(self, *args, **kw):
            return {"handler": "public:servers"}

        @expose("json")
        def get_one(self, *args, **kw):
            return {"handler": "public:server"}

        @expose("json")
        def post(self, *args, **kw):
            return {"handler": "public:servers"}

        @expose("json")
        def put(self, *args, **kw):
            return {"handler": "public:server"}

        @expose("json")
        def delete(self, *args, **kw):
            return {"handler": "public:server"}

        @expose("json")
        def action(self, *args, **kw):
            return {"handler": "public:server-action"}

    class TenantsBase(RestController):
        action = ActionController()
        servers = ServersController()

        @expose("json")
        def put(self, tenant_id=None):
            return {"handler": "admin:create-tenant"}

        @expose("json")
        def delete(self, tenant_id=None):
            return {"handler": "admin:delete-tenant"}

    if varargs:

        class TenantsController(TenantsBase):
            @expose("json")
            def get_one(self, *args):
                return {"handler": "public:tenant"}
    else:

        class TenantsController(TenantsBase):
            @expose("json")
            def get_one(self, tenant_id):
                return {"handler": "public:tenant"}

    class RootController:
        pass

    for version in ("v2.1", "v1.0", "v1"):
        setattr(RootController, version, TenantsController())
    return pecan.make_app(RootController(), debug=False, logging={}, guess_content_type_from_ext=True)


# Flask.

ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


def flask_app(with_version: bool = True) -> Callable:
    """A Flask app for ``/<version>/<tenant>/...`` (or ``/<tenant>/...`` under a mount)."""
    import flask

    app = flask.Flask("tenancy_flask_%s" % with_version)
    prefix = "/<version>/<tenant>" if with_version else "/<tenant>"

    def add(rule, handler, methods):
        app.add_url_rule(rule, handler + rule, lambda **kw: {"handler": handler}, methods=methods)

    add(prefix, "admin:create-tenant", ["PUT"])
    add(prefix, "admin:delete-tenant", ["DELETE"])
    add(prefix, "public:tenant", ["GET"])
    add(prefix + "/action", "admin:tenant-action", ALL_METHODS)
    add(prefix + "/action/<path:rest>", "admin:tenant-action", ALL_METHODS)
    add(prefix + "/<path:resource>/action/move", "admin:move", ALL_METHODS)
    add(prefix + "/servers", "public:servers", ["GET", "POST"])
    add(prefix + "/servers/<sid>", "public:server", ["GET", "PUT", "DELETE"])
    add(prefix + "/servers/<sid>/action", "public:server-action", ["POST"])
    return app.wsgi_app


# Django: one URLconf module, made once per process.

_DJANGO_URLS = "tests.support._django_urls"


def django_app() -> Callable:
    """A Django app with ``path()`` routes for ``<version>/<tenant>/...``."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            DEBUG=False,
            ALLOWED_HOSTS=["*"],
            ROOT_URLCONF=_DJANGO_URLS,
            MIDDLEWARE=[],
            INSTALLED_APPS=[],
            USE_TZ=True,
            SECRET_KEY="tests-only",
            LOGGING_CONFIG=None,
        )
        _make_django_urls()
        django.setup()
    from django.core.handlers.wsgi import WSGIHandler

    return WSGIHandler()


def _make_django_urls() -> None:
    from django.http import HttpResponseNotAllowed, JsonResponse
    from django.urls import path, re_path

    def view(handlers):
        def respond(request, **kw):
            handler = handlers.get(request.method) or handlers.get("*")
            if handler is None:
                return HttpResponseNotAllowed(list(handlers))
            return JsonResponse({"handler": handler})

        return respond

    module = types.ModuleType(_DJANGO_URLS)
    module.urlpatterns = [
        path("<str:version>/<str:tenant>", view(dict(ADMIN_TENANT, GET="public:tenant", HEAD="public:tenant"))),
        path("<str:version>/<str:tenant>/action", view({"*": "admin:tenant-action"})),
        path("<str:version>/<str:tenant>/action/<path:rest>", view({"*": "admin:tenant-action"})),
        re_path(r"^(?P<version>[^/]+)/(?P<tenant>[^/]+)/(?P<resource>.+)/action/move$", view({"*": "admin:move"})),
        path("<str:version>/<str:tenant>/servers", view({"GET": "public:servers", "POST": "public:servers"})),
        path("<str:version>/<str:tenant>/servers/<str:sid>", view({"*": "public:server"})),
        path("<str:version>/<str:tenant>/servers/<str:sid>/action", view({"POST": "public:server-action"})),
    ]
    sys.modules[_DJANGO_URLS] = module


def versions_app(environ, start_response):
    """The version document app nova mounts at ``/``."""
    return _json(start_response, "public:versions")


class Probe:
    """Wraps the innermost app: counts the requests that reached it."""

    def __init__(self, app: Callable) -> None:
        self.app = app
        self.hits = 0

    def __call__(self, environ, start_response):
        self.hits += 1
        return self.app(environ, start_response)


def _paste_urlmap(mounts: dict) -> Callable:
    from paste.urlmap import URLMap

    urlmap = URLMap()
    for path, app in mounts.items():
        urlmap[path] = app
    return urlmap


def _nova_urlmap(mounts: dict) -> Callable:
    from tests.support.nova_urlmap import URLMap

    urlmap = URLMap()
    for path, app in mounts.items():
        urlmap[path] = app
    return urlmap


class Deployment:
    """A router stack, and where a pipeline of filters goes in it.

    ``build(pipeline)`` returns ``(wsgi_app, probe)``: the pipeline wraps
    the whole stack (``where = "front"``) or the app inside a mount
    (``where = "inside"``); ``probe.hits`` counts requests that reached the
    router.
    """

    def __init__(self, name: str, make_router: Callable[[], Callable], where: str = "front", mount=None) -> None:
        self.name = name
        self.make_router = make_router
        self.where = where
        self.mount = mount
        self._router = None

    def build(self, pipeline: Callable[[Callable], Callable]):
        if self._router is None:
            self._router = self.make_router()
        probe = Probe(self._router)
        if self.mount is None:
            return pipeline(probe), probe
        if self.where == "front":
            return pipeline(self.mount(probe)), probe
        return self.mount(pipeline(probe)), probe


def _nova_mounts(app):
    return _nova_urlmap({"/v2.1": app, "/v2": app, "/": versions_app})


def _paste_v21(app):
    return _paste_urlmap({"/v2.1": app, "/v1.0": app})


def _paste_v1(app):
    return _paste_urlmap({"/v1": app})


DEPLOYMENTS = [
    Deployment("routes", routes_app),
    Deployment("pecan get_one(tenant_id)", lambda: pecan_app(varargs=False)),
    Deployment("pecan get_one(*args)", lambda: pecan_app(varargs=True)),
    Deployment("flask", flask_app),
    Deployment("django", django_app),
    Deployment("paste urlmap /v2.1, filters in front", lambda: routes_app(with_version=False), "front", _paste_v21),
    Deployment("paste urlmap /v2.1, filters inside", lambda: routes_app(with_version=False), "inside", _paste_v21),
    Deployment("paste urlmap /v1 = versioned app, filters in front", flask_app, "front", _paste_v1),
    Deployment("nova urlmap, filters in front", lambda: routes_app(with_version=False), "front", _nova_mounts),
    Deployment("nova urlmap, filters inside", lambda: routes_app(with_version=False), "inside", _nova_mounts),
]
