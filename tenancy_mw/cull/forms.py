"""Reading a request's form body to find its ``_method`` fields, once and within a bound.

The ``admin_cull`` filter asks for a form body's ``_method`` fields only
when the path is admin for a method other than the request's.  This module
decides whether a framework would read a form from the request at all (the
test webob's ``Request.POST`` makes), reads the body at most
:data:`FORM_BODY_LIMIT` bytes, hands it to the scanner of
:mod:`tenancy_mw.cull.overrides`, and leaves the app a fresh stream of the
same bytes.  The finding is cached in the environ, so a second judge (after
``tenant_path`` strips the tenant, or a second ``admin_cull``) never reads
the body again.  A body that cannot be read or judged raises
:class:`UnreadableBody`, never passes unjudged.

Example::

    >>> import io
    >>> body = b"name=web1&_method=DELETE"
    >>> environ = {"REQUEST_METHOD": "POST", "CONTENT_TYPE": "application/x-www-form-urlencoded",
    ...            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    >>> sorted(form_overrides(environ, "POST"))
    ['DELETE']
    >>> environ["wsgi.input"].read() == body
    True
"""

from __future__ import annotations

import io

from tenancy_mw.core.bodies import BodyError, read_body
from tenancy_mw.core.errors import Refusal
from tenancy_mw.cull.overrides import (
    TooManyCandidates,
    multipart_boundary,
    multipart_method_overrides,
    urlencoded_method_overrides,
)

__all__ = [
    "BODY_KEY",
    "FORM_BODY_LIMIT",
    "FORM_OVERRIDES_KEY",
    "UnreadableBody",
    "form_overrides",
    "has_body",
    "has_form_body",
    "read_body_once",
    "reads_form",
]

#: The largest body read to look for a ``_method`` field or an action key
#: (:mod:`tenancy_mw.cull.actions`), in bytes; a larger one on an admin
#: path is refused (413) rather than passed unjudged.
FORM_BODY_LIMIT = 1024 * 1024

#: environ key caching the ``_method`` fields found in the body, with the
#: ``wsgi.input`` they were found in: a second judge (after a strip, or a
#: second admin_cull) reuses them instead of reading the body again.
FORM_OVERRIDES_KEY = "tenancy.form_overrides"

#: environ key holding the stream :func:`read_body_once` handed on in place
#: of ``wsgi.input``, and its bytes: while that stream still is
#: ``wsgi.input``, the body was read already.
BODY_KEY = "tenancy.cull_body"

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class UnreadableBody(Refusal, ValueError):
    """A body that could not be read to look for ``_method``: refused, never passed on unjudged.

    A :class:`~tenancy_mw.core.errors.Refusal`: *status*, *code* and
    *detail* are those of the error answer.  Still a ``ValueError``, as
    before it was a refusal.
    """


def reads_form(environ: dict, method: str) -> bool:
    """Whether webob would parse this request's body as a form: the same test as ``Request.POST``.

    A form content type, or a ``POST`` with no content type at all::

        >>> reads_form({"CONTENT_TYPE": "multipart/form-data; boundary=zz"}, "PUT")
        True
        >>> reads_form({}, "POST"), reads_form({"CONTENT_TYPE": "application/json"}, "POST")
        (True, False)
    """
    content_type = environ.get("CONTENT_TYPE")
    if content_type:
        content_type = content_type.split(";", 1)[0].strip().lower()
    if content_type:
        return content_type in _FORM_TYPES
    return method == "POST"


def has_body(environ: dict) -> bool:
    """Whether the request has a body: a non-zero ``Content-Length``, or a terminated input (chunked)."""
    return environ.get("CONTENT_LENGTH", "") not in ("", "0") or bool(environ.get("wsgi.input_terminated"))


def has_form_body(environ: dict, method: str) -> bool:
    """Whether the request has a body a framework would read a form from."""
    return reads_form(environ, method) and has_body(environ)


def form_overrides(environ: dict, method: str) -> set[str]:
    """``_method`` fields of a form body, for every request webob would read a form from.

    webob parses a form body for a POST with no or a form content type and
    for any other method with a form content type; so does this.  The body
    is read once, at most :data:`FORM_BODY_LIMIT` bytes, scanned in one
    linear pass (:mod:`tenancy_mw.cull.overrides`), and left for the app as a
    fresh stream; the finding is cached in the environ.  Raises
    :class:`UnreadableBody` for a body too large, cut short, unreadable, or
    one the scanner refuses.
    """
    if not reads_form(environ, method):
        return set()
    cached = environ.get(FORM_OVERRIDES_KEY)
    if cached is not None and cached[0] is environ.get("wsgi.input"):
        return set(cached[1])
    if not environ.get("CONTENT_LENGTH", "").strip() and not environ.get("wsgi.input_terminated"):
        return set()  # WSGI: no Content-Length and no terminated input means no body
    data = _read_form(environ)
    found = _scan(data, environ.get("CONTENT_TYPE", ""))
    environ[FORM_OVERRIDES_KEY] = (environ["wsgi.input"], frozenset(found))
    return found


def read_body_once(environ: dict, limit: int = FORM_BODY_LIMIT) -> bytes:
    """The whole body, at most *limit* bytes, read once however many findings are made of it.

    Read with :func:`.core.bodies.read_body` (which raises
    :class:`~tenancy_mw.core.bodies.BodyError`); the app gets a fresh
    stream of the same bytes, with ``CONTENT_LENGTH`` set to their length.
    As long as that stream is still ``wsgi.input``, a later call (the
    ``_method`` scan after the action keys were read, or the other way
    round) takes its bytes instead of reading again.

    Example::

        >>> environ = {"CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"{}")}
        >>> read_body_once(environ), read_body_once(environ), environ["wsgi.input"].read()
        (b'{}', b'{}', b'{}')
    """
    held = environ.get(BODY_KEY)
    if held is not None and held[0] is environ.get("wsgi.input"):
        return held[1]
    data = read_body(environ, limit)
    body = io.BytesIO(data)
    environ["wsgi.input"] = body
    environ["CONTENT_LENGTH"] = str(len(data))
    environ[BODY_KEY] = (body, data)
    return data


def _read_form(environ: dict) -> bytes:
    """The whole form body (:func:`read_body_once`), its faults in this filter's codes."""
    try:
        return read_body_once(environ)
    except BodyError as exc:
        if exc.status == 413:
            raise UnreadableBody(
                413,
                "tenancy.form-too-large",
                "The form body is too large to check for a _method field here (at most %d bytes)." % FORM_BODY_LIMIT,
            ) from None
        raise UnreadableBody(400, "tenancy.unreadable-form", exc.detail) from None


def _scan(data: bytes, content_type: str) -> set[str]:
    """The ``_method`` values of form *data*, multipart or url-encoded as *content_type* says."""
    try:
        if content_type.split(";", 1)[0].strip().lower() == "multipart/form-data":
            return multipart_method_overrides(data, multipart_boundary(content_type))
        return urlencoded_method_overrides(data)
    except TooManyCandidates as exc:
        raise UnreadableBody(400, "tenancy.unreadable-form", str(exc)) from None
    except ValueError as exc:
        raise UnreadableBody(400, "tenancy.unreadable-form", "The form body could not be read: %s" % exc) from None
