"""A small server service for the OpenAPI drift tests: a list, a create, the tag API, and a move provider.

Under ``/v2.1/{tenant}/servers``: ``GET`` lists the tenant's servers
(``404`` for a tenant whose servers moved away), ``POST`` creates one
(``201``), and ``/servers/{id}/tags[/{tag}]`` is the library's
:class:`~tenancy_mw.tags.api.TagAPI` over a real :class:`~tenancy_mw.tags.store.TagStore`.
:class:`ServerMoves` moves servers between tenants; it refuses moves into
``full`` (``403``) and ``taken`` (``409``, a status the move answers
itself too) and fails on ``boom`` (a provider bug: ``500``).
"""

from __future__ import annotations

import json

from tenancy_mw.core.paths import canonical_path
from tenancy_mw.tags.api import TagAPI
from tenancy_mw.tags.store import TagStore
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, state_tag


class ServerService:
    """The WSGI app: ``self.servers`` is ``{(tenant, id): deleted}``; ``self.moved_out`` the tenants moved away."""

    def __init__(self, tag_store: TagStore, error_format: str = "api-wg") -> None:
        self.servers: dict[tuple[str, str], bool] = {
            ("acme", "s1"): False,
            ("acme", "sdel"): True,
            ("moved", "s9"): False,
        }
        self.moved_out: set[str] = set()
        self.tags = TagAPI(tag_store, self.owns, error_format=error_format, noun="server")

    def owns(self, environ: dict, server_id: str) -> bool:
        """Whether the request's tenant has the (not deleted) server *server_id*."""
        return self.servers.get((environ.get("tenancy.tenant_id"), server_id)) is False

    def __call__(self, environ, start_response):
        segments = canonical_path(environ).segments
        tenant = environ.get("tenancy.tenant_id")
        method = environ["REQUEST_METHOD"]
        if len(segments) in (5, 6) and segments[2] == "servers" and segments[4] == "tags":
            return self.tags.respond(environ, start_response, segments[3], segments[5] if len(segments) == 6 else None)
        if len(segments) == 3 and segments[2] == "servers" and tenant not in self.moved_out:
            if method == "POST":
                server_id = "s%d" % (len(self.servers) + 1)
                self.servers[(tenant, server_id)] = False
                return _answer(
                    start_response,
                    "201 Created",
                    {"server": {"id": server_id}},
                    [("Location", "http://127.0.0.1:8774/v2.1/%s/servers/%s" % (tenant, server_id))],
                )
            mine = sorted(s for (t, s), deleted in self.servers.items() if t == tenant and not deleted)
            return _answer(start_response, "200 OK", {"servers": mine})
        return _answer(start_response, "404 Not Found", {"error": "no such server"})


def _answer(start_response, status: str, document: dict, headers: list | None = None):
    body = json.dumps(document).encode()
    # X-Served-By tells the service's own answers (and their replays) from the filters'.
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Served-By", "service"),
            *(headers or []),
        ],
    )
    return [body]


class ServerMoves(MoveProvider):
    """Moves servers of :class:`ServerService` (found at the end of the wrapped chain) between tenants."""

    def __init__(self, application) -> None:
        while not isinstance(application, ServerService):
            application = application.application
        self.service = application

    def resource_state(self, tenant_id, path):
        if len(path) != 2 or path[0] != "servers" or (tenant_id, path[1]) not in self.service.servers:
            return None
        deleted = self.service.servers[(tenant_id, path[1])]
        return ResourceState(tuple(path), {"id": path[1]}, deleted=deleted)

    def tenant_resources(self, tenant_id, list_limit):
        if tenant_id == "boom":
            raise RuntimeError("the provider failed")
        mine = sorted(s for (t, s) in self.service.servers if t == tenant_id)
        states = [self.resource_state(tenant_id, ("servers", s)) for s in mine]
        return TenantResources(count=len(states), tag=state_tag(mine), resources=states, metadata={"kind": "server"})

    def move_resource(self, tenant_id, path, dest_tenant_id):
        self._check(dest_tenant_id)
        self.service.servers[(dest_tenant_id, path[1])] = self.service.servers.pop((tenant_id, path[1]))
        return tuple(path)

    def move_tenant(self, tenant_id, dest_tenant_id):
        self._check(dest_tenant_id)
        moved = [(("servers",), ("servers",))]
        for key in [k for k in sorted(self.service.servers) if k[0] == tenant_id]:
            self.service.servers[(dest_tenant_id, key[1])] = self.service.servers.pop(key)
            moved.append((("servers", key[1]), ("servers", key[1])))
        self.service.moved_out.add(tenant_id)
        return moved

    @staticmethod
    def _check(dest_tenant_id: str) -> None:
        if dest_tenant_id == "full":
            raise MoveRefused(403, "Tenant 'full' takes no more servers.")
        if dest_tenant_id == "taken":
            raise MoveRefused(409, "Tenant 'taken' has servers of those names.")
