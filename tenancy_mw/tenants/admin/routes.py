"""Where the tenant and the admin action are in the canonical path, and which handler answers.

:func:`tenant_index` follows ``tenant_path``'s decision when it ran first
(``environ['tenancy.tenant_segment']``), else the filter's own layout.
:func:`action_of` names the admin action of the segments after the
tenant; :data:`HANDLERS` maps ``(method, action)`` to the handler, and
:data:`NOT_ALLOWED` answers the other methods of each action.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tenancy_mw.core.paths import CanonicalPath
from tenancy_mw.tenants.admin import api
from tenancy_mw.tenants.admin.answers import not_allowed
from tenancy_mw.tenants.admin.move_action import MoveRequest
from tenancy_mw.tenants.ids import TenantLayout
from tenancy_mw.tenants.path_filter import TENANT_SEGMENT_KEY, mount_length

if TYPE_CHECKING:
    from tenancy_mw.tenants.admin.filter import TenantAdmin

__all__ = ["HANDLERS", "NOT_ALLOWED", "TENANT", "RESTORE", "MOVE", "Target", "action_of", "dispatch", "tenant_index"]

#: The admin actions: the tenant itself, its restore action, a move action.
TENANT, RESTORE, MOVE = "tenant", "restore", "move"


@dataclass(frozen=True, slots=True)
class Target:
    """The tenant a request names: its id, the canonical path, and the tenant segment's index in it."""

    tenant_id: str
    canonical: CanonicalPath
    index: int


def tenant_index(environ: dict, canonical: CanonicalPath, layout: TenantLayout) -> int:
    """tenant_path's decision when it ran before this filter, else *layout*'s; ``-1``: no tenant.

    Raises :class:`~tenancy_mw.tenants.ids.UnknownPathSegment` (own decision only).
    """
    index = environ.get(TENANT_SEGMENT_KEY)
    if index is None:
        return layout.tenant_index(canonical, mount_length(environ, canonical))
    return index


def action_of(rest: tuple[str, ...], moves: bool) -> str | None:
    """The admin action of *rest*, the segments after the tenant; ``None``: not an admin call.

    Example::

        >>> action_of((), True), action_of(("action", "restore"), True)
        ('tenant', 'restore')
        >>> action_of(("servers", "1", "action", "move"), True), action_of(("action", "move"), False)
        ('move', None)
    """
    if not rest:
        return TENANT
    if rest == ("action", "restore"):
        return RESTORE
    if moves and rest[-2:] == ("action", "move"):
        return MOVE
    return None


def _move(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
    # Parsing checks the source tenant first, then the method (405).
    return MoveRequest(admin, environ, target).answer(start_response)


def _refuse(allow: str) -> Callable:
    def refuse(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target):
        raise not_allowed(environ.get("REQUEST_METHOD", "GET"), allow)

    return refuse


#: ``(method, action)`` -> the handler: ``handler(admin, environ, start_response, target)``.
HANDLERS: dict[tuple[str, str], Callable] = {
    ("GET", TENANT): api.show_tenant,
    ("HEAD", TENANT): api.show_tenant,
    ("PUT", TENANT): api.put_tenant,
    ("DELETE", TENANT): api.delete_tenant,
    ("POST", RESTORE): api.restore_tenant,
    ("GET", MOVE): _move,
    ("HEAD", MOVE): _move,
    ("POST", MOVE): _move,
}

#: action -> the handler of the methods it does not take.
NOT_ALLOWED: dict[str, Callable] = {
    TENANT: _refuse("DELETE, GET, HEAD, PUT"),
    RESTORE: _refuse("POST"),
    # A move URL under an unknown or deleted tenant is 404 or 410 before 405.
    MOVE: _move,
}


def dispatch(admin: TenantAdmin, environ: dict, start_response: Callable, target: Target, action: str):
    """Answer the admin call *action* on *target* with its handler (``405`` for another method)."""
    method = environ.get("REQUEST_METHOD", "GET")
    handler = HANDLERS.get((method, action)) or NOT_ALLOWED[action]
    return handler(admin, environ, start_response, target)
