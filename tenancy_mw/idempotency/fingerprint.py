"""The fingerprint of a request: what makes a retry "the same request".

Pure helpers, no WSGI machinery.

Two requests with one token are the same request when their fingerprints
are equal.  The fingerprint is a SHA-256 over:

- the method;
- the canonical path (:mod:`tenancy_mw.core.paths`), so ``/v2.1/a%20b/servers``
  and ``/v2.1/a b/servers`` are one path;
- the canonical query string: parameters decoded, then sorted by name
  (a stable sort: repeated parameters keep their order, which may matter
  to the app), then encoded again (:func:`canonical_query`);
- the media type (``Content-Type``, :func:`canonical_media_type`): the
  same bytes as ``application/merge-patch+json`` and as
  ``application/json-patch+json``, or as a form and as plain text, are
  different requests;
- the body: a JSON body (``application/json`` or ``*/*+json``) in
  canonical form, keys sorted and no white space, so key order and
  spacing do not matter (:func:`canonical_body_json`); any other body, or a
  JSON body that does not parse, repeats a key, or holds a number that
  a float does not keep exactly (``1e400``, ``0.10000000000000000001``)
  or ``NaN``/``Infinity``, as its bytes.

Example::

    >>> a = fingerprint("POST", "/v2.1/acme/servers", "", b'{"server": {"name": "a", "flavor": 1}}',
    ...                 "application/json")
    >>> b = fingerprint("POST", "/v2.1/acme/servers", "", b'{"server":{"flavor":1,"name":"a"}}',
    ...                 "application/json; charset=utf-8")
    >>> a == b
    True
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from urllib.parse import quote_from_bytes, unquote_to_bytes

from tenancy_mw.core.deprecation import renamed_names

__all__ = ["canonical_body_json", "canonical_media_type", "canonical_query", "fingerprint", "is_json_media_type"]


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        # {"a": 1, "a": 2}: parsers disagree on which one wins, so the body
        # is not canonicalised (its bytes are hashed instead).
        raise _DuplicateKey("repeated key")
    return result


def _exact_float(literal: str) -> float:
    number = float(literal)
    # 1e400 and 2e400 both read as inf, 0.1 and 0.10000000000000000001 as
    # 0.1: a body whose numbers a float does not keep is hashed as bytes,
    # so two different numbers never canonicalise alike.
    if not math.isfinite(number) or Decimal(literal) != Decimal(repr(number)):
        raise ValueError("number %r is not kept exactly by a float" % literal[:40])
    return number


def _not_json(constant: str):
    raise ValueError("%s is not JSON" % constant)


# Built once: json.loads()/dumps() with options build new ones on every call.
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_float=_exact_float, parse_constant=_not_json)
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_body_json(body: bytes) -> bytes | None:
    """The request body *body* in canonical JSON form, or ``None`` if it is not one unambiguous JSON document.

    Was ``canonical_json``, which still works for one release with a
    :class:`DeprecationWarning`.

    Example::

        >>> canonical_body_json(b'{ "b": [1, 2.0], "a": "\\\\u00e9" }')
        b'{"a":"\\xc3\\xa9","b":[1,2.0]}'
        >>> canonical_body_json(b'{"a": 1, "a": 2}') is None
        True
    """
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        return _CANONICAL_ENCODER.encode(_DECODER.decode(text)).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError, UnicodeError):
        return None


# The old name of canonical_body_json, for one release.
__getattr__ = renamed_names(__name__, {"canonical_json": "canonical_body_json"}, globals())


def canonical_query(query: str) -> str:
    """The query string *query* (as in ``QUERY_STRING``) in canonical form.

    Example::

        >>> canonical_query("b=2&a=%7e&a=1&c")
        'a=~&a=1&b=2&c='
    """
    if not query:
        return ""
    pairs = []
    for part in query.encode("latin-1", "surrogateescape").split(b"&"):
        if not part:
            continue
        name, _, value = part.partition(b"=")
        pairs.append((unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" "))))
    pairs.sort(key=lambda pair: pair[0])
    return "&".join(quote_from_bytes(name, safe="") + "=" + quote_from_bytes(value, safe="") for name, value in pairs)


def canonical_media_type(content_type: str | None) -> str:
    """The part of *content_type* that gives a body its meaning, in canonical form.

    JSON media types (UTF-8 by definition) keep only the type; others keep
    their parameters (a ``charset`` changes what text bytes say), names
    lower-cased and spaces dropped.

    Example::

        >>> canonical_media_type("Application/JSON; charset=UTF-8")
        'application/json'
        >>> canonical_media_type("text/plain ; Charset=latin-1")
        'text/plain;charset=latin-1'
    """
    if not content_type:
        return ""
    media_type, *params = content_type.split(";")
    media_type = media_type.strip().lower()
    if is_json_media_type(media_type):
        return media_type
    parts = [media_type]
    for param in params:
        name, eq, value = param.strip().partition("=")
        if name.strip():
            parts.append(name.strip().lower() + eq + value.strip())
    return ";".join(parts)


def is_json_media_type(content_type: str | None) -> bool:
    """True for ``application/json`` and ``type/x+json`` (parameters ignored)."""
    if not content_type:
        return False
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def fingerprint(method: str, path: str, query: str, body: bytes, content_type: str | None = None) -> str:
    """The hex SHA-256 fingerprint of a request (see the module documentation).

    :param path: the canonical path, as ``str(canonical_path(environ))``.
    :param query: the raw query string (``QUERY_STRING``).
    :param content_type: the request's ``Content-Type``; JSON bodies are canonicalised.
    """
    canonical_body = canonical_body_json(body) if body and is_json_media_type(content_type) else None
    kind = b"json" if canonical_body is not None else b"bytes"
    digest = hashlib.sha256()
    for part in (
        method.encode("latin-1", "replace"),
        path.encode("utf-8", "surrogatepass"),
        canonical_query(query).encode("ascii"),
        canonical_media_type(content_type).encode("latin-1", "replace"),
        kind,
        hashlib.sha256(canonical_body if canonical_body is not None else body).digest(),
    ):
        # Length-prefixed, so no two different requests concatenate alike.
        digest.update(b"%d:" % len(part))
        digest.update(part)
    return digest.hexdigest()
