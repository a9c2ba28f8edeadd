"""Capture the environs real WSGI servers build, to replay them in process.

A server (gunicorn, waitress, uWSGI) serves :func:`app`, which writes each
request's environ (its string values) and body as one JSON line to the file
named by ``$TENANCY_CAPTURE_FILE``; :func:`replay_environ` rebuilds an
environ from such a line, with a fresh ``wsgi.input``.  Sending a corpus
once per server and replaying it through many router stacks tests the
filters under each server's own reading of the request (``RAW_URI`` or
``REQUEST_URI``, dot segments resolved or not, ...) at in-process speed.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tempfile

from tests.support.servers import free_port, raw_request, wait_for_port

CAPTURE_ID = "HTTP_X_CORPUS_ID"


def app(environ, start_response):
    """Record the request, answer 200."""
    record = {k: v for k, v in environ.items() if isinstance(v, str)}
    try:
        body = environ["wsgi.input"].read()
        record["_body"] = base64.b64encode(body).decode()
    except Exception as exc:  # noqa: BLE001 - a broken body is recorded, not raised
        record["_body_error"] = str(exc)
    if environ.get("wsgi.input_terminated"):
        record["_input_terminated"] = True
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(os.environ["TENANCY_CAPTURE_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


def replay_environ(record: dict) -> dict:
    """A fresh environ from a captured record."""
    environ = {k: v for k, v in record.items() if not k.startswith("_")}
    body = base64.b64decode(record.get("_body", ""))
    environ.update(
        {
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": io.StringIO(),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": record.get("wsgi.url_scheme", "http"),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
    )
    if record.get("_input_terminated"):
        environ["wsgi.input_terminated"] = True
    if body and "CONTENT_LENGTH" not in environ:
        environ["CONTENT_LENGTH"] = str(len(body))
    return environ


def _command(server: str, port: int) -> list[str]:
    bindir = os.path.dirname(sys.executable)
    if server == "gunicorn":
        return [
            os.path.join(bindir, "gunicorn"), "tests.support.capture:app", "--bind", "127.0.0.1:%d" % port,
            "--workers", "1", "--no-control-socket", "--graceful-timeout", "1",
        ]  # fmt: skip
    if server == "waitress":
        return [os.path.join(bindir, "waitress-serve"), "--listen=127.0.0.1:%d" % port, "tests.support.capture:app"]
    if server == "uwsgi":
        return [
            os.path.join(bindir, "uwsgi"), "--http-socket", "127.0.0.1:%d" % port, "--module",
            "tests.support.capture:app", "--pythonpath", os.getcwd(), "--processes", "1", "--disable-logging",
            "--buffer-size", "32768", "--die-on-term",
        ]  # fmt: skip
    raise ValueError(server)


SERVERS = ("gunicorn", "waitress", "uwsgi")


def capture(server: str, corpus, cwd: str) -> list[dict | None]:
    """Send every request of *corpus* to *server* serving :func:`app`; return the captured records.

    The record of a request the server refused itself (it answered without
    calling the app) is ``None``: such a request cannot reach any app.
    """
    with tempfile.TemporaryDirectory() as tmp:
        record_file = os.path.join(tmp, "capture.jsonl")
        port = free_port()
        env = dict(os.environ, TENANCY_CAPTURE_FILE=record_file)
        log = open(os.path.join(tmp, "server.log"), "wb")  # noqa: SIM115 - closed below
        process = subprocess.Popen(_command(server, port), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, process=process)
            for index, request in enumerate(corpus):
                headers = tuple(request.headers) + (("X-Corpus-Id", str(index)),)
                raw_request(port, request.method, request.target, headers, request.body)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
        records: list[dict | None] = [None] * len(corpus)
        if os.path.exists(record_file):
            with open(record_file, encoding="utf-8") as handle:
                for line in handle:
                    record = json.loads(line)
                    records[int(record[CAPTURE_ID])] = record
        return records
