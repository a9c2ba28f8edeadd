"""The library's one memcached client (tenancy_mw.core.memcached) on real servers, and on sockets that misbehave."""

from __future__ import annotations

import socket
import threading

import pytest

from tenancy_mw.core.memcached import MemcachedCluster, MemcachedError, exchange, parse_server
from tests.support.servers import free_port


def test_a_pooled_connection_closed_by_a_restart_is_sent_again_on_a_new_one(memcached_server):
    """After the server restarts, the first call does not fail on the connection opened before it."""
    cluster = MemcachedCluster([memcached_server.address], timeout=2)
    try:
        ((code, _, _),) = cluster.call("k", b"ms k 1\r\nx\r\n", 1)
        assert code == b"HD"
        memcached_server.kill()
        memcached_server.start()  # empty
        ((code, _, _),) = cluster.call("k", b"mg k v\r\n", 1)
        assert code == b"EN"  # answered by the new server, from a new connection
        assert cluster.round_trips == 3  # the first call, the lost attempt, the one sent again
    finally:
        if not memcached_server.running:
            memcached_server.start()
        cluster.close()


def test_every_pooled_connection_a_restart_closed_is_passed_over(memcached_server):
    """A threaded worker keeps several pooled connections; after a restart none of them fails a call."""
    cluster = MemcachedCluster([memcached_server.address], timeout=2)
    try:
        # Three connections opened and pooled, as three threads of a worker leave them.
        pool = cluster._hash_client.clients[memcached_server.address].client_pool
        clients = [pool.get() for _ in range(3)]
        for client in clients:
            exchange(client, b"mg k v\r\n", 1)
        for client in clients:
            pool.release(client)
        assert len(pool.free) == 3
        memcached_server.kill()
        memcached_server.start()
        for _ in range(3):
            ((code, _, _),) = cluster.call("k", b"mg k v\r\n", 1)
            assert code == b"EN"
    finally:
        if not memcached_server.running:
            memcached_server.start()
        cluster.close()


def test_a_server_that_is_gone_is_an_error_not_a_miss(memcached_server):
    cluster = MemcachedCluster(["127.0.0.1:%d" % free_port()], timeout=0.5)
    with pytest.raises(MemcachedError, match="127.0.0.1"):
        cluster.call("k", b"mg k v\r\n", 1)
    cluster.close()


def _serve_once(reply: bytes) -> tuple[socket.socket, threading.Thread]:
    """A listening socket whose connections each get *reply* to their first command, then are closed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_reply_cut_short_is_an_error_and_is_not_sent_again():
    """Part of a reply came: the server read the command, so it is not sent a second time."""
    listener, _ = _serve_once(b"VA 10\r\nabc")
    try:
        cluster = MemcachedCluster(["127.0.0.1:%d" % listener.getsockname()[1]], timeout=2)
        with pytest.raises(MemcachedError, match="closed the connection"):
            cluster.call("k", b"mg k v\r\n", 1)
        assert cluster.round_trips == 1
        cluster.close()
    finally:
        listener.close()


def test_a_new_connection_closed_at_once_is_not_sent_again():
    """Only a pooled connection may have been closed by a restart; a new one closed at once is an error."""
    listener, _ = _serve_once(b"")
    try:
        cluster = MemcachedCluster(["127.0.0.1:%d" % listener.getsockname()[1]], timeout=2)
        with pytest.raises(MemcachedError, match="closed the connection"):
            cluster.call("k", b"mg k v\r\n", 1)
        assert cluster.round_trips == 1
        cluster.close()
    finally:
        listener.close()


@pytest.mark.parametrize("spec", ["cache1", "cache1:", ":11211", "cache1:0", "cache1:65536", "cache1:port"])
def test_servers_must_be_host_and_port(spec):
    with pytest.raises(ValueError, match="host:port"):
        parse_server(spec)
