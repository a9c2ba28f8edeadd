"""Where tokens are claimed and responses kept: the ``memory`` and ``memcached`` stores.

Every store has the same five calls, on opaque values (the signed JSON of
:mod:`tenancy_mw.idempotency.records`) under hashed keys:

``claim(key, value, lease_ttl)``
    Atomically take *key* if nobody holds it, storing *value* (the lease)
    for *lease_ttl* seconds.  Returns a :class:`Claim`: either ``claimed``
    with a *handle* (proof of ownership for the two calls below), or the
    value someone else stored.
``complete(key, handle, value, expiration)``
    Replace the lease by the finished record, for *expiration* seconds,
    only if *handle* still owns it (compare-and-swap).  ``False`` when a
    newer owner took the key (the lease expired): nothing is written.
``release(key, handle)``
    Delete the lease, only if *handle* still owns it.
``read(key)``
    The current value, or ``None``.
``round_trips``
    How many calls went to the store server so far (for ``make bench``).

A store that cannot answer (down, slow, refusing) raises
:class:`StoreError`; it never guesses "taken" or "free".  A value the
store cannot hold raises :class:`ValueTooLarge`.

The ``sql`` store is in :mod:`tenancy_mw.idempotency.sql_store`.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from tenancy_mw.core import memcached

__all__ = [
    "Claim",
    "MAX_RELATIVE_EXPIRY",
    "MemcachedStore",
    "MemoryStore",
    "StoreError",
    "ValueTooLarge",
    "memcached_expiry",
]


class StoreError(Exception):
    """The store could not answer: down, timed out, or refused the call."""


class ValueTooLarge(StoreError):
    """The value is larger than the store holds."""


@dataclass(frozen=True)
class Claim:
    """The answer to :meth:`claim`: ``claimed`` with a ``handle``, or the ``value`` already stored."""

    claimed: bool
    handle: object = None
    value: bytes | None = None


# --- memory -----------------------------------------------------------------


class MemoryStore:
    """Tokens in this process's memory: for tests and development only.

    Every worker process has its own store, so a retry that lands on
    another worker is not recognised and runs again: never use it behind
    a server with several processes (the filter logs an error when the
    server says it runs several).  Thread-safe.

    Example::

        >>> store = MemoryStore()
        >>> claim = store.claim("k", b"lease", 60)
        >>> claim.claimed, store.claim("k", b"other", 60).value
        (True, b'lease')
        >>> store.complete("k", claim.handle, b"done", 3600), store.read("k")
        (True, b'done')
    """

    name = "memory"

    def __init__(self, clock=time.time) -> None:
        self._items: dict[str, tuple[object, float, bytes]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._calls = 0
        self._next_sweep = 0.0
        self.round_trips = 0

    def _live(self, key: str):
        item = self._items.get(key)
        if item is not None and item[1] <= self._clock():
            del self._items[key]
            return None
        return item

    def _sweep(self) -> None:
        # Drop expired items now and then (at most once a second), so the
        # dict does not grow forever and a sweep's cost stays spread out.
        self._calls += 1
        if self._calls % 1024 == 0:
            now = self._clock()
            if now >= self._next_sweep:
                self._next_sweep = now + 1.0
                for key in [key for key, item in self._items.items() if item[1] <= now]:
                    del self._items[key]

    def claim(self, key: str, value: bytes, lease_ttl: int) -> Claim:
        with self._lock:
            self.round_trips += 1
            self._sweep()
            item = self._live(key)
            if item is not None:
                return Claim(False, value=item[2])
            handle = uuid.uuid4().hex
            self._items[key] = (handle, self._clock() + lease_ttl, value)
            return Claim(True, handle=handle)

    def complete(self, key: str, handle: object, value: bytes, expiration: int) -> bool:
        with self._lock:
            self.round_trips += 1
            item = self._live(key)
            if item is None or item[0] != handle:
                return False
            self._items[key] = (handle, self._clock() + expiration, value)
            return True

    def release(self, key: str, handle: object) -> bool:
        with self._lock:
            self.round_trips += 1
            item = self._live(key)
            if item is None or item[0] != handle:
                return False
            del self._items[key]
            return True

    def read(self, key: str) -> bytes | None:
        with self._lock:
            self.round_trips += 1
            item = self._live(key)
            return None if item is None else item[2]

    def clear(self) -> None:
        """Forget every token (tests and benchmarks)."""
        with self._lock:
            self._items.clear()

    def close(self) -> None:
        """Nothing to close."""


# --- memcached --------------------------------------------------------------

#: memcached reads an expiry above 30 days as an absolute Unix time.
MAX_RELATIVE_EXPIRY = 30 * 24 * 3600


def memcached_expiry(seconds: int, now: float | None = None) -> int:
    """The memcached expiry field for *seconds* from now.

    memcached takes up to 30 days as a relative time and anything larger
    as an absolute Unix time, so longer expirations are sent as ``now +
    seconds``.

    Example::

        >>> memcached_expiry(3600)
        3600
        >>> memcached_expiry(31 * 86400, now=1_700_000_000)
        1702678400
    """
    if seconds <= MAX_RELATIVE_EXPIRY:
        return int(seconds)
    return int(now if now is not None else time.time()) + int(seconds)


class MemcachedStore:
    """Tokens in one memcached server or several (consistent hashing), via pymemcache.

    **Calls.**  memcached's meta protocol (memcached 1.6 and later), on
    pymemcache's pooled connections:

    - claim, one round trip: ``ms <key> ... ME c`` (*add*: store only if
      absent, with a reply, never ``noreply``; ``c`` returns the item's CAS
      value) pipelined with ``mg <key> v c`` (read what is there).  The CAS
      value of a claimed lease is the owner's handle.
    - complete, one round trip: ``ms <key> ... MS C<cas>``: compare-and-swap,
      written only while the lease is still the one this request claimed.
    - release: ``md <key> C<cas>``, the same compare-and-delete.

    So a first request costs two round trips and a replay one.

    **Servers.**  The library's one memcached client,
    :class:`tenancy_mw.core.memcached.MemcachedCluster`: keys are spread
    over the servers with pymemcache's ``HashClient`` (rendezvous hashing),
    each with a connection pool and connect and read timeouts.  A key always belongs to the same server:
    when that server is down, calls for its keys raise :class:`StoreError`
    (the filter answers ``503`` or runs unprotected, as ``on_store_error``
    says); they are never moved to another server, where the token would
    look free, and a down server never looks like "taken" or "free".

    **What a cluster does not promise.**  memcached keeps nothing on disk:
    a server that restarts comes back empty, and tokens it held are
    forgotten (a retry then runs again); an item can be evicted under
    memory pressure before it expires.  Where a token must survive that,
    use the ``sql`` store.

    :param servers: ``["host:port", ...]``.
    :param timeout: connect and read timeout of every call, seconds.
    :param max_pool_size: most connections per server (``None``: as many
        as threads ask for).
    """

    name = "memcached"

    def __init__(self, servers: list[str], timeout: float = 2.0, max_pool_size: int | None = None) -> None:
        # The library's one memcached client: servers, hashing, pools, timeouts.
        self._cluster = memcached.MemcachedCluster(servers, timeout=timeout, max_pool_size=max_pool_size)
        self.servers = self._cluster.servers

    @property
    def round_trips(self) -> int:
        """How many calls went to memcached so far."""
        return self._cluster.round_trips

    def server_of(self, key: str) -> str:
        """The ``host:port`` that holds *key*."""
        return self._cluster.server_of(key)

    def _call(self, key: str, command: bytes, replies: int) -> list:
        try:
            return self._cluster.call(key, command, replies)
        except memcached.ValueTooLarge as exc:
            raise ValueTooLarge(str(exc)) from None
        except memcached.MemcachedError as exc:
            raise StoreError(str(exc)) from None

    def claim(self, key: str, value: bytes, lease_ttl: int) -> Claim:
        name = key.encode("ascii")
        command = b"ms %s %d T%d ME c\r\n%s\r\nmg %s v c\r\n" % (
            name, len(value), memcached_expiry(lease_ttl), value, name)
        for _attempt in range(3):
            (stored, stored_flags, _), (found, _, found_value) = self._call(key, command, 2)
            if stored == b"HD":
                return Claim(True, handle=int(stored_flags[b"c"]))
            if stored != b"NS":
                raise StoreError("memcached answered %r to an add" % stored)
            if found == b"VA":
                return Claim(False, value=found_value)
            # EN: it expired between the two commands; claim again.
        raise StoreError("memcached: the key kept vanishing while being claimed")

    def complete(self, key: str, handle: object, value: bytes, expiration: int) -> bool:
        command = b"ms %s %d T%d MS C%d\r\n%s\r\n" % (
            key.encode("ascii"), len(value), memcached_expiry(expiration), int(handle), value)  # type: ignore[call-overload]
        return self._owned(self._call(key, command, 1))

    def release(self, key: str, handle: object) -> bool:
        return self._owned(self._call(key, b"md %s C%d\r\n" % (key.encode("ascii"), int(handle)), 1))  # type: ignore[call-overload]

    @staticmethod
    def _owned(replies: list) -> bool:
        code = replies[0][0]
        if code == b"HD":
            return True
        if code in (b"EX", b"NF", b"NS"):
            return False  # someone else's now, or gone
        raise StoreError("memcached answered %r to a compare-and-swap" % code)

    def read(self, key: str) -> bytes | None:
        ((code, _, value),) = self._call(key, b"mg %s v c\r\n" % key.encode("ascii"), 1)
        return value if code == b"VA" else None

    def close(self) -> None:
        """Close every pooled connection."""
        self._cluster.close()
