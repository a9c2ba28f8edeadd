"""Tenant states shared through memcached: a change is seen by every worker and host on its next request.

``tenant_admin`` keeps tenant states in a per-worker cache
(:class:`~tenancy_mw.tenants.registry.TenantStateCache`), so a tenant
deleted through one worker is seen by the others only once their entry
expires (``cache_ttl``).  With ``state_memcached_servers`` set, memcached
holds one small item per tenant, its *generation*: a random token that
every registry write changing the tenant's state replaces, after its
commit.  Each worker keeps the generation it read with each state, and
checks it on every request (one ``mg``, one round trip): a different
token means the tenant changed, and the state is read from the registry
again.  So a delete is seen everywhere on the very next request.

Why it holds:

- the generation is read *before* the registry, and written *after* the
  registry's commit: a worker that kept a state read before a commit also
  kept a token older than the one written after it;
- a missing item (never written, expired, evicted, memcached restarted
  empty) is never taken for "unchanged": the worker adds a fresh random
  token (``ms`` in add mode, pipelined with an ``mg``, so whoever adds
  first wins and everybody reads the same one) and reads the registry;
- tokens are random, never counters: one lost with a restart is never
  issued again;
- a key's server being down is an error (:class:`MemcachedError`), never
  "unchanged"; the filter then answers ``503`` (``on_state_store_error``).

What it does not cover: a write whose generation cannot be written (memcached
unreachable from the writer only) is logged; workers that still read the
old token see the change when their entry expires, within ``cache_ttl``,
as without memcached.

The client is the library's one (:class:`~tenancy_mw.core.memcached.MemcachedCluster`:
servers, rendezvous hashing, pools, timeouts), shared with the idempotency
filter's ``memcached`` store.

Example::

    shared = SharedTenantStates(["10.0.0.5:11211", "10.0.0.6:11211"], timeout=0.5)
    before = shared.generation("acme")       # one round trip
    shared.changed(["acme"])                 # after a commit that changed acme's state
    assert shared.generation("acme") != before
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable

from tenancy_mw.core.memcached import MemcachedCluster, MemcachedError

__all__ = ["GENERATION_TTL", "KEY_PREFIX", "MemcachedError", "SharedTenantStates"]

# The logger keeps the filter's 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")

#: The memcached keys of generations: this, then the SHA-256 of the tenant id (any id fits a key).
KEY_PREFIX = "tenancy-state:"
#: Seconds a generation is kept; one expired is replaced at the next request (and the state read again).
#: An hour: a flood of made-up tenant ids leaves its small items for that long at most.
GENERATION_TTL = 3600
# How many commands one pipelined write sends at most (a purge of thousands).
_BATCH = 100


def _token() -> bytes:
    return os.urandom(12).hex().encode("ascii")


class SharedTenantStates:
    """Tenants' generations in memcached (see the module documentation).

    :param servers: ``["host:port", ...]``, as ``state_memcached_servers``.
    :param timeout: connect and read timeout of every call, seconds.
    """

    def __init__(self, servers: list[str], timeout: float = 1.0) -> None:
        self.cluster = MemcachedCluster(servers, timeout=timeout)

    @property
    def round_trips(self) -> int:
        """Calls sent to memcached so far."""
        return self.cluster.round_trips

    @staticmethod
    def key(tenant_id: str) -> str:
        """The memcached key of *tenant_id*'s generation."""
        return KEY_PREFIX + hashlib.sha256(tenant_id.encode("utf-8", "surrogatepass")).hexdigest()

    def generation(self, tenant_id: str) -> bytes:
        """*tenant_id*'s current generation: one round trip (two when it is missing and is added).

        Raises :class:`MemcachedError` when its server cannot answer.
        """
        key = self.key(tenant_id)
        ((code, _, value),) = self.cluster.call(key, b"mg %s v\r\n" % key.encode("ascii"), 1)
        if code == b"VA" and value is not None:
            return value
        if code != b"EN":
            raise MemcachedError("memcached answered %r to a get" % code)
        return self._add(key)

    def _add(self, key: str) -> bytes:
        """Add a fresh generation where none is (``ms`` in add mode) and read back the one that won."""
        name = key.encode("ascii")
        token = _token()
        command = b"ms %s %d T%d ME\r\n%s\r\nmg %s v\r\n" % (name, len(token), GENERATION_TTL, token, name)
        for _attempt in range(3):
            (stored, _, _), (found, _, value) = self.cluster.call(key, command, 2)
            if stored not in (b"HD", b"NS"):
                raise MemcachedError("memcached answered %r to an add" % stored)
            if found == b"VA" and value is not None:
                return value
            # EN: evicted between the two commands; add again.
        raise MemcachedError("memcached: the generation kept vanishing while being added")

    def changed(self, tenant_ids: Iterable[str]) -> None:
        """Give each of *tenant_ids* a new generation: call it after the commit that changed their states.

        One pipelined round trip per server (per 100 tenants).  Raises
        :class:`MemcachedError` when a server cannot take them.
        """
        by_server: dict[str, list[str]] = {}
        for tenant_id in set(tenant_ids):
            key = self.key(tenant_id)
            by_server.setdefault(self.cluster.server_of(key), []).append(key)
        for keys in by_server.values():
            for start in range(0, len(keys), _BATCH):
                batch = keys[start : start + _BATCH]
                command = b"".join(
                    b"ms %s %d T%d\r\n%s\r\n" % (key.encode("ascii"), len(token), GENERATION_TTL, token)
                    for key, token in ((key, _token()) for key in batch)
                )
                replies = self.cluster.call(batch[0], command, len(batch))
                if any(code != b"HD" for code, _, _ in replies):
                    raise MemcachedError("memcached did not store every generation: %r" % [r[0] for r in replies])

    def announce(self, tenant_ids: Iterable[str]) -> bool:
        """:meth:`changed`, logged instead of raised when memcached cannot take it: a registry's ``on_change``.

        Returns whether every generation was written.  The change is made
        (it is in the registry); workers that cannot be told see it within
        their ``cache_ttl``.
        """
        ids = sorted(set(tenant_ids))
        try:
            self.changed(ids)
        except MemcachedError as exc:
            LOG.error(
                "tenant_admin: the state change of tenant(s) %s is in the registry, but could not be shared "
                "through memcached (%s); other workers see it when their cache entry expires (cache_ttl), or at once "
                "once the same call is made again (a DELETE of the deleted tenant announces it again)",
                ", ".join(repr(t) for t in ids[:10]) + (" and %d more" % (len(ids) - 10) if len(ids) > 10 else ""),
                exc,
            )
            return False
        return True

    def close(self) -> None:
        """Close every pooled connection."""
        self.cluster.close()
