"""The ``idempotency`` rows of ``make bench`` (imported by ``run.py``).

Rows, each against the bare app and ``RequestId`` like every row:

- ``idem no token``: a ``POST`` without a token, the path every
  ordinary create takes; goal: at most 1/3 of ``RequestId``'s overhead.
- ``idem first memory`` / ``idem first memcached``: a ``POST`` with a new
  token each time (claim, run the app, store the answer).  A tiny wrapper
  puts a fresh token in each request; its cost is in these rows.
- ``idem replay memory`` / ``idem replay memcached``: the same token again
  (read the stored answer, replay it).

The memcached rows talk to a real memcached this module starts on a free
loopback port (Debian's ``memcached``); they are left out, with a note,
when it is not installed.  A network round trip costs far more than a
filter, so those rows make a tenth of the requests (``share``).

:func:`report_lines` prints how many store round trips each kind of
request makes; goal: at most 2 for a first request and 1 for a replay.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import subprocess
import time
from io import BytesIO

from tenancy_mw.idempotency.filter import Idempotency

#: The ``secret`` of the bench filters.
SECRET = "bench-secret"  # noqa: S105 - a bench-only store
CREATE_BODY = b'{"server": {"name": "web1", "imageRef": "70a599e0", "flavorRef": "1"}}'
MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"


class FreshToken:
    """Gives every request a token never used before: each is a first request.

    A memory store is emptied every 1,000 requests: a store holding hundreds
    of thousands of records would slow the garbage collector, and with it
    every row measured after this one.
    """

    def __init__(self, idempotency) -> None:
        self.app = idempotency
        self.counter = itertools.count()
        self.prefix = "bench-%d-%d-" % (os.getpid(), time.time_ns())
        self.clear = getattr(idempotency.store, "clear", None)

    def __call__(self, environ, start_response):
        number = next(self.counter)
        if self.clear is not None and number % 1000 == 999:
            self.clear()
        environ["HTTP_X_CLIENT_TOKEN"] = self.prefix + str(number)
        return self.app(environ, start_response)


_memcached = {}


def memcached_address() -> str | None:
    """``host:port`` of a memcached started for this run (stopped at exit), or None if not installed."""
    if "address" in _memcached:
        return _memcached["address"]
    if not os.access(MEMCACHED, os.X_OK):
        _memcached["address"] = None
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "256", "-t", "1"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(process.terminate)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("bench: memcached did not start on port %d" % port) from None
            time.sleep(0.05)
    _memcached["address"] = "127.0.0.1:%d" % port
    return _memcached["address"]


def options(backend: str) -> dict:
    if backend == "memory":
        return {"backend": "memory"}
    return {"backend": "memcached", "memcached_servers": memcached_address(), "secret": SECRET}


def cases(Case, target, one_third, tenant):
    """The idempotency rows, built with run.py's ``Case`` and ``target``."""
    # tenancy.tenant_id as tenant_path leaves it; one process, as the memory store requires.
    post = dict(target("/v2.1/%s/servers" % tenant, method="POST"), CONTENT_TYPE="application/json",
                **{"tenancy.tenant_id": tenant, "wsgi.multiprocess": False})
    with_token = dict(post, HTTP_X_CLIENT_TOKEN="8c1f4b3e-replayed-token")  # noqa: S106 - not a password
    backends = ["memory"] + (["memcached"] if os.access(MEMCACHED, os.X_OK) else [])
    rows = [
        Case("idem no token", "idempotency", lambda app: Idempotency(app, options("memory")), post,
             body=CREATE_BODY, goal=one_third),
    ]
    for backend in backends:
        share = 1.0 if backend == "memory" else 0.1
        rows += [
            Case("idem first %s" % backend, "idempotency",
                 lambda app, b=backend: FreshToken(Idempotency(app, options(b))), post, body=CREATE_BODY,
                 share=share),
            Case("idem replay %s" % backend, "idempotency",
                 lambda app, b=backend: Idempotency(app, options(b)), with_token, body=CREATE_BODY,
                 share=share),
        ]
    return rows


def _round_trips(backend: str, base_environ: dict) -> tuple[int, int]:
    """Store round trips of one first request and of one replay, on *backend*."""
    def app(environ, start_response):
        start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    idem = Idempotency(app, options(backend))
    environ = dict(base_environ, HTTP_X_CLIENT_TOKEN="rt-%d" % time.time_ns())
    counts = []
    for _ in range(2):
        before = idem.store.round_trips
        request = dict(environ, **{"wsgi.input": BytesIO(CREATE_BODY), "CONTENT_LENGTH": str(len(CREATE_BODY))})
        b"".join(idem(request, lambda status, headers, exc_info=None: None))
        counts.append(idem.store.round_trips - before)
    idem.store.close()
    return counts[0], counts[1]


def report_lines(base_environ: dict, target, tenant) -> list[str]:
    """One line per store: round trips of a first request and a replay, against the goal (2 and 1)."""
    environ = dict(base_environ, **target("/v2.1/%s/servers" % tenant, method="POST"),
                   CONTENT_TYPE="application/json", **{"tenancy.tenant_id": tenant, "wsgi.multiprocess": False})
    lines = ["idempotency store round trips per request (goal: first <= 2, replay <= 1):"]
    backends = ["memory"] + (["memcached"] if os.access(MEMCACHED, os.X_OK) else [])
    for backend in backends:
        first, replay = _round_trips(backend, environ)
        verdict = "PASS" if first <= 2 and replay <= 1 else "MISS"
        lines.append("  %-10s first %d, replay %d  %s" % (backend, first, replay, verdict))
    if "memcached" not in backends:
        lines.append("  memcached: %s is not installed; its rows are left out" % MEMCACHED)
    return lines
