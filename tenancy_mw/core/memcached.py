"""The one memcached client of the library: a cluster of servers, meta commands, timeouts.

The idempotency filter's ``memcached`` store
(:class:`tenancy_mw.idempotency.stores.MemcachedStore`) and ``tenant_admin``'s
shared tenant states (:mod:`tenancy_mw.tenants.shared_state`) both talk to
memcached through :class:`MemcachedCluster`:

- **Servers.**  Keys are spread over the servers with pymemcache's
  ``HashClient`` (rendezvous hashing), each with a connection pool and
  connect and read timeouts.  A key always belongs to the same server: when
  that server is down, calls for its keys raise :class:`MemcachedError`;
  they are never moved to another server (pymemcache's own failover, which
  drops a dead server from the ring and so moves its keys, is not used).
- **Calls.**  :meth:`MemcachedCluster.call` sends one or several pipelined
  meta commands (memcached 1.6 and later) to the server of a key and reads
  their replies: one network round trip.  Every failure (refused, timed
  out, closed, an answer that is not the meta protocol's) is a
  :class:`MemcachedError`; a caller never sees a pymemcache or socket error.

Example::

    cluster = MemcachedCluster(["10.0.0.5:11211", "10.0.0.6:11211"], timeout=0.5)
    ((code, flags, value),) = cluster.call("k", b"mg k v\\r\\n", 1)   # b"VA" and the value, or b"EN"
"""

from __future__ import annotations

import re

from pymemcache.client.hash import HashClient
from pymemcache.exceptions import MemcacheError

__all__ = ["ConnectionLost", "MemcachedCluster", "MemcachedError", "ValueTooLarge", "exchange", "parse_server"]


class MemcachedError(Exception):
    """memcached could not answer: down, timed out, or refused the call."""


class ValueTooLarge(MemcachedError):
    """The value is larger than memcached holds (its ``-I`` item size)."""


class ConnectionLost(MemcachedError):
    """The connection was closed by the server before any byte of a reply came (it restarted, or dropped it)."""


_HEADER = re.compile(rb"(HD|NS|EX|NF|EN|VA)(?: ([0-9]+))?((?: [A-Za-z][^ ]*)*)")
_RECV_SIZE = 8 * 1024


def exchange(client, command: bytes, replies: int) -> list[tuple[bytes, dict, bytes | None]]:
    """Send *command* (one or several pipelined meta commands) on a pymemcache client; read *replies* replies.

    Each reply is ``(code, flags, value)``: ``code`` such as ``b"HD"``,
    ``flags`` such as ``{b"c": b"12"}``, ``value`` the data block of a
    ``VA`` reply (read by its length, so any bytes may be in it) or
    ``None``.  pymemcache connects the socket (with its timeouts, keepalive
    and TLS settings); the reading is done here because pymemcache 4.0's
    ``raw_command`` loses the bytes of replies longer than one read.
    """
    if client.sock is None:
        client._connect()
    sock = client.sock
    try:
        sock.sendall(command)
    except (BrokenPipeError, ConnectionResetError):
        raise ConnectionLost("memcached closed the connection") from None
    buffer = bytearray()
    position = 0

    def fill() -> None:
        try:
            data = sock.recv(_RECV_SIZE)
        except ConnectionResetError:
            data = b""
        if not data:
            raise (MemcachedError if buffer else ConnectionLost)("memcached closed the connection")
        buffer.extend(data)

    results: list = []
    while len(results) < replies:
        end = buffer.find(b"\r\n", position)
        while end < 0:
            fill()
            end = buffer.find(b"\r\n", position)
        line = bytes(buffer[position:end])
        position = end + 2
        if line.startswith(b"SERVER_ERROR") and b"too large" in line:
            raise ValueTooLarge("memcached: %s" % line.decode("ascii", "replace"))
        match = _HEADER.fullmatch(line)
        if match is None:
            raise MemcachedError("memcached answered %r" % line[:80])
        flags = {item[:1]: item[1:] for item in match.group(3).split()}
        value = None
        if match.group(1) == b"VA":
            size = int(match.group(2) or 0)
            while len(buffer) < position + size + 2:
                fill()
            value = bytes(buffer[position : position + size])
            if buffer[position + size : position + size + 2] != b"\r\n":
                raise MemcachedError("memcached sent a value block that does not match its length")
            position += size + 2
        results.append((match.group(1), flags, value))
    if position != len(buffer):
        raise MemcachedError("memcached sent more than was asked for")
    return results


