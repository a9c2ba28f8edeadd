"""WSGI apps for the tests: they record what reached them."""

from __future__ import annotations

import json
import os


class Recorder:
    """A WSGI app that remembers the environ of every request that reached it.

    Answers 200 with a JSON summary of what it saw, so functional tests can
    read it from the response too.
    """

    def __init__(self):
        self.seen = []

    def __call__(self, environ, start_response):
        self.seen.append(dict(environ))
        body = json.dumps(summary(environ)).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def summary(environ) -> dict:
    """The parts of an environ the tests look at."""
    return {
        "method": environ.get("REQUEST_METHOD"),
        "script_name": environ.get("SCRIPT_NAME"),
        "path_info": environ.get("PATH_INFO"),
        "raw_uri": environ.get("RAW_URI"),
        "query": environ.get("QUERY_STRING"),
        "tenant_id": environ.get("tenancy.tenant_id"),
        "tenant_header": environ.get("HTTP_X_TENANT_ID"),
        "headers": {k: v for k, v in environ.items() if k.startswith("HTTP_")},
    }


def recorder_factory(global_conf, **local_conf):
    """``paste.app_factory`` for a recorder that appends one JSON line per request.

    Several gunicorn workers can record into one file: each line is written
    with one ``write`` on a file opened for appending.
    """
    path = local_conf.get("record_file") or os.environ["TENANCY_RECORD_FILE"]

    def app(environ, start_response):
        line = (json.dumps(summary(environ)) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        body = json.dumps(summary(environ)).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def read_records(path) -> list[dict]:
    """The requests a recorder_factory app wrote to *path*."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
