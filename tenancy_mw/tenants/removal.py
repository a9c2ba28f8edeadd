"""The interface a service implements so a removed tenant's resources go with it.

The tenants spec: a tenant's resources "SHOULD be deleted after a tenant
has been removed", and "SHOULD remain recoverable and in a deleted state
for a period of time before they are actually removed".  The registry
(:mod:`tenancy_mw.tenants.registry`) knows the tenant; only the service
knows its resources.  A service tells the library how to reach them with
one :class:`TenantRemoval`, three methods, each called at one step of the
tenant's life:

- ``DELETE /{v}/{t}``: ``tenant_admin`` calls
  :meth:`~TenantRemoval.hide_resources` with the tenant's registry row
  locked, before the delete commits: the resources are soft-deleted, kept
  but neither listed nor served;
- ``POST /{v}/{t}/action/restore``: ``tenant_admin`` calls
  :meth:`~TenantRemoval.restore_resources` the same way: they are back;
- ``tenancy-mw-manage tenants purge``: once the tenant is marked purging
  and before its registry row goes, the purge calls
  :meth:`~TenantRemoval.purge_resources`: they are deleted for good.

The provider is the object ``tenant_admin``'s ``move_provider`` option
names: a :class:`~tenancy_mw.tenants.moves.MoveProvider` that also
subclasses :class:`TenantRemoval` (``class ServerMoves(MoveProvider,
TenantRemoval)``), or a :class:`TenantRemoval` alone for a service with no
moves.  The purge command loads it from the same pipeline
(``tenancy-mw-manage tenants purge --paste api-paste.ini#admin``).

**Decision: a separate interface, not new methods with a default on
MoveProvider.**  A default could only do nothing, and doing nothing is
the defect this interface is for: the registry would forget a tenant
whose resources stay, and the next holder of the id would see them.  As
its own interface, the library can tell a provider that removes from one
that does not: ``tenant_admin`` logs a warning at load, and the purge
command refuses to forget tenants unless it reaches the service's
removal or is told the service removes them itself (``--registry-only``).
Existing providers keep working unchanged, and a service without moves
can implement removal alone.

Rules a provider follows:

- Every method is idempotent: it may be called again for a tenant it
  already handled (a retried ``DELETE``, a purge run again after it was
  stopped), and then changes nothing.
- :meth:`~TenantRemoval.hide_resources` and
  :meth:`~TenantRemoval.restore_resources` run inside the registry's
  transaction that holds the tenant's row (``SELECT ... FOR UPDATE``;
  ``BEGIN IMMEDIATE`` on SQLite), as a move does: a restore never
  interleaves with a purge or another delete.  Each should change the
  service's database in one transaction, and must not write to the
  registry's SQLite file if the registry is on SQLite.  If one raises, the
  registry's change is rolled back: the call is answered ``503``
  (``tenancy.removal-failed``) and the tenant stays as it was.
- :meth:`~TenantRemoval.purge_resources` deletes every resource of the
  tenant, hidden or not (one made in the few seconds other workers took to
  see the delete, say), and everything kept beside them (tags, tombstones,
  usage of that tenant id).  It runs with no registry lock held and may
  take long.  If it raises, the tenant stays marked purging and the next
  purge run tries again.

A complete provider, for a service that keeps widgets in a dict (see
``examples/demo_compute/moves.py`` for one on SQLAlchemy)::

    >>> class WidgetRemoval(TenantRemoval):
    ...     def __init__(self, application):
    ...         self.widgets = application.widgets      # {(tenant, id): {"name": ..., "hidden": bool}}
    ...     def _mine(self, tenant_id):
    ...         return [w for (t, _), w in self.widgets.items() if t == tenant_id]
    ...     def hide_resources(self, tenant_id):
    ...         for widget in self._mine(tenant_id):
    ...             widget["hidden"] = True             # the service lists and shows only unhidden ones
    ...     def restore_resources(self, tenant_id):
    ...         for widget in self._mine(tenant_id):
    ...             widget["hidden"] = False
    ...     def purge_resources(self, tenant_id):
    ...         for key in [k for k in self.widgets if k[0] == tenant_id]:
    ...             del self.widgets[key]
    >>> class Service:
    ...     widgets = {("acme", "1"): {"name": "w1", "hidden": False}}
    >>> removal = WidgetRemoval(Service())
    >>> removal.hide_resources("acme"); removal.widgets[("acme", "1")]["hidden"]
    True
    >>> removal.purge_resources("acme"); removal.purge_resources("acme"); removal.widgets
    {}
"""

from __future__ import annotations

import abc

__all__ = ["RemovalFailed", "TenantRemoval", "call_removal"]


class TenantRemoval(abc.ABC):
    """What the library needs from a service to remove a tenant's resources (see the module documentation)."""

    @abc.abstractmethod
    def hide_resources(self, tenant_id: str) -> None:
        """Soft-delete every resource of *tenant_id*: kept, recoverable, but neither listed nor served."""

    @abc.abstractmethod
    def restore_resources(self, tenant_id: str) -> None:
        """Bring back every resource :meth:`hide_resources` hid for *tenant_id*."""

    @abc.abstractmethod
    def purge_resources(self, tenant_id: str) -> None:
        """Delete every resource of *tenant_id* for good, hidden or not, and what is kept beside them."""


class RemovalFailed(Exception):
    """The service's :class:`TenantRemoval` raised at *step* for *tenant_id*; the cause is ``__cause__``.

    :ivar step: ``"hide"``, ``"restore"`` or ``"purge"``.
    """

    def __init__(self, tenant_id: str, step: str, cause: BaseException) -> None:
        super().__init__(
            "the service's removal failed to %s the resources of tenant %r: %s: %s"
            % (step, tenant_id, type(cause).__name__, cause)
        )
        self.tenant_id = tenant_id
        self.step = step


def call_removal(removal: TenantRemoval | None, step: str, tenant_id: str) -> None:
    """Run *removal*'s method of *step* (``hide``, ``restore``, ``purge``) for *tenant_id*; nothing without one.

    Whatever it raises comes out as :class:`RemovalFailed`, so a caller
    tells the service's failure from the registry's.
    """
    if removal is None:
        return
    method = {"hide": removal.hide_resources, "restore": removal.restore_resources, "purge": removal.purge_resources}
    try:
        method[step](tenant_id)
    except Exception as exc:
        raise RemovalFailed(tenant_id, step, exc) from exc
