"""The tenant-state check: is the tenant a request names active?  Answered from a per-worker cache.

An unknown (or purged) tenant is answered ``404``, a deleted one ``410``;
the registry failing is ``503`` with ``Retry-After``.  With
``state_memcached_servers``, each check first asks memcached for the
tenant's generation (:mod:`tenancy_mw.tenants.shared_state`); memcached
failing is ``503`` too (:class:`StateStoreDown`), or with ``on_state_store_error
= fail_open`` the worker's cache answers alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import shorten
from tenancy_mw.core.sql import error_summary, sa
from tenancy_mw.tenants.admin.answers import RegistryDown
from tenancy_mw.tenants.registry import DELETED, TenantRegistry, TenantStateCache
from tenancy_mw.tenants.shared_state import MemcachedError, SharedTenantStates

__all__ = ["StateCache", "StateStoreDown", "state_error", "state_generation", "state_loader"]

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
        With a ``generation`` (shared states) nothing kept is known fresh
        without asking: always ``None``.
        """
        if self.generation is not None:
            return None
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


class StateStoreDown(Refusal):
    """The memcached server of a tenant's generation could not answer: ``503``, try again in 1 second."""

    def __init__(self) -> None:
        super().__init__(
            503,
            "tenancy.state-store-unavailable",
            "The tenant's state cannot be checked right now; try again later.",
            (("Retry-After", "1"),),
        )


#: Seconds between two log lines about memcached failing on the request path.
LOG_INTERVAL = 10.0


def state_generation(shared: SharedTenantStates, fail_open: bool = False) -> Callable[[str], object]:
    """The cache's ``generation``: *shared*'s generation of a tenant; memcached failing is :class:`StateStoreDown`.

    With *fail_open*, a failure gives instead ``None``, the generation of a
    cache without memcached: a state is read from the registry again once,
    then kept ``cache_ttl`` seconds as without memcached.  Failures
    are logged, at most once every :data:`LOG_INTERVAL` seconds per process.
    """
    logged = [float("-inf"), 0]  # when the last line was logged; failures since

    def generation(tenant_id: str) -> object:
        try:
            return shared.generation(tenant_id)
        except MemcachedError as exc:
            logged[1] += 1
            now = time.monotonic()
            if now - logged[0] >= LOG_INTERVAL:
                LOG.error(
                    "tenant_admin: tenant states cannot be checked in memcached (%s; %d failure(s) since the last "
                    "message); on_state_store_error = %s",
                    exc,
                    logged[1],
                    "fail_open: checking with this worker's cache alone" if fail_open else "fail_closed: answering 503",
                )
                logged[:] = [now, 0]
            if fail_open:
                # No generation: the worker's entries of no generation are
                # current, those of a real one are not (read again, once).
                return None
            raise StateStoreDown() from None

    return generation


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
