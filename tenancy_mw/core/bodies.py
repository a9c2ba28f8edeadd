"""Read a JSON request body with a size limit; every way it can be wrong is one clear error.

Plain WSGI (no webob): used by the tag API and the demo.

Example::

    >>> import io
    >>> environ = {"CONTENT_LENGTH": "12", "wsgi.input": io.BytesIO(b'{"tags": []}')}
    >>> read_json_body(environ, 1024, '{"tags": ["red"]}')
    {'tags': []}
    >>> read_json_body({"CONTENT_LENGTH": "5", "wsgi.input": io.BytesIO(b"{nope")}, 1024, "{}")
    Traceback (most recent call last):
      ...
    tenancy_mw.core.bodies.BodyError: The request body '{nope' is not valid JSON (...); send {}.
"""

from __future__ import annotations

import json

from tenancy_mw.core.paths import shorten

__all__ = ["MAX_DEPTH", "BodyError", "read_json_body"]

#: The deepest nesting of arrays and objects a body may have.  Python's own
#: parser stops at a depth that depends on the Python version (about 1,000 on
#: 3.11, tens of thousands on 3.12 and later); a fixed bound makes the answer
#: the same on every Python, and keeps code that walks the value recursively safe.
MAX_DEPTH = 100


class BodyError(ValueError):
    """A request body that cannot be used.

    :ivar status: 413 (too large) or 400.
    :ivar rule: ``"body-too-large"``, ``"bad-body"`` (empty) or ``"bad-json"``.
    :ivar detail: a sentence for the client.
    """

    def __init__(self, status: int, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.rule = rule
        self.detail = detail


def read_json_body(environ: dict, max_bytes: int, example: str) -> object:
    """The decoded JSON body of the request in *environ*; :class:`BodyError` when it cannot be had.

    At most *max_bytes* are read, whatever ``Content-Length`` says (a body
    without one, chunked, is read up to the limit too).  *example* is a
    valid body, shown in the messages.
    """
    too_large = BodyError(413, "body-too-large", "The request body is over %d bytes." % max_bytes)
    declared = environ.get("CONTENT_LENGTH")
    # As webob reads a body: never past Content-Length (a keep-alive socket
    # would block), and without one only a body the server says it ended
    # (chunked, wsgi.input_terminated).  One byte past the limit tells a
    # body of exactly max_bytes from a longer one.
    if declared:
        try:
            length = int(declared)
        except ValueError:
            raise BodyError(400, "bad-body", "Content-Length %r is not a number." % shorten(declared)) from None
        if length > max_bytes:
            raise too_large
        to_read = max(length, 0)
    elif environ.get("wsgi.input_terminated"):
        to_read = max_bytes + 1
    else:
        to_read = 0
    stream = environ.get("wsgi.input")
    try:
        raw = stream.read(to_read) if stream is not None and to_read else b""
    except (OSError, ValueError) as exc:
        # A client that broke off, or a malformed chunked body.
        raise BodyError(400, "bad-body", "The request body could not be read (%s)." % shorten(str(exc))) from None
    if len(raw) > max_bytes:
        raise too_large
    if not raw.strip():
        raise BodyError(400, "bad-body", "The request body is empty; send %s." % example)
    try:
        value = json.loads(raw)
        # Only a body with more than MAX_DEPTH brackets can nest that deep (counted at C speed).
        if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _nested_deeper_than(value, MAX_DEPTH):
            raise ValueError("nested deeper than %d levels" % MAX_DEPTH)
        return value
    except (ValueError, RecursionError) as exc:
        # ValueError covers bad JSON and bytes that are not UTF-8;
        # RecursionError a body nested deeper than the parser goes.
        raise BodyError(
            400,
            "bad-json",
            "The request body %r is not valid JSON (%s); send %s."
            % (shorten(raw.decode("utf-8", "replace")), shorten(str(exc)), example),
        ) from None


def _nested_deeper_than(value: object, limit: int) -> bool:
    """Whether *value* has arrays or objects nested more than *limit* deep (no recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
