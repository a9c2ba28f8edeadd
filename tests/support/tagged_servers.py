"""A small server service for the OpenAPI drift tests: a list, a create, the tag API, and a move provider.

Under ``/v2.1/{tenant}/servers``: ``GET`` lists the tenant's servers
(``404`` for a tenant whose servers moved away), ``POST`` creates one
(``201``), and ``/servers/{id}/tags[/{tag}]`` is the library's
:class:`~tenancy_mw.tags.api.TagAPI` over a real :class:`~tenancy_mw.tags.store.TagStore`.
The same calls without a tenant (``/v2.1/servers``, as ``tenant_path``
reads it) are the operator's: they reach every tenant's servers.  Any
mount (``SCRIPT_NAME``) and a stripped tenant segment are read as
``tenant_path`` left them.  ``GET /v2.1`` is its version document.
``POST /servers/{id}/action`` accepts a nova-style action, named by the
JSON body's one top-level key (``202``; ``422``, a status no filter
answers, for a body naming none or several; ``404`` for a server the
tenant does not have, which ``tenant_admin`` turns into ``301`` once the
tenant moved; any other method ``405``).
:class:`ServerMoves` moves servers between tenants; it refuses moves into
``full`` (``403``) and ``taken`` (``409``, a status the move answers
itself too), into ``refuses-NNN`` with that status, and fails on ``boom``
(a provider bug: ``500``).
"""

from __future__ import annotations

import json

from tenancy_mw.core.paths import DEFAULT_VERSION_PATTERN, canonical_path, compile_version_pattern, find_version
from tenancy_mw.tags.api import TagAPI
from tenancy_mw.tags.store import TagStore
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, state_tag
from tenancy_mw.tenants.path_filter import TENANT_SEGMENT_KEY

_VERSION = compile_version_pattern(DEFAULT_VERSION_PATTERN)


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
        """Whether the request's tenant has the (not deleted) server *server_id*; without a tenant, any tenant."""
        tenant = environ.get("tenancy.tenant_id")
        if tenant is None:
            return any(s == server_id and not deleted for (_, s), deleted in self.servers.items())
        return self.servers.get((tenant, server_id)) is False

    def __call__(self, environ, start_response):
        canonical = canonical_path(environ)
        segments = canonical.segments
        tenant = environ.get("tenancy.tenant_id")
        method = environ["REQUEST_METHOD"]
        # What follows the tenant segment, else the version (tenant_path's reading; the mount left out).
        index = environ.get(TENANT_SEGMENT_KEY, -1)
        if index < 0:
            index = find_version(segments, _VERSION, canonical.prefix_length)
        rest = segments[index + 1 :]
        if rest == () and tenant is None and method == "GET":  # the version document (version_discovery asks)
            return _answer(start_response, "200 OK", {"version": {"id": segments[index], "status": "CURRENT"}})
        if len(rest) in (3, 4) and rest[0] == "servers" and rest[2] == "tags":
            return self.tags.respond(environ, start_response, rest[1], rest[3] if len(rest) == 4 else None)
        if len(rest) == 3 and rest[0] == "servers" and rest[2] == "action":
            return self.action(environ, start_response, rest[1])
        if rest == ("servers",) and tenant not in self.moved_out:
            if method == "POST":
                server_id = "s%d" % (len(self.servers) + 1)
                self.servers[(tenant, server_id)] = False
                place = "/".join(segments[: index + 1] + ("servers", server_id))
                return _answer(
                    start_response,
                    "201 Created",
                    {"server": {"id": server_id}},
                    [("Location", "http://127.0.0.1:8774/%s" % place)],
                )
            mine = sorted(s for (t, s), deleted in self.servers.items() if tenant in (None, t) and not deleted)
            return _answer(start_response, "200 OK", {"servers": mine})
        return _answer(start_response, "404 Not Found", {"error": "no such server"})

    def action(self, environ, start_response, server_id: str):
        """``POST .../servers/{id}/action``: the action the body's one key names, on a server of the tenant."""
        if environ["REQUEST_METHOD"] != "POST":
            return _answer(start_response, "405 Method Not Allowed", {"error": "only POST"}, [("Allow", "POST")])
        if not self.owns(environ, server_id):
            return _answer(start_response, "404 Not Found", {"error": "no such server"})
        length = environ.get("CONTENT_LENGTH") or "0"
        try:
            body = json.loads(environ["wsgi.input"].read(int(length)) or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict) or len(body) != 1:
            return _answer(start_response, "422 Unprocessable Entity", {"error": "name one action"})
        return _answer(start_response, "202 Accepted", {"server": server_id, "action": next(iter(body))})


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
        if dest_tenant_id.startswith("refuses-"):  # refuses-404: the provider's refusal with that status
            raise MoveRefused(int(dest_tenant_id[8:]), "Tenant %r takes no servers." % dest_tenant_id)
