"""Finding what else a request could be taken for: method overrides and media-type versions.

Pure helpers of the ``admin_cull`` filter; no WSGI machinery.  Each works
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
    A part whose ``Content-Disposition`` names it ``_method`` (quoted or
    not, percent-encoded or not, ``name*=`` included, any case); its value
    is the part's content.

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
from urllib.parse import unquote_to_bytes

__all__ = [
    "MAX_CANDIDATES",
    "MAX_VERSIONS",
    "TooManyCandidates",
    "media_type_versions",
    "multipart_method_overrides",
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
# lower case), so "%5Fm%65thod" is found as "_method".  Replacing only these,
# not decoding the whole body, keeps the pass in C; a value spelled with other
# escapes is decoded on its own once found.
_KEY_ESCAPES = (
    (b"%5f", b"_"),
    (b"%6d", b"m"), (b"%4d", b"m"),
    (b"%65", b"e"), (b"%45", b"e"),
    (b"%74", b"t"), (b"%54", b"t"),
    (b"%68", b"h"), (b"%48", b"h"),
    (b"%6f", b"o"), (b"%4f", b"o"),
    (b"%64", b"d"), (b"%44", b"d"),
)  # fmt: skip
# White space, raw or escaped, dropped from url-encoded keys (webob and
# Django strip nothing, but a lenient reader might).
_SPACE_ESCAPES = (b"%20", b"%09", b"%0a", b"%0d", b"%0b", b"%0c")
_SPACE_BYTES = b" +\t\r\n\x0b\x0c"
_SEPARATORS = b"&;"


class TooManyCandidates(ValueError):
    """More places to check than a request may ask for; the message says what."""


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


def _normalise_keys(data: bytes) -> bytes:
    """*data* lower-cased, with the escapes of ``_method``'s letters decoded."""
    low = data.lower()
    if b"%" in low:
        for escape, letter in _KEY_ESCAPES:
            if escape in low:
                low = low.replace(escape, letter)
    return low


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
    text = _normalise_keys(data)
    if KEY not in text:
        return set()
    if b"%" in text:
        for escape in _SPACE_ESCAPES:
            if escape in text:
                text = text.replace(escape, b"")
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


_DISPOSITION_NAME = re.compile(rb";\s*name\*?\s*=\s*(\"[^\"]*\"|[^;\r\n]*)")


def _line_bounds(text: bytes, index: int) -> tuple[int, int]:
    start = text.rfind(b"\n", 0, index) + 1
    end = text.find(b"\n", index)
    return start, (len(text) if end == -1 else end)


def multipart_method_overrides(data: bytes, boundary: bytes | None = None) -> set[str]:
    """The method names of every ``_method`` part of a multipart form *data*.

    Only a ``Content-Disposition`` line can name a part, so each mention of
    ``_method`` is looked at on its own line; the value is the part's
    content, up to the next boundary line.  Raises :class:`TooManyCandidates`
    as :func:`urlencoded_method_overrides` does, and :class:`ValueError`
    when a part named ``_method`` has no end of headers or no content end.

    Example::

        >>> body = b'--zz\\r\\nContent-Disposition: form-data; name="_method"\\r\\n\\r\\nDELETE\\r\\n--zz--\\r\\n'
        >>> sorted(multipart_method_overrides(body, b"zz"))
        ['DELETE']
    """
    text = _normalise_keys(data)
    if KEY not in text or not _candidates(text, "multipart body"):
        return set()
    values = []
    # Everything before this offset was already looked at (a line, or a
    # whole part): each byte is scanned a bounded number of times.
    covered = 0
    start = text.find(KEY)
    while start != -1:
        if start < covered:
            start = text.find(KEY, covered)
            continue
        line_start, line_end = _line_bounds(text, start)
        start = text.find(KEY, start + len(KEY))
        covered = line_end
        line = text[line_start:line_end]
        if not line.lstrip().startswith(b"content-disposition"):
            continue
        names = [m.group(1) for m in _DISPOSITION_NAME.finditer(line)]
        if not any(_is_method_name(name) for name in names):
            continue
        # The part's content: after the blank line ending its headers, up to the next boundary line.
        header_end = [i for i in (text.find(b"\r\n\r\n", line_end - 1), text.find(b"\n\n", line_end)) if i != -1]
        if not header_end:
            raise ValueError("the part named _method has no end of headers")
        content_start = min(header_end)
        content_start += 4 if text.startswith(b"\r\n\r\n", content_start) else 2
        marker = b"\n--" + boundary.lower() if boundary else b"\n--"
        content_end = text.find(marker, content_start)
        if content_end == -1:
            raise ValueError("the part named _method does not end")
        covered = content_end
        if content_end - content_start > _MAX_VALUE:
            values.append("<long value>")
        else:
            values.append(text[content_start:content_end].decode("latin-1").strip())
    return override_names(values)


def _is_method_name(raw: bytes) -> bool:
    name = raw.strip().strip(b'"').strip()
    if b"''" in name:  # RFC 2231: charset'language'value
        name = name.split(b"''", 1)[1]
    return name.translate(None, _SPACE_BYTES) == KEY


# The parameter name may be quoted too: nova's header parser unquotes names.
_VERSION_PARAM = re.compile(r";\s*(?:version|\"version\")\s*=\s*(\"[^\"]*\"|[^;,]*)", re.IGNORECASE)


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
        mentions = header.lower().count("version")
        if not mentions:
            continue
        if mentions > MAX_CANDIDATES:
            raise TooManyCandidates("A media type header mentions version %d times." % mentions)
        for match in _VERSION_PARAM.finditer(header):
            value = match.group(1).strip().strip('"').strip()
            segment = ("v" + value).split("/", 1)[0]
            if segment not in found:
                found.append(segment)
                if len(found) > MAX_VERSIONS:
                    raise TooManyCandidates(
                        "The request names more than %d API versions in its media types." % MAX_VERSIONS
                    )
    return tuple(found)
