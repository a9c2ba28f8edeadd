"""The tenant-state check: is the tenant a request names active?  Answered from a per-worker cache.

An unknown (or purged) tenant is answered ``404``, a deleted one ``410``;
the registry failing is ``503`` with ``Retry-After``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tenancy_mw.core.paths import shorten
from tenancy_mw.core.sql import error_summary, sa
from tenancy_mw.tenants.admin.answers import RegistryDown
from tenancy_mw.tenants.registry import DELETED, TenantRegistry, TenantStateCache

__all__ = ["StateCache", "state_error", "state_loader"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")


class StateCache(TenantStateCache):
    """A :class:`~tenancy_mw.tenants.registry.TenantStateCache` that also tells what it keeps, without loading.

    Example::

        >>> cache = StateCache(lambda tenant_id: "active", ttl=5)
        >>> cache.fresh("acme") is None
        True
        >>> cache.state("acme"), cache.fresh("acme")
        ('active', 'active')
    """

    def fresh(self, tenant_id: str) -> str | None:
        """The state kept for *tenant_id* while still fresh, else ``None``; never loads.

        The public endpoint's hot path: a dict look-up and a clock read.
        """
        entry = self.entries.get(tenant_id)
        if entry is not None and entry[1] > time.monotonic():
            return entry[0]
        return None


def state_loader(registry: TenantRegistry) -> Callable[[str], str]:
    """The cache's loader: *registry*'s state of a tenant; a database failure is :class:`RegistryDown` (logged)."""

    def load_state(tenant_id: str) -> str:
        try:
            return registry.state(tenant_id)
        except sa.exc.SQLAlchemyError as exc:
            LOG.error("tenant_admin: the tenant registry is unavailable: %s", error_summary(exc))
            raise RegistryDown() from None

    return load_state


def state_error(error: Callable, environ: dict, start_response: Callable, tenant_id: str, state: str):
    """Answer a request under a tenant that is not active: ``410`` deleted, else ``404``.

    *error* is the filter's error renderer (``TenancyMiddleware.error``).
    """
    if state == DELETED:
        return error(
            environ,
            start_response,
            410,
            "tenancy.tenant-deleted",
            "Tenant %r is deleted; nothing under it can be used." % shorten(tenant_id),
        )
    return error(
        environ, start_response, 404, "tenancy.tenant-not-found", "Tenant %r does not exist." % shorten(tenant_id)
    )
