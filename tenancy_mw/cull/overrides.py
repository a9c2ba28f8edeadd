"""Finding what else a request could be taken for: method overrides and media-type versions.

Pure helpers of the ``admin_cull`` filter; no WSGI machinery (reading a
form body from a request is :mod:`tenancy_mw.cull.forms`'s job).  Each works
in one linear pass of C-speed byte operations (``lower``, ``replace``,
``translate``, ``count``, ``find``) over its input, plus Python work on at
most :data:`MAX_CANDIDATES` places, so no body or header a client sends can
make them expensive: a 1 MiB form body costs about a millisecond.

``_method`` in a url-encoded form or query (:func:`urlencoded_method_overrides`)
    A field whose key, percent-decoded once, with ``+`` and white space
    dropped and compared ignoring case, is ``_method``.  Fields are split
    at ``&`` and at ``;`` (older parsers split there).  Dropping white
    space *inside* a key too (``_me thod``) reads more keys as ``_method``
    than any framework does; it is never fewer.

``_method`` in a multipart form (:func:`multipart_method_overrides`)
    Any part that mentions ``_method`` (as its name, quoted or not, any
    case, or anywhere else); its value is read as the last line before
    the part's delimiter line, whatever a parser takes for the end of the
    part's headers (folded lines, bare CR, a line of white space), so no
    way of writing the headers hides it.  A name spelling ``_method`` with
    percent-escapes (``name*=utf-8''%5Fmethod``) is refused, not guessed.

The override headers (:func:`override_header_values`)
    ``X-HTTP-Method-Override``, ``X-HTTP-Method`` and ``X-Method-Override``
    (:data:`OVERRIDE_HEADERS`), in every ``environ`` spelling a framework
    reads as them; :func:`override_names` reads the methods they name.

Versions named by a media type (:func:`media_type_versions`)
    ``version=`` parameters of ``Accept`` and ``Content-Type``, which a
    version-routing urlmap (nova's, manila's) uses to pick the API version
    when the path names none.

More than :data:`MAX_CANDIDATES` places that could be a ``_method`` field,
or more than :data:`MAX_VERSIONS` versions, raise :class:`TooManyCandidates`:
no real client sends that many, and judging them all would cost more.

Example::

    >>> sorted(urlencoded_method_overrides(b"name=web1&%5Fmethod=delete"))
    ['DELETE']
    >>> media_type_versions("application/json;version=2.1", "")
    ('v2.1',)
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_to_bytes

from tenancy_mw.core.paths import shorten

__all__ = [
    "MAX_CANDIDATES",
    "MAX_ESCAPES",
    "MAX_VERSIONS",
    "OVERRIDE_HEADERS",
    "TooManyCandidates",
    "media_type_versions",
    "multipart_boundary",
    "multipart_method_overrides",
    "override_header_values",
    "override_names",
    "urlencoded_method_overrides",
]

#: Most places (mentions of ``_method``) one body or query is checked at.
MAX_CANDIDATES = 64
#: Most distinct media-type versions one request is judged under.
MAX_VERSIONS = 8
#: A ``_method`` value longer than this names no method a router knows.
_MAX_VALUE = 256

KEY = b"_method"

# Escapes that decode to a letter of "_method" (after lower(): hex digits in
# lower case), so "%5Fm%65thod" is found as "_method", and escapes of white
# space, dropped from keys like raw white space (webob and Django strip
# nothing, but a lenient reader might).  They are replaced in one pass over
# the pieces between percent signs; a value spelled with other escapes is
# decoded on its own once found.
_KEY_LETTERS = {
    b"%5f": b"_",
    b"%6d": b"m", b"%4d": b"m",
    b"%65": b"e", b"%45": b"e",
    b"%74": b"t", b"%54": b"t",
    b"%68": b"h", b"%48": b"h",
    b"%6f": b"o", b"%4f": b"o",
    b"%64": b"d", b"%44": b"d",
    b"%20": b"", b"%09": b"", b"%0a": b"", b"%0d": b"", b"%0b": b"", b"%0c": b"",
}  # fmt: skip
# The same, keyed by the two hex digits after the "%".
_KEY_HEX = {escape[1:]: letter for escape, letter in _KEY_LETTERS.items()}
#: Most percent signs one url-encoded body or query is decoded at: each
#: costs a step of Python, so a body of 1 MiB of ``%`` would cost tens of
#: milliseconds.  Form encoders escape only bytes outside letters, digits
#: and ``*-._``: 1024 escapes is some 340 non-ASCII characters, and only
#: requests on a path that is admin for another method (``POST
#: /v2.1/{tenant}``, a tenant read with a query) are scanned, where no
#: public call sends a form at all.
MAX_ESCAPES = 1024
_SPACE_BYTES = b" +\t\r\n\x0b\x0c"
_SEPARATORS = b"&;"


#: environ keys of the method-override headers that are judged (or refused).
OVERRIDE_HEADERS = ("HTTP_X_HTTP_METHOD_OVERRIDE", "HTTP_X_HTTP_METHOD", "HTTP_X_METHOD_OVERRIDE")


class TooManyCandidates(ValueError):
    """More places to check than a request may ask for; the message says what."""


def override_header_values(environ: dict) -> list:
    """The values of the override headers, in every ``environ`` spelling a framework reads as them.

    A conforming server writes ``HTTP_X_HTTP_METHOD_OVERRIDE`` only, but
    Django's ``request.headers`` also reads ``HTTP_X-HTTP-METHOD-OVERRIDE``
    or ``HTTP_x_http_method_override`` as that header (as ``tenant_path``'s
    ``remove_header`` says for the tenant header).  One pass over the
    joined key names finds whether any other spelling is there.

    Example::

        >>> override_header_values({"REQUEST_METHOD": "POST", "HTTP_x-http-method": "DELETE"})
        ['DELETE']
    """
    try:
        names: str | None = "\n\n".join(environ).upper()
    except TypeError:  # a key that is not a string: look at each
        names = None
    # Every spelling of an override header holds METHOD once upper-cased:
    # when no key but REQUEST_METHOD does, there is none (the usual case,
    # found by one C-speed count).
    if names is not None and names.count("METHOD") == ("REQUEST_METHOD" in environ):
        return []
    values = [environ[key] for key in OVERRIDE_HEADERS if key in environ]
    odd = names is None
    if names is not None and names.count("METHOD") > len(values) + ("REQUEST_METHOD" in environ):
        # "\n\n" between names: two spellings side by side still count twice.
        spaced = "\n\n%s\n\n" % names.replace("-", "_")
        odd = any(spaced.count("\n%s\n" % key) > (key in environ) for key in OVERRIDE_HEADERS)
    if odd:
        values += [
            value
            for name, value in environ.items()
            if isinstance(name, str)
            and name not in OVERRIDE_HEADERS
            and name.upper().replace("-", "_") in OVERRIDE_HEADERS
        ]
    return values


def override_names(values) -> set[str]:
    """Method names in override values: comma lists split, upper-cased; an empty one is ``<empty>``.

    A value naming more than :data:`MAX_CANDIDATES` methods raises
    :class:`TooManyCandidates`.
    """
    named = set()
    for value in values:
        value = str(value)
        if value.count(",") >= MAX_CANDIDATES:
            raise TooManyCandidates("A method override names more than %d methods." % MAX_CANDIDATES)
        parts = {v.strip().upper() for v in value.split(",") if v.strip()}
        named |= parts or {"<empty>"}
    return named


def _decode_value(raw: bytes) -> str:
    if len(raw) > _MAX_VALUE:
        return "<long value>"
    return unquote_to_bytes(raw).decode("latin-1")


def _normalise_keys(data: bytes, what: str) -> bytes:
    """*data* lower-cased, the escapes of ``_method``'s letters decoded, those of white space dropped.

    Raises :class:`TooManyCandidates` beyond :data:`MAX_ESCAPES` percent signs.
    """
    low = data.lower()
    at = low.find(b"%")
    if at == -1:
        return low
    # One Python step per (bounded) "%"; the runs between them are found by
    # bytes.find and joined as memoryview slices, so the body is copied
    # once, by the join, however large the runs are.
    view = memoryview(low)
    decoded: list = []
    done = 0
    escapes = 0
    while at != -1:
        escapes += 1
        if escapes > MAX_ESCAPES:
            raise TooManyCandidates(
                "The %s holds %d percent-escapes; at most %d are decoded here to look for _method."
                % (what, low.count(b"%"), MAX_ESCAPES)
            )
        letter = _KEY_HEX.get(low[at + 1 : at + 3])
        if letter is not None:
            decoded += (view[done:at], letter)
            done = at + 3
        at = low.find(b"%", at + 1)
    if not decoded:
        return low
    decoded.append(view[done:])
    return b"".join(decoded)


def _candidates(text: bytes, what: str) -> int:
    count = text.count(KEY)
    if count > MAX_CANDIDATES:
        raise TooManyCandidates(
            "The %s mentions _method %d times; at most %d are checked here." % (what, count, MAX_CANDIDATES)
        )
    return count


def urlencoded_method_overrides(data: bytes, what: str = "form body") -> set[str]:
    """The method names of every ``_method`` field of a url-encoded form or query *data*.

    Raises :class:`TooManyCandidates` when *data* mentions ``_method`` more
    than :data:`MAX_CANDIDATES` times.

    Example::

        >>> sorted(urlencoded_method_overrides(b"a=1;+_METHOD+=put,patch"))
        ['PATCH', 'PUT']
        >>> urlencoded_method_overrides(b"description=set+_method+later")
        set()
    """
    text = _normalise_keys(data, what)
    if KEY not in text:
        return set()
    text = text.translate(None, _SPACE_BYTES)
    if not _candidates(text, what):
        return set()
    values = []
    start = text.find(KEY)
    end = len(text)
    while start != -1:
        after = start + len(KEY)
        if (start == 0 or text[start - 1] in _SEPARATORS) and (after == end or text[after] in b"=&;"):
            if after < end and text[after] == 0x3D:  # "="
                stop = after + 1
                while stop < end and text[stop] not in _SEPARATORS:
                    stop += 1
                    if stop - after > _MAX_VALUE + 1:
                        break
                values.append(_decode_value(text[after + 1 : stop]))
            else:
                values.append("")
        start = text.find(KEY, after)
    return override_names(values)


def multipart_method_overrides(data: bytes, boundary: bytes | None = None) -> set[str]:
    """The method names every ``_method`` part of a multipart form *data* could carry.

    Nothing about the part's headers is parsed, so no reading of them
    (folded lines, bare CR line ends, a header block ended by a line of
    white space, which webob's ``cgi`` parser accepts) can hide a value:
    for each mention of ``_method`` (as a part name, or anywhere), the part
    ends at the next delimiter line (``--`` *boundary*, alone on its line
    but for trailing white space, compared case-sensitively, as ``cgi``
    does) or, when the header block's blank line comes after that line
    (``cgi`` reads header lines up to a blank one, delimiters included),
    at the first delimiter line after the blank one; the value a parser
    could read is the last line before either end.  A method name is one
    line, so whatever a parser takes for the end of the part's headers, a
    value naming a method is that line.

    Raises :class:`TooManyCandidates` as :func:`urlencoded_method_overrides`
    does, and :class:`ValueError` when a part mentioning ``_method`` does
    not end, or a part name spells ``_method`` with percent-escapes (no
    ``_method`` reader decodes them; a body using them is refused rather
    than judged on a guess).

    Example::

        >>> body = b'--zz\\r\\nContent-Disposition: form-data; name="_method"\\r\\n\\r\\nDELETE\\r\\n--zz--\\r\\n'
        >>> sorted(multipart_method_overrides(body, b"zz"))
        ['DELETE']
    """
    low = data.lower()
    mentions = _candidates(low, "multipart body")
    _refuse_escaped_names(low)
    if not mentions:
        return set()
    delimiter = b"--" + boundary if boundary else None
    values = []
    blank: Any = None  # the last blank line found (reused while it lies ahead), False once none is left
    start = low.find(KEY)
    while start != -1:
        after = start + len(KEY)
        ends, blank = _part_ends(data, after, delimiter, blank)
        values += [_last_line(low, after, end) for end in ends]
        # Everything before the furthest end belongs to a part already
        # looked at: each byte is scanned a bounded number of times.
        start = low.find(KEY, max(ends))
    return override_names(values)


# RFC 2046 boundary characters; a boundary outside them (quotes, backslashes)
# is read differently by different parsers, so it is refused, not guessed.
_BOUNDARY_CHARS = re.compile(r"[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]")


def multipart_boundary(content_type: str) -> bytes | None:
    """The ``boundary`` parameter of a multipart content type, or ``None``; one linear pass.

    Raises :class:`ValueError` when the content type names ``boundary``
    more than once (parsers differ on which one wins) or its value is not
    made of RFC 2046 boundary characters.

    Example::

        >>> multipart_boundary('multipart/form-data; boundary="zz"')
        b'zz'
    """
    lowered = content_type.lower()
    mentions = lowered.count("boundary")
    if not mentions:
        return None
    if mentions > 1:
        raise ValueError("the Content-Type names a multipart boundary more than once")
    rest = content_type[lowered.find("boundary") + len("boundary") :].lstrip()
    if not rest.startswith("="):
        return None
    value = rest[1:].split(";", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not _BOUNDARY_CHARS.fullmatch(value):
        raise ValueError("the multipart boundary %r is not made of RFC 2046 boundary characters" % shorten(value))
    return value.encode("latin-1")


# A line holding nothing but white space: where cgi ends a part's headers.
_BLANK_LINE = re.compile(rb"\n[ \t\r\x0b\x0c]*\n")


def _part_ends(data: bytes, after: int, delimiter: bytes | None, blank: Any) -> tuple[list[int], Any]:
    """Where the part holding the mention ending at *after* ends, as each parser could read it.

    At the first delimiter line (a parser that splits at boundaries first,
    as Django's), and, when the part's header block runs past that line, at
    the first delimiter after the block's blank line (cgi reads header lines
    up to a blank one whatever they hold); both values are judged.  *blank*
    is the last blank line found (``None`` before the first search,
    ``False`` once none is left); it is returned for the next mention, so
    the body is searched for blank lines once.  Raises :class:`ValueError`
    when the part does not end.
    """
    ends = [_part_end(data, after, delimiter)]
    if blank is not False and (blank is None or blank.start() < after):
        blank = _BLANK_LINE.search(data, after) or False
    if blank and ends[0] != -1 and blank.start() >= ends[0]:
        ends.append(_part_end(data, blank.end() - 1, delimiter))
    if -1 in ends:
        raise ValueError("the part mentioning _method does not end")
    return ends, blank


def _last_line(low: bytes, start: int, end: int) -> str:
    """The last non-blank line of ``low[start:end]``, stripped: where a one-line value must be."""
    window_start = max(start, end - _MAX_VALUE - 2)
    tail = low[window_start:end].rstrip()
    cut = max(tail.rfind(b"\n"), tail.rfind(b"\r")) + 1
    if cut == 0 and window_start > start:
        return "<long value>"
    return tail[cut:].strip().decode("latin-1")


_ESCAPED_KEY_STARTS = (re.compile(rb"%5f"), re.compile(rb"_%"))


def _refuse_escaped_names(low: bytes) -> None:
    """Raise :class:`ValueError` if the body spells ``_method`` with percent-escapes anywhere.

    No multipart parser that reads ``_method`` decodes a plain part name,
    and Django decodes RFC 2231 ones (``name*=utf-8''%5Fmethod``): such a
    body is refused rather than judged on a guess.  Every such spelling
    starts with ``%5f`` or ``_%``; only those places are looked at (at most
    :data:`MAX_CANDIDATES` of each), not the whole body, which may hold any
    number of ``%`` bytes (a binary upload).
    """
    if b"%" not in low:
        return
    for start in _ESCAPED_KEY_STARTS:
        count = low.count(start.pattern)
        if count > MAX_CANDIDATES:
            raise TooManyCandidates(
                "The multipart body holds %r %d times; at most %d are checked here."
                % (start.pattern, count, MAX_CANDIDATES)
            )
        # Regular-expression searches: bytes.find is several times slower on some bodies.
        for found in start.finditer(low) if count else ():
            index = found.start()
            if _normalise_keys(low[index : index + 64], "part name").startswith(KEY):
                raise ValueError("a part name spells _method with percent-escapes")


def _part_end(data: bytes, start: int, delimiter: bytes | None) -> int:
    """Offset of the line break before the first delimiter line after *start*, or -1.

    A delimiter line is ``--boundary`` or ``--boundary--`` and trailing
    white space (``cgi``'s rule); without a boundary, any line starting
    with ``--``.  One regular-expression search: its literal prefix is
    found faster than ``bytes.find`` finds a pattern starting with a line
    break, whatever the body holds.
    """
    if delimiter is None:
        pattern = re.compile(rb"\n--")
    else:
        pattern = re.compile(re.escape(b"\n" + delimiter) + rb"(?:--)?[ \t\r\x0b\x0c]*(?:\n|\Z)")
    match = pattern.search(data, start)
    return -1 if match is None else match.start()


# What follows a mention of "version" in a media type parameter: an optional
# closing quote of the name (nova's header parser unquotes names), "=", the
# value.  Values are read at most 80 characters long: a urlmap mount is a
# short name, and the bound keeps each mention's work small.
_VERSION_VALUE = re.compile(r'"?\s*=\s*("[^"]{0,80}"?|[^;,"]{0,80})')


def media_type_versions(accept: str, content_type: str) -> tuple[str, ...]:
    """The version segments (``v`` + value) that ``version=`` media-type parameters name.

    Every ``version`` parameter of every media range counts, in ``Accept``
    and ``Content-Type``, in any case, its name or value quoted or not; a value is cut at its first ``/``
    (nova's urlmap matches ``/v`` + value as a path prefix).  Raises
    :class:`TooManyCandidates` beyond :data:`MAX_VERSIONS` distinct values.

    Example::

        >>> media_type_versions('application/json;q=0.8;version="2.1", text/plain;Version=3', "")
        ('v2.1', 'v3')
    """
    found = []
    for header in (accept, content_type):
        if not header:
            continue
        lowered = header.lower()
        mentions = lowered.count("version")
        if not mentions:
            continue
        if mentions > MAX_CANDIDATES:
            raise TooManyCandidates("A media type header mentions version %d times." % mentions)
        # Only the (at most MAX_CANDIDATES) mentions are looked at: a regular
        # expression tried at every ";" of a 256 KiB header costs milliseconds.
        index = lowered.find("version")
        while index != -1:
            index += len("version")
            match = _VERSION_VALUE.match(header, index)
            if match is not None:
                value = match.group(1).strip().strip('"').strip()
                segment = ("v" + value).split("/", 1)[0] if value else ""
                if segment and segment not in found:
                    found.append(segment)
                    if len(found) > MAX_VERSIONS:
                        raise TooManyCandidates(
                            "The request names more than %d API versions in its media types." % MAX_VERSIONS
                        )
            index = lowered.find("version", index)
    return tuple(found)
