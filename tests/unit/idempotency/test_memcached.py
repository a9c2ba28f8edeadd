"""The memcached store on real servers: one, and a cluster of three with a node killed mid-run."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid

import pytest

from tenancy_mw.idempotency.filter import Idempotency
from tenancy_mw.idempotency.stores import MemcachedStore, StoreError
from tests.support.idempotency import SECRET, CountingApp, post


def cluster_filter(app, servers, **more):
    return Idempotency(app, dict(
        {"backend": "memcached", "memcached_servers": ",".join(s.address for s in servers), "secret": SECRET,
         "store_timeout": "0.5"}, **more))


def token_on(idem, server) -> str:
    """A fresh token whose key lives on *server*."""
    while True:
        token = uuid.uuid4().hex
        if idem.store.server_of(idem.codec.store_key("acme", token)) == server.address:
            return token


def test_one_server_round_trips(memcached_server):
    """A first request costs two round trips (claim, complete), a replay one."""
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memcached", "memcached_servers": memcached_server.address, "secret": SECRET})
    token = uuid.uuid4().hex
    post(idem, token)
    assert idem.store.round_trips == 2
    post(idem, token)
    assert idem.store.round_trips == 3
    idem.store.close()


def test_keys_spread_over_the_cluster(memcached_cluster):
    idem = cluster_filter(CountingApp(), memcached_cluster)
    owners = {idem.store.server_of(idem.codec.store_key("acme", str(n))) for n in range(60)}
    assert owners == {server.address for server in memcached_cluster}
    idem.store.close()


def test_node_killed_mid_run(memcached_cluster, caplog):
    """Kill the node that holds a token while its first request runs, then check both on_store_error modes.

    The dead node's tokens are never moved to the live nodes (where they would
    look free): fail_closed answers 503 without calling the app, fail_open runs
    the request unprotected.  Tokens on the live nodes keep working.
    """
    victim, *alive = memcached_cluster
    app = CountingApp()
    closed = cluster_filter(app, memcached_cluster)
    opened = cluster_filter(app, memcached_cluster, on_store_error="fail_open")
    doomed = token_on(closed, victim)
    safe = token_on(closed, alive[0])
    safe_first = post(closed, safe)  # app call 1 (slow)
    assert post(closed, safe)[1]["Idempotent-Replayed"] == "true"

    results = {}
    running = threading.Thread(target=lambda: results.setdefault("first", post(closed, doomed)))
    try:
        with caplog.at_level(logging.WARNING, logger="tenancy_mw.idempotency.filter"):
            app.sleep = 1.0
            running.start()  # app call 2, claimed on the victim
            time.sleep(0.3)
            victim.kill()
            running.join()
            app.sleep = 0
            # The client still gets the answer of the request that ran.
            assert results["first"][0] == 201
            assert "storing a response failed" in caplog.text
            calls = app.calls

            # fail_closed: 503 with Retry-After; the app is not called.
            status, headers, body = post(closed, doomed)
            assert status == 503
            assert headers["Retry-After"] == "1"
            assert b"idempotency.store-unavailable" in body
            assert app.calls == calls
            # A new token on the dead node: refused too, never "free" elsewhere.
            assert post(closed, token_on(closed, victim))[0] == 503
            assert app.calls == calls

            # fail_open: runs, unprotected, with a warning.
            caplog.clear()
            status, _, _ = post(opened, doomed)
            assert status == 201
            assert app.calls == calls + 1
            assert "fail_open" in caplog.text

            # The live nodes are untouched: the replay still works, new tokens too.
            assert post(closed, safe)[2] == safe_first[2]
            fresh = token_on(closed, alive[1])
            post(closed, fresh)
            assert post(closed, fresh)[1]["Idempotent-Replayed"] == "true"
    finally:
        if not victim.running:
            victim.start()
    # Back, empty: memcached keeps nothing, so the token is forgotten (the sql store is durable).
    status, headers, _ = post(closed, doomed)
    assert status == 201
    assert "Idempotent-Replayed" not in headers
    closed.store.close()
    opened.store.close()


def test_server_that_never_answers_times_out():
    """A slow store is a store error after store_timeout, not a hang and not "free"."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never reads or answers
    try:
        app = CountingApp()
        idem = Idempotency(app, {"backend": "memcached", "memcached_servers": "127.0.0.1:%d" % silent.getsockname()[1],
                                 "secret": SECRET, "store_timeout": "0.3"})
        started = time.monotonic()
        status, headers, _ = post(idem, uuid.uuid4().hex)
        assert status == 503
        assert time.monotonic() - started < 3
        assert app.calls == 0
        with pytest.raises(StoreError):
            idem.store.read("tmw-idem:x")
        idem.store.close()
    finally:
        silent.close()


def test_no_server_listening_is_a_store_error_not_a_miss():
    from tests.support.servers import free_port

    store = MemcachedStore(["127.0.0.1:%d" % free_port()], timeout=0.5)
    for call in (lambda: store.claim("k", b"v", 5), lambda: store.read("k"), lambda: store.release("k", 1),
                 lambda: store.complete("k", 1, b"v", 5)):
        with pytest.raises(StoreError):
            call()


def test_expiration_over_30_days_is_kept(memcached_server):
    """memcached reads an expiry over 30 days as a Unix time: sent as one, the record is kept and replayed."""
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memcached", "memcached_servers": memcached_server.address,
                             "secret": SECRET, "expiration": str(40 * 86400)})
    token = uuid.uuid4().hex
    post(idem, token)
    time.sleep(1.1)  # an expiry read as 1970 would be gone by now
    assert post(idem, token)[1]["Idempotent-Replayed"] == "true"
    assert app.calls == 1
    idem.store.close()
