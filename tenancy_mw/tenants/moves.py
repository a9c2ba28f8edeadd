"""The interface a service implements so ``tenant_admin`` can move its resources.

The tenants spec's moves (``POST .../path/to/resource/action/move?dest=T``
and ``POST /{version}/{tenantId}/action/move?dest=T``) need to know the
service's resources; everything else (routing, ``dest`` checks, the move
action document and its ``ETag``, ``If-Match``, the lock that makes a
conditional move atomic, the ``301`` redirects of moved resources) is the
filter's.  A service opts in by writing one :class:`MoveProvider` subclass
and naming it in the filter's ``move_provider`` option::

    [filter:tenant_admin]
    use = egg:tenancy_mw#tenant_admin
    connection = postgresql+psycopg2://svc@db/svc
    move_provider = mysvc.moves:WidgetMoves

The option names a callable (``package.module:Name`` or
``package.module.Name``), usually the class itself.  It is called once,
when the pipeline loads, with the WSGI application ``tenant_admin`` wraps
as its only argument, and returns the provider.  Paths are tuples of
decoded path segments below the tenant segment: for
``/v1.0/acme/widgets/42`` the tenant is ``"acme"`` and the path
``("widgets", "42")``.

A complete provider, for a service that keeps widgets in a dict (a real
one would use its database; see ``examples/demo_compute/moves.py`` for
one on SQLAlchemy)::

    from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, state_tag

    class WidgetMoves(MoveProvider):
        def __init__(self, application):
            self.widgets = application.widgets          # {(tenant, id): {"name": ..., "version": n}}

        def resource_state(self, tenant_id, path):
            if len(path) != 2 or path[0] != "widgets":
                return None                              # not a movable resource: 404
            widget = self.widgets.get((tenant_id, path[1]))
            if widget is None:
                return None                              # 404
            return ResourceState(path, {"name": widget["name"]}, tag=str(widget["version"]),
                                 deleted=widget.get("deleted", False))   # deleted: 410

        def tenant_resources(self, tenant_id, list_limit):
            mine = sorted(k[1] for k in self.widgets if k[0] == tenant_id)
            states = [self.resource_state(tenant_id, ("widgets", i)) for i in mine]
            return TenantResources(
                count=len(states),
                tag=state_tag([s.tag for s in states]),
                resources=states if len(states) <= list_limit else None,
            )

        def move_resource(self, tenant_id, path, dest_tenant_id):
            widget = self.widgets.pop((tenant_id, path[1]), None)
            if widget is None:
                raise MoveRefused(404, "No widget %r." % path[1])
            self.widgets[(dest_tenant_id, path[1])] = widget
            return path                                  # same path, new tenant

        def move_tenant(self, tenant_id, dest_tenant_id):
            moved = []
            for key in [k for k in self.widgets if k[0] == tenant_id]:
                self.widgets[(dest_tenant_id, key[1])] = self.widgets.pop(key)
                moved.append((("widgets", key[1]), ("widgets", key[1])))
            return moved

Rules a provider follows:

- ``resource_state`` and ``tenant_resources`` read the state *now*
  (no cache): the filter calls them again, under the move lock, to check a
  conditional move's ``If-Match``.
- A state ``tag`` changes whenever the resource changes in a way that
  matters to a move (its version, its updated time, a hash of its row).
- ``tenant_resources`` is asked about the destination tenant too, with
  ``list_limit = 0``: its count and tag go into every move action
  document, so a conditional move fails when the destination changed.
- ``move_resource`` and ``move_tenant`` are called with the registry's
  move lock held for both tenants, after the filter checked that both are
  active, that the resource exists and is not deleted, and (for a
  conditional move) that nothing changed.  Each should move atomically in
  the service's own database (one transaction), and must not use the
  registry's SQLite file if the registry is on SQLite (that file's write
  lock is held).
- To refuse a move (quota, a resource in an unmovable state), raise
  :class:`MoveRefused` with a ``4xx`` status and a sentence naming why.

The same object may also remove a deleted tenant's resources: a provider
that subclasses :class:`~tenancy_mw.tenants.removal.TenantRemoval` too
(``class WidgetMoves(MoveProvider, TenantRemoval)``) is called on
``DELETE``, restore and purge of a tenant (see that module).
"""

from __future__ import annotations

import abc
import hashlib
import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenancy_mw.tenants.removal import TenantRemoval

__all__ = ["MoveProvider", "MoveRefused", "ResourceState", "TenantResources", "load_provider", "state_tag"]


