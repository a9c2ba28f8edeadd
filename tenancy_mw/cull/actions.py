"""Reading a request's JSON body for its top-level keys: the action a nova- or cinder-style ``.../action`` call names.

nova and cinder tell the calls on ``POST /servers/{id}/action`` apart by
the one key of the JSON body (``{"os-migrateLive": {...}}`` is an admin's,
``{"reboot": {...}}`` a member's), so an ``admin_cull`` rule may name
action keys (:mod:`tenancy_mw.cull.rules`).  The filter asks
:func:`body_action_keys` only when such a rule matches the path.  The body
is read the way :mod:`tenancy_mw.cull.forms` reads a form for
``_method``: at most :data:`~tenancy_mw.cull.forms.FORM_BODY_LIMIT` bytes,
once per request (the finding is cached in the environ, keyed with the
stream it was read from), and handed on intact as a fresh stream.

What is judged, failing closed wherever a lenient service could read the
body otherwise than nova does:

- every top-level key, duplicates included (``{"reboot": 1,
  "os-migrateLive": {}, "reboot": 2}`` names ``os-migrateLive``);
- keys folded (:func:`~tenancy_mw.cull.rules.fold_action_key`: NFKC, case
  folded, outer white space stripped), after JSON's escapes are decoded;
- the body decoded as JSON in UTF-8 (with or without a BOM), UTF-16 or
  UTF-32, whatever ``Content-Type`` says;
- a body that is not one JSON object (an array, a scalar, invalid JSON or
  UTF-8, nesting deeper than :data:`~tenancy_mw.core.bodies.MAX_DEPTH`) is
  refused (:class:`~tenancy_mw.cull.forms.UnreadableBody`, 400
  ``tenancy.unreadable-body``), never passed on unjudged; an empty body
  names no key.

Example::

    >>> import io
    >>> body = b'{"reboot": {"type": "HARD"}, "OS-MigrateLive": {}}'
    >>> environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    >>> sorted(body_action_keys(environ))
    ['os-migratelive', 'reboot']
    >>> environ["wsgi.input"].read() == body
    True
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate

from tenancy_mw.core.bodies import MAX_DEPTH, BodyError
from tenancy_mw.core.paths import shorten
from tenancy_mw.cull.forms import FORM_BODY_LIMIT, UnreadableBody, has_body, read_body_once
from tenancy_mw.cull.rules import fold_action_key

__all__ = ["ACTION_KEYS_KEY", "UNREADABLE_BODY_CODE", "body_action_keys", "json_object_keys"]

#: environ key caching the body's folded top-level keys with the
#: ``wsgi.input`` they were read from: a second judge (after a strip, or a
#: second admin_cull) reuses them instead of reading the body again.
ACTION_KEYS_KEY = "tenancy.action_keys"

#: The error code of a body on a path with action-key rules that is not one readable JSON object.
UNREADABLE_BODY_CODE = "tenancy.unreadable-body"


def body_action_keys(environ: dict) -> frozenset[str]:
    """The folded top-level keys of the request's JSON body; empty without a body.

    Raises :class:`~tenancy_mw.cull.forms.UnreadableBody` (a
    :class:`~tenancy_mw.core.errors.Refusal`) for a body that is too large
    (413), cannot be read whole (400, or 411 for a ``Transfer-Encoding``
    the server does not end) or is not one JSON object (400).
    """
    cached = environ.get(ACTION_KEYS_KEY)
    if cached is not None and cached[0] is environ.get("wsgi.input"):
        return cached[1]
    if not has_body(environ) and not environ.get("HTTP_TRANSFER_ENCODING"):
        return frozenset()  # PEP 3333: no Content-Length and no terminated input is no body
    data = _read(environ)
    keys = json_object_keys(data) if data else frozenset()
    environ[ACTION_KEYS_KEY] = (environ["wsgi.input"], keys)
    return keys


def _read(environ: dict) -> bytes:
    """The whole body (:func:`~tenancy_mw.cull.forms.read_body_once`), its faults as this filter's refusals."""
    try:
        return read_body_once(environ)
    except BodyError as exc:
        if exc.status == 413:
            raise UnreadableBody(
                413,
                "tenancy.body-too-large",
                "The request body is too large to check for its action here (at most %d bytes)." % FORM_BODY_LIMIT,
            ) from None
        raise UnreadableBody(exc.status, UNREADABLE_BODY_CODE, exc.detail) from None


