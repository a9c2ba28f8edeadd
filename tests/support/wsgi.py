"""Build WSGI environs the way real servers do, for in-process tests."""

from __future__ import annotations

import io
from urllib.parse import unquote

from tenancy_mw.core.paths import target_path


def make_environ(method, target, headers=(), body=b"", raw_key="RAW_URI", script_name=""):
    """An environ for *target* as gunicorn (``RAW_URI``), waitress/uWSGI
    (``REQUEST_URI``) or a server that gives no raw target (``raw_key=None``)
    would build it.  *target* is the request target exactly as sent.
    """
    path = target_path(target)
    query = target.partition("?")[2].partition("#")[0]
    path_info = unquote(path, encoding="latin-1")
    environ = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": script_name,
        "PATH_INFO": path_info[len(script_name):] if path_info.startswith(script_name) else path_info,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8774",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "192.0.2.10",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "HTTP_HOST": "127.0.0.1:8774",
    }
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
    if raw_key:
        environ[raw_key] = target
    for name, value in headers:
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ["HTTP_" + key] = value
    return environ


def call(app, environ):
    """Call *app*; return (status code, headers dict, body bytes)."""
    captured = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(headers)

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        if hasattr(chunks, "close"):
            chunks.close()
    return captured["status"], captured["headers"], body


def python_calls(app, environ) -> tuple[int, int]:
    """Call *app*; return (status code, function calls made meanwhile, Python and built-in).

    A measure of work that does not depend on the machine: tests bound the
    cost of judging a request with it instead of with a timer.
    """
    import sys

    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    sys.setprofile(profile)
    try:
        status = call(app, environ)[0]
    finally:
        sys.setprofile(None)
    return status, calls