@dataclass(frozen=True)
class ResourceState:
    """The state of one resource, as a move action document shows it.

    :ivar path: the resource's path below the tenant segment.
    :ivar state: JSON-ready facts an operator checks before moving it
        (name, status, size, ...).
    :ivar tag: an opaque string that changes whenever the resource does;
        ``""`` lets the filter derive one from *state*.
    :ivar deleted: the resource is deleted but still known (the move answers ``410``).
    """

    path: tuple[str, ...]
    state: dict = field(default_factory=dict)
    tag: str = ""
    deleted: bool = False

    def document(self) -> dict:
        """The resource in a move action document."""
        return {
            "path": "/".join(self.path),
            "state": self.state,
            "tag": self.tag or state_tag([self.state]),
            "deleted": self.deleted,
        }


@dataclass(frozen=True)
class TenantResources:
    """The state of all of a tenant's resources.

    :ivar count: how many resources the tenant has.
    :ivar tag: one opaque string that changes whenever any of them changes
        (one is added, removed or modified): the spec's state tag for large
        tenants.
    :ivar resources: the resources, when there are at most ``list_limit``
        of them; ``None`` otherwise (the document then carries only the tag).
    :ivar metadata: JSON-ready facts common to all of them (total size, ...).
    """

    count: int
    tag: str
    resources: list[ResourceState] | None = None
    metadata: dict = field(default_factory=dict)


class MoveRefused(Exception):
    """The provider refuses a move: answered with *status* (a ``4xx``) and *detail*."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class MoveProvider(abc.ABC):
    """What ``tenant_admin`` needs from a service to move its resources (see the module documentation)."""

    @abc.abstractmethod
    def resource_state(self, tenant_id: str, path: tuple[str, ...]) -> ResourceState | None:
        """The state of the resource at *path* of *tenant_id*, or ``None`` if there is none."""

    @abc.abstractmethod
    def tenant_resources(self, tenant_id: str, list_limit: int) -> TenantResources:
        """The state of all resources of *tenant_id*; list them only up to *list_limit*."""

    @abc.abstractmethod
    def move_resource(self, tenant_id: str, path: tuple[str, ...], dest_tenant_id: str) -> tuple[str, ...]:
        """Move the resource at *path* of *tenant_id* to *dest_tenant_id*; return its path there."""

    @abc.abstractmethod
    def move_tenant(self, tenant_id: str, dest_tenant_id: str) -> Iterable[tuple[tuple[str, ...], tuple[str, ...]]]:
        """Move every resource of *tenant_id* to *dest_tenant_id*; return ``(old_path, new_path)`` pairs.

        The pairs are recorded so requests to the old paths are redirected.
        The source tenant itself stays (the spec: it MUST NOT be deleted).
        """


def state_tag(parts: Iterable[object]) -> str:
    """An opaque tag of *parts* (strings or JSON-ready values): a SHA-256 hex digest.

    Example::

        >>> state_tag(["a", "b"]) == state_tag(["a", "b"]) != state_tag(["b", "a"])
        True
    """
    digest = hashlib.sha256()
    for part in parts:
        text = part if isinstance(part, str) else json.dumps(part, sort_keys=True, default=str)
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def load_provider(dotted: str, application: Callable) -> MoveProvider | TenantRemoval:
    """Import *dotted* (``pkg.mod:Name`` or ``pkg.mod.Name``), call it with *application*, check the result.

    The result is a :class:`MoveProvider`, a
    :class:`~tenancy_mw.tenants.removal.TenantRemoval`, or both.  Raises
    :class:`ValueError` naming what is wrong.
    """
    if ":" in dotted:
        module_name, _, attribute = dotted.partition(":")
    else:
        module_name, _, attribute = dotted.rpartition(".")
    if not module_name or not attribute:
        raise ValueError("%r is not a dotted path such as 'package.module:ClassName'" % dotted)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError("cannot import %r: %s" % (module_name, exc)) from None
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise ValueError("module %r has no %r" % (module_name, attribute)) from None
    try:
        provider = target(application)
    except Exception as exc:
        raise ValueError("calling %r with the application failed: %s: %s" % (dotted, type(exc).__name__, exc)) from None
    if not isinstance(provider, (MoveProvider, TenantRemoval)):
        raise ValueError(
            "%r returned %r, which is not a tenancy_mw.tenants.moves.MoveProvider or a "
            "tenancy_mw.tenants.removal.TenantRemoval" % (dotted, type(provider).__name__)
        )
    return provider
