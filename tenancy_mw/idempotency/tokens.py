"""Client tokens: read them from the request headers and check them.

Pure helpers, no WSGI machinery.

A token arrives in ``X-Client-Token`` (the idempotency spec) or
``Idempotency-Key`` (IETF draft "The Idempotency-Key HTTP Header Field",
whose value is a structured-field String, sent quoted).  Both forms are
accepted in either header:

- a quoted structured-field String, ``"8e03978e-40d5"`` (RFC 8941: inside
  the quotes only printable ASCII, with ``\\"`` and ``\\\\`` as the only
  escapes);
- a bare token, ``8e03978e-40d5``.

The token (after unquoting) must be 1 to 255 characters of printable ASCII
(``0x20`` to ``0x7E``), as Stripe's keys; anything else is refused
(:class:`InvalidToken`, answered ``400``).

Example::

    >>> parse_token('"abc-123"')
    'abc-123'
    >>> parse_token('abc-123')
    'abc-123'
    >>> parse_token('')
    Traceback (most recent call last):
      ...
    tenancy_mw.idempotency.tokens.InvalidToken: ...
"""

from __future__ import annotations

import re

from tenancy_mw.core.paths import Refused, shorten

__all__ = ["MAX_TOKEN_LENGTH", "InvalidToken", "parse_token"]

#: The longest token, in characters (Stripe's limit; AWS allows 64).
MAX_TOKEN_LENGTH = 255

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


class InvalidToken(Refused):
    """A token header value that breaks a rule (``rule`` names it)."""


def _unquote_sf_string(value: str, header: str) -> str:
    """The content of an RFC 8941 String ``"..."``; raise InvalidToken when malformed."""
    out = []
    index = 1
    end = len(value)
    while index < end:
        char = value[index]
        if char == "\\":
            if index + 1 >= end or value[index + 1] not in '"\\':
                raise InvalidToken(
                    "bad-quoting",
                    "%s %r is not a valid quoted string: only \\\" and \\\\ may be escaped."
                    % (header, shorten(value)),
                    value,
                )
            out.append(value[index + 1])
            index += 2
            continue
        if char == '"':
            if index != end - 1:
                raise InvalidToken(
                    "bad-quoting",
                    "%s %r has text after its closing quote; send one quoted string." % (header, shorten(value)),
                    value,
                )
            return "".join(out)
        out.append(char)
        index += 1
    raise InvalidToken(
        "bad-quoting", "%s %r has no closing quote." % (header, shorten(value)), value
    )


def parse_token(value: str, header: str = "X-Client-Token") -> str:
    """The token in header *value* (quoted or bare), or raise :class:`InvalidToken`.

    *value* is the header as a WSGI server gives it (latin-1 text of the
    bytes sent); surrounding spaces are ignored, as HTTP does.  *header*
    names the header in error messages.
    """
    value = value.strip(" \t")
    token = _unquote_sf_string(value, header) if value.startswith('"') else value
    if not token:
        raise InvalidToken("empty", "%s is empty; send 1 to %d characters." % (header, MAX_TOKEN_LENGTH), value)
    if len(token) > MAX_TOKEN_LENGTH:
        raise InvalidToken(
            "too-long",
            "%s %r is %d characters long; at most %d are allowed."
            % (header, shorten(token), len(token), MAX_TOKEN_LENGTH),
            value,
        )
    if not _PRINTABLE_ASCII.fullmatch(token):
        raise InvalidToken(
            "not-printable-ascii",
            "%s %r holds a character that is not printable ASCII (0x20 to 0x7E)."
            % (header, shorten(token.encode("latin-1", "replace").decode("ascii", "backslashreplace"))),
            value,
        )
    return token
