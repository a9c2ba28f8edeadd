"""A sub-request: call the wrapped WSGI application with a new, plain request and read its answer.

A filter that asks the service something on its own behalf (``tenant_admin``'s
``version_discovery`` asks for the version document) builds a fresh environ
that keeps only what locates the service, calls the application, and reads
a bounded answer.  Nothing of the client's request (credentials, cookies,
conditions, body) is copied unless named.

Example::

    >>> def service(environ, start_response):
    ...     start_response("200 OK", [("Content-Type", "application/json")])
    ...     return [b'{"path": "%s"}' % environ["PATH_INFO"].encode()]
    >>> client = {"HTTP_HOST": "api", "HTTP_X_AUTH_TOKEN": "secret", "wsgi.url_scheme": "https"}
    >>> sub = plain_get(client, "/compute", "/v2.1")
    >>> sorted(key for key in sub if key.startswith("HTTP_"))
    ['HTTP_ACCEPT', 'HTTP_HOST']
    >>> call_application(service, sub, limit=1024)
    ('200 OK', b'{"path": "/v2.1"}')
"""

from __future__ import annotations

import io
from collections.abc import Callable

__all__ = ["LOCATING_KEYS", "call_application", "plain_get"]

#: What a sub-request keeps of the client's environ (with every ``wsgi.*`` key): what
#: locates the service (server, ``Host``, forwarding headers) and the request id.
LOCATING_KEYS = frozenset(
    (
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "REMOTE_ADDR",
        "HTTPS",
        "HTTP_HOST",
        "HTTP_FORWARDED",
        "HTTP_X_FORWARDED_FOR",
        "HTTP_X_FORWARDED_HOST",
        "HTTP_X_FORWARDED_PORT",
        "HTTP_X_FORWARDED_PROTO",
        "HTTP_X_FORWARDED_PREFIX",
        "HTTP_X_OPENSTACK_REQUEST_ID",
        "openstack.request_id",
    )
)


def plain_get(environ: dict, script_name: str, path_info: str, accept: str = "application/json") -> dict:
    """A new ``GET`` environ for *script_name* + *path_info* (WSGI strings), on the service *environ* reached.

    Only :data:`LOCATING_KEYS` and the ``wsgi.*`` keys are copied; the body is empty.
    """
    sub = {key: value for key, value in environ.items() if key in LOCATING_KEYS or key.startswith("wsgi.")}
    sub.update(REQUEST_METHOD="GET", SCRIPT_NAME=script_name, PATH_INFO=path_info, QUERY_STRING="", HTTP_ACCEPT=accept)
    sub["wsgi.input"] = io.BytesIO(b"")
    return sub


def call_application(application: Callable, environ: dict, limit: int) -> tuple[str, bytes]:
    """Call *application* with *environ*; its last status (``"nothing"`` if none) and its whole body.

    Bytes given to the ``write`` callable are part of the body (PEP 3333);
    the result's ``close`` is always called.  Raises :class:`ValueError`
    when the iterated body passes *limit* bytes; whatever the application
    raises goes on.
    """
    statuses: list[str] = []
    written: list[bytes] = []

    def capture(status, headers, exc_info=None):
        statuses.append(status)  # PEP 3333: the last call wins
        return written.append

    chunks = application(environ, capture)
    try:
        size = 0
        for chunk in chunks:
            written.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ValueError("an answer over %d bytes" % limit)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return (statuses[-1] if statuses else "nothing"), b"".join(written)
