"""Helpers of the idempotency tests: a counting app, requests, stores on every backend."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

from tenancy_mw import migrations
from tests.support.wsgi import call, make_environ

#: The secret every test filter signs with.
SECRET = "test-secret-0123456789"

#: The stores the filter tests run on.
BACKENDS = ("memory", "memcached", "sqlite", "postgresql", "mariadb")

CREATE_BODY = b'{"server": {"name": "web1", "flavorRef": "1"}}'


class CountingApp:
    """A WSGI app that counts the requests reaching it and answers each with a new body.

    :param status: the status line it answers.
    :param sleep: seconds each call takes (0 for none); ``sleep_first`` only the first.
    :param first_waits_for: a :class:`threading.Event` the first call waits for (up to 30 s) before answering.
    :param body_size: answer with this many bytes instead of the JSON summary.
    """

    def __init__(
        self, status="201 Created", sleep=0.0, sleep_first=0.0, body_size=None, extra_headers=(), first_waits_for=None
    ):
        self.status = status
        self.sleep = sleep
        self.sleep_first = sleep_first
        self.first_waits_for = first_waits_for
        self.body_size = body_size
        self.extra_headers = list(extra_headers)
        self.calls = 0
        self.bodies = []
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self._lock:
            self.calls += 1
            number = self.calls
        request_body = environ["wsgi.input"].read()
        self.bodies.append(request_body)
        if self.sleep or (number == 1 and self.sleep_first):
            time.sleep(self.sleep_first if number == 1 and self.sleep_first else self.sleep)
        if number == 1 and self.first_waits_for is not None:
            self.first_waits_for.wait(30)
        if environ["REQUEST_METHOD"] == "GET":
            body = json.dumps({"server": {"id": environ["PATH_INFO"].rsplit("/", 1)[-1], "status": "ACTIVE"}})
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body.encode()]
        if self.body_size is not None:
            body = b"x" * self.body_size
        else:
            body = json.dumps({"server": {"id": number, "status": "BUILD"}}).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Location", "http://127.0.0.1:8774/v2.1/acme/servers/%d" % number),
        ] + self.extra_headers
        start_response(self.status, headers)
        return [body]


def post(app, token=None, tenant="acme", body=CREATE_BODY, headers=(), target=None, method="POST",
         content_type="application/json", environ=None):
    """Send one request through *app* in process; return (status, headers, body).

    ``tenancy.tenant_id`` is set to *tenant* as ``tenant_path`` would
    (``None``: no tenant).  *token* goes in ``X-Client-Token``.
    """
    target = target or "/v2.1/%s/servers" % (tenant or "acme")
    all_headers = list(headers)
    if token is not None:
        all_headers.append(("X-Client-Token", token))
    if content_type:
        all_headers.append(("Content-Type", content_type))
    env = make_environ(method, target, all_headers, body)
    env["wsgi.input_terminated"] = True
    if tenant is not None:
        env["tenancy.tenant_id"] = tenant
    env.update(environ or {})
    return call(app, env)


def store_options(backend: str, request, tmp_path_factory) -> dict:
    """Filter options for a store on *backend*; the SQL table is created with the migrations."""
    if backend == "memory":
        return {"backend": "memory"}
    if backend == "memcached":
        server = request.getfixturevalue("memcached_server")
        return {"backend": "memcached", "memcached_servers": server.address, "secret": SECRET}
    if backend == "sqlite":
        url = "sqlite:///" + os.path.join(str(tmp_path_factory.mktemp("idem")), "idem.sqlite")
    else:
        url = request.getfixturevalue(backend + "_url")
    migrations.upgrade(url, ["idempotency"])
    return {"backend": "sql", "connection": url, "secret": SECRET}


def counting_app_factory(global_conf, **local_conf):
    """``paste.app_factory`` of a counting app for multi-process tests.

    Every call appends one line to ``count_file`` (one ``write`` on a file
    opened for appending, so several worker processes can share it), sleeps
    ``sleep`` seconds, then answers ``201`` with a body no other call
    gives (a fresh uuid): a replay is told from a second execution by it.
    """
    path = local_conf["count_file"]
    sleep = float(local_conf.get("sleep", "0"))

    def app(environ, start_response):
        marker = uuid.uuid4().hex
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (marker + "\n").encode())
        finally:
            os.close(fd)
        environ["wsgi.input"].read()
        time.sleep(sleep)
        body = json.dumps({"server": {"id": marker, "pid": os.getpid()}}).encode()
        start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def count_lines(path) -> int:
    """How many times a counting app ran."""
    if not os.path.exists(path):
        return 0
    with open(path, encoding="ascii") as handle:
        return sum(1 for line in handle if line.strip())
