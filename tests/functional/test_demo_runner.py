"""``make demo``: examples/run-demo serves both endpoints, prints the PUT line first, stops both on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.functional.conftest import sqlite_url
from tests.support.servers import free_port, wait_for_port

RUNNER = os.path.join(REPO_ROOT, "examples", "run-demo")


def test_make_demo_runs_the_runner():
    dry = subprocess.run(["make", "-n", "demo"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "examples/run-demo" in dry.stdout


def test_the_runner_serves_both_endpoints_and_stops_both_on_ctrl_c(tmp_path):
    port, admin_port = free_port(), free_port()
    env = dict(
        os.environ,
        DEMO_PORT=str(port),
        DEMO_ADMIN_PORT=str(admin_port),
        TENANCY_DEMO_REGISTRY_URL=sqlite_url(tmp_path / "tenants.sqlite"),
        TENANCY_DEMO_DATABASE_URL=sqlite_url(tmp_path / "demo.sqlite"),
        TENANCY_DEMO_CELLS="cell1=%s, cell2=%s" % tuple(sqlite_url(tmp_path / n) for n in ("c1.sqlite", "c2.sqlite")),
    )
    env.pop("GUNICORN_CMD_ARGS", None)
    out = open(tmp_path / "out.log", "wb")  # noqa: SIM115 - closed below
    # A session of its own: Ctrl-C signals the terminal's whole foreground process group.
    runner = subprocess.Popen([RUNNER, os.path.dirname(sys.executable)], env=env, stdout=out,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(admin_port, process=runner)
        wait_for_port(port, process=runner)
        import http.client

        def request(p, method, target, body=None):
            conn = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
            try:  # closed on a timeout too, not left to the garbage collector
                headers = {"Content-Type": "application/json"} if body else {}
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, response.read()
            finally:
                conn.close()

        assert request(port, "GET", "/v2.1/nobody/servers")[0] == 404
        assert request(admin_port, "PUT", "/v2.1/acme", b'{"tier": "gold"}')[0] == 201
        status, body = request(port, "POST", "/v2.1/acme/servers", b'{"server": {"name": "web1"}}')
        assert status == 201, body
        assert json.loads(request(port, "GET", "/v2.1/acme/servers")[1])["servers"][0]["name"] == "web1"
        assert request(port, "DELETE", "/v2.1/acme")[0] == 404  # culled on the public endpoint
    finally:
        os.killpg(runner.pid, signal.SIGINT)
        runner.wait(timeout=30)
        out.close()
    log = (tmp_path / "out.log").read_text()
    first = log.splitlines()[0]
    assert first.startswith("PUT http://127.0.0.1:%d/v2.1/{tenant}" % admin_port), first
    assert log.count("Shutting down: Master") == 2, log[-2000:]
    left = subprocess.run(["pgrep", "-f", "127.0.0.1:%d" % port], capture_output=True, text=True)
    assert left.stdout.strip() == ""
    left = subprocess.run(["pgrep", "-f", "127.0.0.1:%d" % admin_port], capture_output=True, text=True)
    assert left.stdout.strip() == ""
