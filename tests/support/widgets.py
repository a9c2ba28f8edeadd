"""A tiny widget service with a real :class:`tenancy_mw.tenants.moves.MoveProvider`, for in-process tests.

Widgets live in a dict shared by the app and its provider, under
``/v1/{tenant}/widgets/{id}``: ``GET`` shows one (404 when the tenant has
no such widget), ``PUT`` stores one, ``DELETE`` marks it deleted.
"""

from __future__ import annotations

import json

from tenancy_mw.core.paths import canonical_path
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, state_tag


class WidgetService:
    """The WSGI app: ``self.widgets`` is ``{(tenant, id): {"name", "version", "deleted"}}``."""

    def __init__(self) -> None:
        self.widgets: dict[tuple[str, str], dict] = {}
        self.calls = 0

    def __call__(self, environ, start_response):
        self.calls += 1
        segments = canonical_path(environ).segments
        tenant = environ.get("tenancy.tenant_id")
        method = environ["REQUEST_METHOD"]
        if len(segments) == 4 and segments[2] == "widgets":
            key = (tenant, segments[3])
            if method == "PUT":
                old = self.widgets.get(key, {"version": 0})
                self.widgets[key] = {"name": segments[3], "version": old["version"] + 1, "deleted": False}
                return _answer(start_response, "201 Created", self.widgets[key])
            widget = self.widgets.get(key)
            if widget is not None and not widget["deleted"]:
                if method == "DELETE":
                    widget["deleted"] = True
                    return _answer(start_response, "204 No Content", None)
                return _answer(start_response, "200 OK", widget)
        if len(segments) == 3 and segments[2] == "widgets":
            mine = [w for (t, _), w in sorted(self.widgets.items()) if t == tenant and not w["deleted"]]
            return _answer(start_response, "200 OK", {"widgets": mine})
        return _answer(start_response, "404 Not Found", {"error": "no such widget"})


def _answer(start_response, status, document):
    if document is None:
        start_response(status, [])
        return [b""]
    body = json.dumps(document).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class WidgetMoves(MoveProvider):
    """Moves widgets between tenants: the interface implemented for :class:`WidgetService`."""

    def __init__(self, application) -> None:
        self.service = application
        self.widgets = application.widgets
        #: Tenants whose moves are refused (a quota, say).
        self.refuse_into: set[str] = set()

    def resource_state(self, tenant_id, path):
        if len(path) != 2 or path[0] != "widgets":
            return None
        widget = self.widgets.get((tenant_id, path[1]))
        if widget is None:
            return None
        return ResourceState(tuple(path), {"name": widget["name"]}, tag=str(widget["version"]),
                             deleted=widget["deleted"])

    def tenant_resources(self, tenant_id, list_limit):
        states = [self.resource_state(tenant_id, ("widgets", key[1]))
                  for key in sorted(self.widgets) if key[0] == tenant_id]
        return TenantResources(
            count=len(states),
            tag=state_tag([s.path[1] + ":" + s.tag for s in states]),
            resources=states if len(states) <= list_limit else None,
            metadata={"kind": "widget"},
        )

    def move_resource(self, tenant_id, path, dest_tenant_id):
        if dest_tenant_id in self.refuse_into:
            raise MoveRefused(403, "Tenant %r takes no more widgets." % dest_tenant_id)
        widget = self.widgets.pop((tenant_id, path[1]))
        self.widgets[(dest_tenant_id, path[1])] = widget
        return tuple(path)

    def move_tenant(self, tenant_id, dest_tenant_id):
        moved = []
        for key in [k for k in sorted(self.widgets) if k[0] == tenant_id]:
            self.widgets[(dest_tenant_id, key[1])] = self.widgets.pop(key)
            moved.append((("widgets", key[1]), ("widgets", key[1])))
        return moved


def widget_moves_factory(application):
    """A move_provider factory that is not the class itself (to test the dotted-path loader)."""
    return WidgetMoves(application)
