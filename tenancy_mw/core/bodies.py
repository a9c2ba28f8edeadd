"""Read a request body with a size limit; every way it can be wrong is one clear error.

Plain WSGI (no webob).  :func:`read_body` reads the raw bytes (the
idempotency filter fingerprints them); :func:`read_json_body` reads them
with it and decodes them (the tag API, the demo).

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

__all__ = ["MAX_DEPTH", "BodyError", "read_body", "read_json_body"]

#: The deepest nesting of arrays and objects a body may have.  Python's own
#: parser stops at a depth that depends on the Python version (about 1,000 on
#: 3.11, tens of thousands on 3.12 and later); a fixed bound makes the answer
#: the same on every Python, and keeps code that walks the value recursively safe.
MAX_DEPTH = 100

# Bytes asked of wsgi.input per read: a server may give fewer, so reading loops.
_CHUNK = 64 * 1024


class BodyError(ValueError):
    """A request body that cannot be used.

    :ivar status: 413 (too large), 411 (length required) or 400.
    :ivar rule: from :func:`read_body`, ``"body-too-large"``,
        ``"bad-content-length"``, ``"length-required"`` or
        ``"unreadable-body"``; from :func:`read_json_body`,
        ``"body-too-large"``, ``"bad-body"`` or ``"bad-json"``.
    :ivar detail: a sentence for the client.
    """

    def __init__(self, status: int, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.rule = rule
        self.detail = detail


def read_body(environ: dict, max_bytes: int) -> bytes:
    """The raw body of the request in *environ*, whole; :class:`BodyError` when it cannot be had whole.

    As webob reads a body: never past ``Content-Length`` (a keep-alive
    socket would block), and without one only a body the server says it
    ended (chunked, ``wsgi.input_terminated``), read up to *max_bytes*; with
    neither there is no body (PEP 3333).  ``wsgi.input`` is left as read.
    Refused (the :attr:`BodyError.rule`):

    - ``bad-content-length`` (400): ``Content-Length`` is not a number, or negative;
    - ``body-too-large`` (413): over *max_bytes*, announced or read;
    - ``length-required`` (411): a ``Transfer-Encoding`` without a length on
      a server that does not end the input: the body cannot be read safely,
      and taking it for empty would misread it;
    - ``unreadable-body`` (400): reading failed (a client that broke off, a
      malformed chunk), or the body ended before its ``Content-Length``.

    Example::

        >>> import io
        >>> read_body({"CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"{}trailing")}, 64)
        b'{}'
    """
    length = _declared_length(environ, max_bytes)
    terminated = environ.get("wsgi.input_terminated")
    if length is None and not terminated and environ.get("HTTP_TRANSFER_ENCODING"):
        raise BodyError(
            411,
            "length-required",
            "A request body with Transfer-Encoding %r needs a Content-Length here."
            % shorten(environ["HTTP_TRANSFER_ENCODING"]),
        )
    stream = environ.get("wsgi.input")
    if stream is None or length == 0 or (length is None and not terminated):
        return b""
    # One byte past the limit tells a body of exactly max_bytes from a longer one.
    body = _read_up_to(stream, max_bytes + 1 if length is None else length)
    if len(body) > max_bytes:
        raise BodyError(413, "body-too-large", "The request body is over %d bytes." % max_bytes)
    if length is not None and len(body) < length:
        raise BodyError(
            400, "unreadable-body", "The request body ended after %d of its %d bytes." % (len(body), length)
        )
    return body


def _declared_length(environ: dict, max_bytes: int) -> int | None:
    """``Content-Length`` as a number (``None`` when absent); :class:`BodyError` when bad or over *max_bytes*."""
    declared = environ.get("CONTENT_LENGTH")
    if not declared:
        return None
    # Digits only (RFC 9110), with the optional whitespace around a header
    # value that some servers pass on: int() would also take "+7", "1_0"
    # and non-ASCII digits.
    declared = declared.strip(" \t")
    if not (declared.isascii() and declared.isdigit()):
        if declared[:1] == "-" and declared[1:].isascii() and declared[1:].isdigit():
            raise BodyError(400, "bad-content-length", "Content-Length %r is negative." % shorten(declared))
        raise BodyError(400, "bad-content-length", "Content-Length %r is not a number." % shorten(declared))
    length = int(declared)
    if length > max_bytes:
        raise BodyError(
            413,
            "body-too-large",
            "The request body is %d bytes, over the %d bytes accepted here." % (length, max_bytes),
        )
    return length


def _read_up_to(stream, limit: int) -> bytes:
    """At most *limit* bytes of *stream*, fewer only at its end."""
    pieces = []
    got = 0
    try:
        # The usual body comes whole in the first read: no list, no join.
        first = stream.read(min(_CHUNK, limit))
        if not first:
            return b""
        if type(first) is bytes and len(first) >= limit:
            return first
        pieces.append(first)
        got = len(first)
        while got < limit:
            piece = stream.read(min(_CHUNK, limit - got))
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
    except Exception as exc:  # noqa: BLE001 - servers raise their own types for a broken body
        raise BodyError(
            400, "unreadable-body", "The request body could not be read (%s)." % shorten(str(exc))
        ) from None
    return b"".join(pieces)


def read_json_body(environ: dict, max_bytes: int, example: str) -> object:
    """The decoded JSON body of the request in *environ*; :class:`BodyError` when it cannot be had.

    Read with :func:`read_body` (at most *max_bytes*, whatever
    ``Content-Length`` says); a body it refuses other than as too large is
    a ``bad-body`` (400), as is an empty one.  *example* is a valid body,
    shown in the messages.
    """
    try:
        raw = read_body(environ, max_bytes)
    except BodyError as exc:
        if exc.status == 413:
            raise
        raise BodyError(400, "bad-body", exc.detail) from None
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
