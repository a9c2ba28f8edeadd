"""The demo's move interface: ``tenant_admin`` moves servers between tenants with it.

Named in the admin pipeline of ``api-paste.ini``::

    [filter:tenant_admin]
    use = egg:tenancy_mw#tenant_admin
    move_provider = demo_compute.moves:ServerMoves

``tenant_admin`` calls ``ServerMoves(app)`` once, with the app it wraps;
the provider follows the filters' ``application`` chain down to the
:class:`~demo_compute.app.DemoCompute` of that pipeline and works on its
:class:`~demo_compute.storage.ServerStore`.
The movable resources are servers, at path ``("servers", id)`` below the
tenant; a server's state tag is a digest of its row, so it changes when
the server does.  A deleted server is known by its tombstone (the move
answers ``410``).

It is the demo's :class:`~tenancy_mw.tenants.removal.TenantRemoval` too:
``DELETE`` of a tenant hides its servers, restore shows them again, and
``tenancy-mw-manage tenants purge --paste api-paste.ini#admin`` (run in
``examples/``) deletes them for good, with their tags and tombstones
(:class:`~demo_compute.storage.ServerStore`'s ``hide_tenant``,
``restore_tenant``, ``purge_tenant``).  So a tenant id purged and created
again starts with no server.

``TENANCY_DEMO_MOVE_DELAY`` (seconds, default 0) makes every move, and
every purge of a tenant's servers, wait that long before it writes: the
tests use it to widen the window in which two concurrent conditional moves
would both pass their ``If-Match`` check if the registry's row lock did
not serialise them, and in which restores race a purge.
"""

from __future__ import annotations

import os
import time

import sqlalchemy as sa

from demo_compute.storage import ServerStore
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, state_tag
from tenancy_mw.tenants.removal import TenantRemoval

__all__ = ["MOVE_DELAY_ENV", "ServerMoves"]

#: Environment variable: seconds each move and each purge waits before writing (for the race tests).
MOVE_DELAY_ENV = "TENANCY_DEMO_MOVE_DELAY"


class ServerMoves(MoveProvider, TenantRemoval):
    """Moves the demo's servers, and hides, restores and purges a deleted tenant's (see the module documentation).

    :param application: what tenant_admin wraps: the demo app, or filters in front of it.
    """

    def __init__(self, application) -> None:
        found, seen = application, []
        # The filters between tenant_admin and the app (idempotency, tag_query,
        # id_resolver) each keep the next one in ``application``.
        while not isinstance(getattr(found, "store", None), ServerStore):
            seen.append(type(found).__name__)
            found = getattr(found, "application", None)
            if found is None:
                raise TypeError(
                    "ServerMoves needs the demo_compute app after tenant_admin in the pipeline; found only %s"
                    % ", ".join(seen)
                )
        self.store = found.store
        self.delay = float(os.environ.get(MOVE_DELAY_ENV) or 0)

    def resource_state(self, tenant_id, path):
        if len(path) != 2 or path[0] != "servers":
            return None
        server = self.store.get_server(tenant_id, path[1])
        if server is None:
            if self.store.is_deleted(tenant_id, path[1]):
                return ResourceState(tuple(path), {"id": path[1]}, deleted=True)
            return None
        return self._state(server)

    def tenant_resources(self, tenant_id, list_limit):
        servers = self.store.list_servers(tenant_id)
        states = [self._state(server) for server in servers]
        return TenantResources(
            count=len(states),
            tag=state_tag(sorted(state.path[1] + ":" + state.tag for state in states)),
            resources=states if len(states) <= list_limit else None,
            metadata={"kind": "servers"},
        )

    def move_resource(self, tenant_id, path, dest_tenant_id):
        self._wait()
        table = self.store.servers
        statement = (
            table.update().where(table.c.tenant_id == tenant_id, table.c.id == path[1]).values(tenant_id=dest_tenant_id)
        )
        with self.store.engine.begin() as conn:
            if conn.execute(statement).rowcount != 1:
                raise MoveRefused(409, "Server %r left tenant %r while it was being moved." % (path[1], tenant_id))
        return tuple(path)

    def move_tenant(self, tenant_id, dest_tenant_id):
        self._wait()
        table = self.store.servers
        with self.store.engine.begin() as conn:
            ids = [row[0] for row in conn.execute(sa.select(table.c.id).where(table.c.tenant_id == tenant_id))]
            if ids:
                conn.execute(
                    table.update().where(table.c.tenant_id == tenant_id, table.c.id.in_(ids))
                    .values(tenant_id=dest_tenant_id)
                )
        return [(("servers", server_id), ("servers", server_id)) for server_id in ids]

    def hide_resources(self, tenant_id):
        self.store.hide_tenant(tenant_id)

    def restore_resources(self, tenant_id):
        self.store.restore_tenant(tenant_id)

    def purge_resources(self, tenant_id):
        self._wait()
        self.store.purge_tenant(tenant_id)

    def _wait(self) -> None:
        if self.delay > 0:
            time.sleep(self.delay)

    @staticmethod
    def _state(server: dict) -> ResourceState:
        state = {"id": server["id"], "name": server["name"], "created": server["created"].isoformat()}
        return ResourceState(("servers", server["id"]), state, tag=state_tag([state]))
