"""``make demo``: examples/run-demo serves both endpoints, says where and what to try, stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT
from tests.functional.conftest import sqlite_url
from tests.support.servers import free_port, raw_request

RUNNER = os.path.join(REPO_ROOT, "examples", "run-demo")


def test_make_demo_runs_the_runner():
    dry = subprocess.run(["make", "-n", "demo"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "examples/run-demo" in dry.stdout


def wait_for_line(path, line: str, process: subprocess.Popen, timeout: float = 120.0) -> str:
    """The output in *path* once it has *line* (a whole line); fails if *process* exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text()
        if line in text.splitlines():
            return text
        if process.poll() is not None:
            pytest.fail("run-demo exited (%s) before printing %r:\n%s" % (process.returncode, line, text[-3000:]))
        time.sleep(0.2)
    pytest.fail("run-demo printed no %r line:\n%s" % (line, path.read_text()[-3000:]))


def group_alive(pgid: int) -> bool:
    """Whether any process of process group *pgid* is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _inherit(sigint):
    """A ``preexec_fn`` that gives the child *sigint* as its SIGINT disposition.

    What a child inherits is its parent's: a test run started with SIGINT
    ignored (a job started with ``&`` from a script, ``nohup``) would hand
    that on, and a Ctrl-C test would test the run's start, not run-demo.
    """

    def preexec() -> None:
        signal.signal(signal.SIGINT, sigint)

    return preexec


@pytest.fixture(params=[signal.SIG_DFL], ids=["sigint-default"])
def runner(request, tmp_path):
    """examples/run-demo on free ports, its databases in *tmp_path*; ``(process, public port, admin port, log)``.

    It starts with SIGINT at the disposition the test's parameter names (the
    default, as from a terminal, unless a test asks otherwise), whatever
    this test run inherited.
    """
    port, admin_port = free_port(), free_port()
    env = dict(
        os.environ,
        DEMO_PORT=str(port),
        DEMO_ADMIN_PORT=str(admin_port),
        OS_TENANT_ADMIN__CONNECTION=sqlite_url(tmp_path / "tenants.sqlite"),
        OS_DEMO_COMPUTE__DATABASE_URL=sqlite_url(tmp_path / "demo.sqlite"),
        OS_IDEMPOTENCY__CONNECTION=sqlite_url(tmp_path / "demo.sqlite"),
        OS_ID_RESOLVER__CELLS="cell1=%s, cell2=%s"
        % (sqlite_url(tmp_path / "c1.sqlite"), sqlite_url(tmp_path / "c2.sqlite")),
    )
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        # A session of its own: Ctrl-C signals the terminal's whole foreground
        # process group, which is this session's group here.
        process = subprocess.Popen(
            [RUNNER, os.path.dirname(sys.executable)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_inherit(request.param),
        )
    try:
        yield process, port, admin_port, log
    finally:
        if group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def test_the_runner_prints_both_urls_and_what_to_try_once_both_answer(runner):
    process, port, admin_port, log = runner
    text = wait_for_line(log, "ready", process)
    printed = [line.strip() for line in text.splitlines()]
    public = "http://127.0.0.1:%d/v2.1/{project_id}" % port
    admin = "http://127.0.0.1:%d/v2.1/{project_id}" % admin_port
    assert "public  " + public in printed
    assert "admin   " + admin in printed
    # And where each endpoint's OpenAPI document is, which it serves.
    assert (
        "OpenAPI http://127.0.0.1:%d/openapi.json, http://127.0.0.1:%d/openapi.json (each endpoint's own)"
        % (
            port,
            admin_port,
        )
        in printed
    )
    # The commands to try start with creating a tenant on the admin endpoint.
    commands = [line for line in printed if line.startswith("curl ")]
    assert "PUT http://127.0.0.1:%d/v2.1/{project_id}" % admin_port in text
    assert commands[0].startswith("curl -si -X PUT")
    assert commands[0].endswith("http://127.0.0.1:%d/v2.1/acme" % admin_port)
    # "ready" comes after both servers answer: no waiting needed now.
    assert raw_request(port, "GET", "/") == 200
    assert raw_request(admin_port, "GET", "/") == 200
    assert raw_request(port, "GET", "/openapi.json") == raw_request(admin_port, "GET", "/openapi.json") == 200


def stops_on_ctrl_c(process: subprocess.Popen, log) -> None:
    """Ctrl-C's SIGINT to the whole group: run-demo exits 130, both servers and all workers with it."""
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does
    assert process.wait(timeout=30) == 130, log.read_text()[-3000:]
    # Both gunicorn masters and all their workers are gone with it.
    deadline = time.monotonic() + 10
    while group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(process.pid)
    assert log.read_text().count("Shutting down: Master") == 2


def test_the_printed_commands_work_and_ctrl_c_stops_everything(runner):
    process, port, admin_port, log = runner
    wait_for_line(log, "ready", process)
    import http.client

    def request(p, method, target, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
        try:  # closed on a timeout too, not left to the garbage collector
            headers = dict(headers or {}, **({"Content-Type": "application/json"} if body else {}))
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    assert request(port, "GET", "/v2.1/nobody/servers")[0] == 404
    assert request(admin_port, "PUT", "/v2.1/acme", b'{"tier": "gold"}')[0] == 201
    token = {"X-Client-Token": "1f0c"}
    status, body = request(port, "POST", "/v2.1/acme/servers", b'{"server": {"name": "web1"}}', token)
    assert status == 201, body
    # The retry with the same token is the same server.
    assert request(port, "POST", "/v2.1/acme/servers", b'{"server": {"name": "web1"}}', token)[1] == body
    assert [s["name"] for s in json.loads(request(port, "GET", "/v2.1/acme/servers/detail")[1])["servers"]] == ["web1"]
    assert request(port, "DELETE", "/v2.1/acme")[0] == 404  # culled on the public endpoint
    stops_on_ctrl_c(process, log)


@pytest.mark.parametrize("runner", [signal.SIG_IGN], ids=["sigint-ignored"], indirect=True)
def test_ctrl_c_stops_everything_when_run_demo_starts_with_sigint_ignored(runner):
    """Started as a job with ``&`` from a script is (SIGINT ignored, which bash cannot trap),
    run-demo runs itself again with SIGINT at its default, and Ctrl-C still stops everything."""
    process, port, admin_port, log = runner
    wait_for_line(log, "ready", process)
    assert raw_request(port, "GET", "/") == 200
    stops_on_ctrl_c(process, log)
