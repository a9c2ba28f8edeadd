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
  UTF-32, whatever ``Content-Type`` says; and also in the charset a
  ``charset`` parameter of ``Content-Type`` names, if not UTF-8, as webob's
  ``Request.json`` (pecan's ``request.json``) decodes it: a body whose
  UTF-8 reading names a member's action may name an admin's in UTF-7
  (``"+ACIALAAi-..."`` spells ``","``).  The keys of both readings are
  judged; a body that is not one JSON object in its declared charset, or
  a charset Python cannot decode text with, is refused;
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

import codecs
import json
import re
from array import array
from itertools import accumulate, repeat
from operator import add, mul, sub

from tenancy_mw.core.bodies import MAX_DEPTH, BodyError
from tenancy_mw.core.paths import shorten
from tenancy_mw.cull.forms import UnreadableBody, has_body, read_body_once
from tenancy_mw.cull.rules import fold_action_key

__all__ = [
    "ACTION_BODY_LIMIT",
    "ACTION_KEYS_KEY",
    "MAX_CHARSETS",
    "MAX_CONTAINERS",
    "UNREADABLE_BODY_CODE",
    "body_action_keys",
    "declared_charsets",
    "json_object_keys",
]

#: environ key caching the body's folded top-level keys with the
#: ``wsgi.input`` they were read from: a second judge (after a strip, or a
#: second admin_cull) reuses them instead of reading the body again.
ACTION_KEYS_KEY = "tenancy.action_keys"

#: The error code of a body on a path with action-key rules that is not one readable JSON object.
UNREADABLE_BODY_CODE = "tenancy.unreadable-body"


#: The default bound of a body read for its action keys (the ``max_action_body_size``
#: option): oslo.middleware's ``sizelimit`` default, which nova's and cinder's
#: pipelines enforce before the filter anyway.  An action call's body is some
#: dozens of bytes; the bound keeps the worst body's decoding to milliseconds.
ACTION_BODY_LIMIT = 112 * 1024

#: The most charsets other than UTF-8 a body's ``Content-Type`` may name: each is one more reading of the body.
MAX_CHARSETS = 2

# A charset parameter, found as webob's detect_charset() finds it.
_CHARSET = re.compile(r";\s*charset=([^;]*)", re.IGNORECASE)

#: The most arrays and objects (counted as ``[`` and ``{`` characters, in
#: strings too) a body read for its action keys may hold: the decoder makes
#: each one, and the cycle collector walks them.  Over it, the body is refused.
MAX_CONTAINERS = 4096


def body_action_keys(environ: dict, limit: int = ACTION_BODY_LIMIT) -> frozenset[str]:
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
    data = _read(environ, limit)
    keys = json_object_keys(data, declared_charsets(environ.get("CONTENT_TYPE") or "")) if data else frozenset()
    environ[ACTION_KEYS_KEY] = (environ["wsgi.input"], keys)
    return keys


def _read(environ: dict, limit: int) -> bytes:
    """The whole body (:func:`~tenancy_mw.cull.forms.read_body_once`), its faults as this filter's refusals."""
    try:
        return read_body_once(environ, limit)
    except BodyError as exc:
        if exc.status == 413:
            raise UnreadableBody(
                413,
                "tenancy.body-too-large",
                "The request body is too large to check for its action here (at most %d bytes)." % limit,
            ) from None
        raise UnreadableBody(exc.status, UNREADABLE_BODY_CODE, exc.detail) from None


def declared_charsets(content_type: str) -> list[str]:
    """The charsets other than UTF-8 a ``Content-Type`` value names, as webob reads its ``charset`` parameter.

    Every ``charset`` parameter counts (webob takes the first; another
    reader may take the last), quotes and outer spaces dropped; UTF-8 by
    any of its names is left out, being read anyway.  More than
    :data:`MAX_CHARSETS` is :class:`~tenancy_mw.cull.forms.UnreadableBody` (400)::

        >>> declared_charsets('application/json; charset="UTF-7"'), declared_charsets("application/json; charset=utf8")
        (['UTF-7'], [])
    """
    if "charset" not in content_type.lower():
        return []
    found: list[str] = []
    for match in _CHARSET.finditer(content_type):
        charset = match.group(1).strip('"').strip()
        if charset and not _is_utf8(charset) and charset not in found:
            found.append(charset)
    if len(found) > MAX_CHARSETS:
        raise UnreadableBody(
            400,
            UNREADABLE_BODY_CODE,
            "The request body cannot be checked for its action: its Content-Type names %d charsets (%s), "
            "at most %d are read here." % (len(found), shorten(", ".join(found)), MAX_CHARSETS),
        )
    return found


def _is_utf8(charset: str) -> bool:
    try:
        return codecs.lookup(charset).name == "utf-8"
    except LookupError:
        return False


def json_object_keys(data: bytes, charsets: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The folded top-level keys of the JSON object *data*; else :class:`~tenancy_mw.cull.forms.UnreadableBody` (400).

    Decoded as Python's ``json.loads`` decodes bytes (UTF-8 with or without
    a BOM, UTF-16, UTF-32), control characters in strings allowed (a
    lenient parser's reading), and also in each of *charsets* (the body's
    declared ones, :func:`declared_charsets`): the keys of every reading
    count.  A key given twice is still one of the keys, whichever value a
    parser keeps::

        >>> sorted(json_object_keys(b'{"reboot": 1, "os-migrateLive": {}, "reboot": 2}'))
        ['os-migratelive', 'reboot']
        >>> sorted(json_object_keys('{"\\uff45vacuate": {}}'.encode("utf-16")))
        ['evacuate']
        >>> json_object_keys(b'[{"evacuate": {}}]')
        Traceback (most recent call last):
          ...
        tenancy_mw.cull.forms.UnreadableBody: The request body is a JSON array, not an object: ...
    """
    # The usual body, ASCII: json.detect_encoding() would say UTF-8 (no NUL
    # in its first bytes, no BOM), and the ASCII codec reads it the same.
    text = data.decode("ascii") if data.isascii() and b"\0" not in data else _text(data)
    keys = _text_keys(data, text)
    for charset in charsets:
        declared = _declared_text(data, charset)
        try:
            keys |= _text_keys(data, declared)
        except UnreadableBody as exc:
            raise UnreadableBody(
                exc.status, exc.code, "%s (read in its declared charset %r)" % (exc.detail, charset)
            ) from None
    return keys


def _declared_text(data: bytes, charset: str) -> str:
    """*data* decoded in *charset*, as webob decodes a body; :class:`UnreadableBody` when it cannot be."""
    try:
        return data.decode(charset)
    except LookupError:  # no such codec, or not a text one (base64)
        raise _unreadable(data, "its declared charset %r is not one text can be decoded from" % charset) from None
    except ValueError as exc:
        why = "it is not text in its declared charset %r (%s)" % (charset, shorten(str(exc)))
        raise _unreadable(data, why) from None


def _text_keys(data: bytes, text: str) -> frozenset[str]:
    """The folded top-level keys of the JSON object *text* (a reading of *data*); else :class:`UnreadableBody`."""
    containers = text.count("[") + text.count("{")
    if containers > MAX_CONTAINERS:
        raise _unreadable(
            data,
            "it holds %d brackets, more arrays and objects than the %d checked here" % (containers, MAX_CONTAINERS),
        )
    keys = _quick_keys(text)
    if isinstance(keys, _Failed):
        keys = _decoded_keys(data, text)
    # Only a body with more than MAX_DEPTH brackets can nest that deep (counted at C speed).
    if containers > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise _unreadable(data, "it is nested deeper than %d levels" % MAX_DEPTH)
    if keys is None:
        raise UnreadableBody(
            400,
            UNREADABLE_BODY_CODE,
            "The request body is a JSON %s, not an object: an action call's body is one object, "
            'as {"reboot": {"type": "SOFT"}}.' % _json_type(text),
        )
    return frozenset(fold_action_key(key) for key in keys)


def _quick_keys(text: str) -> list[str] | None | _Failed:
    """The top-level keys of the JSON object *text* (None for another value), scanned with no call back into Python.

    ``_FAILED`` when the C scanner fails: invalid JSON, nesting too deep for
    it, or a number too long for ``int()`` (over 4,300 digits; numbers are
    converted as ``json.loads`` converts them, at C speed, floats kept as
    text), and :func:`_decoded_keys` then tells which.  The same scanner as
    :meth:`json.JSONDecoder.decode`, and the same white space around the
    value (``[ \\t\\n\\r]``).  The value is freed before the return.
    """
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _SCAN(text, start)
    except (ValueError, StopIteration, RecursionError):
        return _FAILED
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return _FAILED  # more after the value
    keys = list(value) if type(value) is dict else None
    del value
    return keys


def _decoded_keys(data: bytes, text: str) -> list[str] | None:
    """:func:`_quick_keys` with numbers as their text; :class:`UnreadableBody` when *text* (of *data*) is not JSON."""
    try:
        # Numbers are left as their text: only keys are looked at, and a
        # 4,301-digit number cannot fail to convert.
        value = _DECODER.decode(text)
    except RecursionError:
        raise _unreadable(data, "it is nested deeper than %d levels" % MAX_DEPTH) from None
    except ValueError as exc:  # bad JSON
        raise _unreadable(data, "it is not valid JSON (%s)" % shorten(str(exc))) from None
    keys = list(value) if type(value) is dict else None
    del value
    return keys


def _text(data: bytes) -> str:
    """*data* as text, in the encoding ``json.loads`` would find; :class:`UnreadableBody` when it is none."""
    try:
        return data.decode(json.detect_encoding(data), "surrogatepass")
    except ValueError as exc:  # bytes that are not text in any encoding JSON allows
        raise _unreadable(data, "it is not valid JSON (%s)" % shorten(str(exc))) from None


# One decoder for every body (json.loads with options would build one per call).
_DECODER = json.JSONDecoder(strict=False, parse_int=str, parse_float=str, parse_constant=str)
# The C scanner of a decoder that calls back into no Python code: integers
# converted by the scanner itself (faster than as text), floats kept as
# their text (faster than converted).
_SCAN = json.JSONDecoder(strict=False, parse_float=str).scan_once  # type: ignore[attr-defined]
_WHITESPACE = " \t\n\r"


class _Failed:
    """What :func:`_quick_keys` gives when the scanner fails."""


_FAILED = _Failed()

# For _depth: every byte but brackets (deleted), brackets as one kind of
# pair, and those as steps of +1 and -1.
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_PAIRS = bytes.maketrans(b"[{]}", b"(())")
_STEPS = bytes.maketrans(b"()", b"\x01\xff")


def _depth(text: str) -> int:
    """How deep the arrays and objects of the valid JSON *text* nest.

    Worked out on the text in C-speed passes (a walk of the parsed value
    costs a Python step per value, some 200 ms on a hostile megabyte, and
    so does a regular expression matching every string): the text outside
    strings (split at the quotes, once the escapes that hold a backslash
    or a quote are dropped: valid JSON has them in strings only), then its
    brackets as one kind of pair (:func:`_bracket_depth`).
    """
    if '"' in text:
        if "\\" in text:
            text = text.replace("\\\\", "").replace('\\"', "")
        text = "".join(text.split('"')[::2])
    # Outside strings, valid JSON is ASCII.
    return _bracket_depth(text.encode("ascii").translate(_PAIRS, _NOT_BRACKETS))


def _bracket_depth(brackets: bytes) -> int:
    """How deep the balanced pairs of ``(`` and ``)`` in *brackets* nest.

    Removing every innermost pair takes one level off every pair: passes
    do so while they shrink the text by a quarter at least (so they cost
    a few passes' time in all).  What is left is cut at its valleys
    (``)(``) into mountains, ``(`` * a then ``)`` * b, whose peaks the
    running sum of the mountains' rises and falls gives at C speed; or,
    when there are many mountains, the running sum of every step.
    """
    levels = 0
    while True:
        rest = brackets.replace(b"()", b"")
        if not rest:
            return levels + 1 if brackets else levels
        shrunk = len(rest) * 4 <= len(brackets) * 3
        brackets = rest
        levels += 1
        if not shrunk:
            break
    if brackets.count(b")(") * 16 < len(brackets):
        mountains = brackets.split(b")(")
        rises = list(map(bytes.count, mountains, repeat(b"(")))
        # A mountain's net: its rises less its falls; the valley between two is -1 then +1.
        nets = map(sub, map(mul, rises, repeat(2)), map(len, mountains))
        return levels + max(map(add, accumulate(nets, initial=0), rises))
    return levels + max(accumulate(array("b", brackets.translate(_STEPS))))


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