def parse_server(spec: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:11211"`` too) as ``(host, port)``; :class:`ValueError` if it is not one.

    >>> parse_server("10.0.0.5:11211")
    ('10.0.0.5', 11211)
    """
    host, sep, port = spec.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("%r is not host:port" % spec)
    return host.strip("[]"), int(port)


class MemcachedCluster:
    """memcached servers as one, keys spread by rendezvous hashing (see the module documentation).

    :param servers: ``["host:port", ...]``; :class:`ValueError` when empty
        or one is not ``host:port``.
    :param timeout: connect and read timeout of every call, seconds.
    :param max_pool_size: most connections per server (``None``: as many
        as threads ask for).

    ``round_trips`` counts the calls sent so far (for ``make bench``).
    """

    def __init__(self, servers: list[str], timeout: float = 2.0, max_pool_size: int | None = None) -> None:
        if not servers:
            raise ValueError("no memcached server given")
        self.servers = [parse_server(spec) for spec in servers]
        self.round_trips = 0
        # HashClient builds one pooled client per server and the rendezvous
        # ring.  Its own failover (dropping a dead server from the ring,
        # which moves its keys) is not used: calls go to the key's server.
        self._hash_client = HashClient(
            self.servers,
            use_pooling=True,
            max_pool_size=max_pool_size,
            connect_timeout=timeout,
            timeout=timeout,
            ignore_exc=False,
            default_noreply=False,
            no_delay=True,
        )

    def server_of(self, key: str) -> str:
        """The ``host:port`` that holds *key*."""
        return self._hash_client.hasher.get_node(key)

    def call(self, key: str, command: bytes, replies: int) -> list[tuple[bytes, dict, bytes | None]]:
        """Send *command* to the server of *key* and read *replies* replies (:func:`exchange`): one round trip.

        Every command in *command* must be for keys of that same server.
        Raises :class:`MemcachedError` (or :class:`ValueTooLarge`) when the
        server cannot answer.  A pooled connection found closed before any
        reply came, as one opened before the server restarted, is dropped
        and the call sent again (what a restarted server had read, it has
        forgotten with everything else): on the next pooled connection, which
        the restart may have closed too (a threaded worker keeps several),
        until a new one is opened.
        """
        server = self.server_of(key)
        pool = self._hash_client.clients[server].client_pool
        # Every free pooled connection may be one a restart closed; each
        # found closed is destroyed, so the last try opens a new one.
        for _ in range(len(pool.free)):
            try:
                return self._send(server, command, replies)
            except ConnectionLost:
                continue
        try:
            return self._send(server, command, replies)
        except ConnectionLost as exc:  # a connection another thread released meanwhile
            raise MemcachedError("memcached %s: %s" % (server, exc)) from None

    def _send(self, server: str, command: bytes, replies: int) -> list[tuple[bytes, dict, bytes | None]]:
        """One attempt of :meth:`call`; :class:`ConnectionLost` only when the connection was a pooled one."""
        pooled = self._hash_client.clients[server]
        self.round_trips += 1
        reused = False
        try:
            # destroy_on_fail: a connection whose replies were not all read
            # is closed, never handed to the next request.
            with pooled.client_pool.get_and_release(destroy_on_fail=True) as client:
                reused = client.sock is not None
                return exchange(client, command, replies)
        except ConnectionLost as exc:
            if reused:
                raise
            raise MemcachedError("memcached %s: %s" % (server, exc)) from None
        except MemcachedError:
            raise
        except (OSError, MemcacheError) as exc:
            raise MemcachedError("memcached %s: %s" % (server, exc or type(exc).__name__)) from None
        except Exception as exc:  # noqa: BLE001 - a pool or client failure must be a memcached error, never a 500
            raise MemcachedError("memcached %s: %s: %s" % (server, type(exc).__name__, exc)) from None

    def close(self) -> None:
        """Close every pooled connection."""
        self._hash_client.close()