def json_object_keys(data: bytes) -> frozenset[str]:
    """The folded top-level keys of the JSON object *data*; else :class:`~tenancy_mw.cull.forms.UnreadableBody` (400).

    Decoded as Python's ``json.loads`` decodes bytes (UTF-8 with or without
    a BOM, UTF-16, UTF-32), control characters in strings allowed (a
    lenient parser's reading).  A key given twice is still one of the
    keys, whichever value a parser keeps::

        >>> sorted(json_object_keys(b'{"reboot": 1, "os-migrateLive": {}, "reboot": 2}'))
        ['os-migratelive', 'reboot']
        >>> sorted(json_object_keys('{"\\uff45vacuate": {}}'.encode("utf-16")))
        ['evacuate']
        >>> json_object_keys(b'[{"evacuate": {}}]')
        Traceback (most recent call last):
          ...
        tenancy_mw.cull.forms.UnreadableBody: The request body is a JSON array, not an object: ...
    """
    try:
        text = data.decode(json.detect_encoding(data), "surrogatepass")
        # Numbers are left as their text: only keys are looked at, and a
        # 4,301-digit number cannot fail to convert.
        value = _DECODER.decode(text)
    except RecursionError:
        raise _unreadable(data, "it is nested deeper than %d levels" % MAX_DEPTH) from None
    except ValueError as exc:  # bad JSON, and bytes that are not text in any encoding JSON allows
        raise _unreadable(data, "it is not valid JSON (%s)" % shorten(str(exc))) from None
    # Only a body with more than MAX_DEPTH brackets can nest that deep (counted at C speed).
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise _unreadable(data, "it is nested deeper than %d levels" % MAX_DEPTH)
    if not isinstance(value, dict):
        raise UnreadableBody(
            400,
            UNREADABLE_BODY_CODE,
            "The request body is a JSON %s, not an object: an action call's body is one object, "
            'as {"reboot": {"type": "SOFT"}}.' % _json_type(text),
        )
    return frozenset(fold_action_key(key) for key in value)


# One decoder for every body (json.loads with options would build one per call).
_DECODER = json.JSONDecoder(strict=False, parse_int=str, parse_float=str, parse_constant=str)

# JSON strings (which may hold brackets), anything but brackets, and an
# innermost pair of brackets, for _depth.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^][{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def _depth(text: str) -> int:
    """How deep the arrays and objects of the valid JSON *text* nest.

    Worked out on the text in C-speed passes (a walk of the parsed value
    costs a Python step per value, some 200 ms on a hostile megabyte): the
    brackets outside strings, less the innermost pairs (one level), as
    steps of +1 and -1 whose running sum peaks at the depth.
    """
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    rest = _INNERMOST.sub("", brackets)
    if not rest:
        return 1 if brackets else 0
    return 1 + max(accumulate(array("b", rest.encode("ascii").translate(_STEPS))))


def _unreadable(data: bytes, why: str) -> UnreadableBody:
    return UnreadableBody(
        400, UNREADABLE_BODY_CODE, "The request body %s cannot be checked for its action: %s." % (_excerpt(data), why)
    )


def _excerpt(data: bytes, limit: int = 80) -> str:
    """The start of *data* for a message, without decoding a whole megabyte to show 80 characters."""
    if len(data) <= limit:
        return repr(data.decode("utf-8", "replace"))
    return "%r... (%d bytes)" % (data[:limit].decode("utf-8", "replace"), len(data))


def _json_type(text: str) -> str:
    """The type of the valid JSON value *text*, told by its first character."""
    return _TYPES.get(text.lstrip(" \t\r\n")[:1], "number")


_TYPES = {"[": "array", "{": "object", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}
