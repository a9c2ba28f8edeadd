"""The one canonical form of a request path that every tenancy_mw filter
decides on.

Filters that disagree about what a path means can be played against each
other (one filter sees ``%31`` and another ``1``; one sees ``/a/../b`` and the
router sees ``/b``).  So the path is put into canonical form once, by the
rules below, and every filter matches on that form.

The rules, in order:

1. **Source.**  The raw request target as the client sent it, from
   ``RAW_URI`` (gunicorn) or ``REQUEST_URI`` (uWSGI, mod_wsgi, waitress),
   is used when its decoded form agrees with ``SCRIPT_NAME + PATH_INFO``.
   Otherwise (no raw target, or a filter earlier in the pipeline rewrote
   the path) ``SCRIPT_NAME + PATH_INFO`` is used; it is already
   percent-decoded, so an encoded slash (``%2F``) can no longer be told from
   a real one there.
2. **Request target forms.**  An absolute-form target
   (``http://host/v2.1/x``) is reduced to its path; the query and any
   fragment are dropped; the asterisk form (``*``) has no segments.  Any
   other target that does not start with ``/`` is refused.
3. **Segments.**  The path is split at ``/``.  A trailing slash is noted
   (:attr:`CanonicalPath.trailing_slash`) and otherwise ignored.  Empty
   segments (``//``) are kept in :attr:`CanonicalPath.segments`, so a filter
   can refuse them where they matter, and dropped in
   :attr:`CanonicalPath.collapsed`.
4. **Decoding.**  Each segment is percent-decoded exactly once, and must then
   be valid UTF-8.  Refused (``400``):

   - a malformed escape (``%``, ``%4``, ``%zz``);
   - an encoded slash (``%2F``), which would change the path's structure;
   - NUL or any other control character (``%00``, ``%0A``, ``%7F``);
   - double encoding: a decoded segment that still holds an escape
     (``%XX``, or ``%uHHHH`` as IIS wrote them), as ``a%252F`` or
     ``%2561ction`` decode to;
   - invalid UTF-8 after decoding.
5. **Dot segments.**  ``.`` and ``..`` (also as ``%2E``) are refused, not
   resolved: a client never needs them (clients resolve them before sending)
   and resolving them here while the wrapped app's router does not would
   make the filter and the app disagree about the path.
6. **Everything else is literal.**  Letter case, ``;`` path parameters and
   backslashes are kept as they are: they are ordinary characters of a
   tenant id (``resel1\\sub2\\acct3`` is a valid id).  A filter that must
   decide what a router *might* make of them (``admin_cull``) says so itself.

Nothing here imports WSGI machinery; :func:`canonical_path` only reads the
``environ`` dict.

Example::

    >>> from tenancy_mw.core.paths import canonicalize
    >>> canonicalize("/v1.0/Bob's%20Tenant/widgets/").segments
    ('v1.0', "Bob's Tenant", 'widgets')
    >>> canonicalize("/v1.0/a%2Fb")
    Traceback (most recent call last):
      ...
    tenancy_mw.core.paths.PathRefused: ...
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

__all__ = [
    "CanonicalPath",
    "DEFAULT_MAX_TARGET_LENGTH",
    "DEFAULT_VERSION_PATTERN",
    "PathRefused",
    "Refused",
    "SAFE_IN_SEGMENT",
    "canonicalize",
    "canonical_path",
    "check_target_length",
    "compile_version_pattern",
    "find_version",
    "header_environ_key",
    "max_target_length_opt",
    "raw_request_path",
    "remember_rewrite",
    "routed_path",
    "target_path",
    "version_pattern_opt",
]

#: ``environ`` key under which the canonical form is cached for the filters
#: after the first one.  Clients cannot set ``environ`` keys without an
#: ``HTTP_`` prefix, so the cache cannot be forged.
ENVIRON_KEY = "tenancy.canonical_path"

#: The characters a path segment keeps unescaped when tenancy_mw writes one
#: (``quote(segment, safe=SAFE_IN_SEGMENT)``): RFC 3986's pchar allows the
#: sub-delims ``!$&'()*+,;=`` and ``:`` ``@`` in a segment as they are
#: (the unreserved characters ``quote`` never escapes); ``/``, ``?``, ``#``
#: and ``%`` must be escaped.
SAFE_IN_SEGMENT = "!$&'()*+,;=:@"

# A path made only of plain segments: no escapes, no empty or dot segments,
# no control characters.  Most requests match, and skip the per-segment work.
_PLAIN_PATH = re.compile(r"(?:/[A-Za-z0-9_~!$&'()*+,;=:@-][A-Za-z0-9._~!$&'()*+,;=:@-]*)*/?")
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_~!$&'()*+,;=:@-][A-Za-z0-9._~!$&'()*+,;=:@-]*")
_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_MALFORMED_OR_SLASH = re.compile(r"%(?:(?![0-9A-Fa-f]{2})|2[Ff])")
# After one decode, any escape left (%XX, or IIS-style %uHHHH) means the
# client encoded twice: a router that decodes again would see another path.
_SECOND_ESCAPE = re.compile(r"%(?:[0-9A-Fa-f]{2}|[Uu][0-9A-Fa-f]{4})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ABSOLUTE_FORM = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")


class Refused(ValueError):
    """Input that breaks a rule; base of :class:`PathRefused` and
    :class:`~tenancy_mw.tenants.ids.InvalidTenantId`.

    :ivar rule: a short, stable name of the broken rule, e.g.
        ``"encoded-slash"``; used in the error code.
    :ivar detail: a sentence for the client, naming the offending value.
    :ivar value: the offending input, as received.
    :ivar status: the HTTP status a filter answers with (400 unless a
        subclass says otherwise).
    """

    status = 400

    def __init__(self, rule: str, detail: str, value: object) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail
        self.value = value


class PathRefused(Refused):
    """A request path that has no canonical form."""


class TargetTooLong(PathRefused):
    """A request target longer than a filter will judge: answered ``414``."""

    status = 414


#: The longest request target (path and query, as sent) a filter judges by
#: default, in bytes; a longer one is answered ``414``.  gunicorn accepts
#: request lines up to 4094 bytes by default, nginx 8 KiB, waitress about
#: 256 KiB: no API call needs more, and the bound keeps judging cheap.
DEFAULT_MAX_TARGET_LENGTH = 8192


def max_target_length_opt():
    """The ``max_target_length`` option every path-judging filter offers (one definition)."""
    from oslo_config import cfg

    return cfg.IntOpt(
        "max_target_length",
        default=DEFAULT_MAX_TARGET_LENGTH,
        min=256,
        help="Longest request target (path and query string, in bytes as sent) this filter judges; a longer "
        "one is answered 414. Bounds the work any request can cost the filter.",
    )


#: ``v`` followed by digits and dots: ``v1``, ``v1.0``, ``v2.1``.
DEFAULT_VERSION_PATTERN = r"v[0-9]+(?:\.[0-9]+)*"


def version_pattern_opt(how: str):
    """The ``version_pattern`` option of every filter that finds the version segment (one definition).

    *how* is the rest of the option's help: how this filter reads the
    pattern.  Check the value with :func:`compile_version_pattern`.
    """
    from oslo_config import cfg

    return cfg.StrOpt(
        "version_pattern",
        default=DEFAULT_VERSION_PATTERN,
        help="Regular expression a whole version segment matches (Python re syntax" + how,
    )


def compile_version_pattern(pattern: object, *, ignore_case: bool = False) -> re.Pattern:
    """*pattern* (a ``version_pattern`` value) compiled; :class:`ValueError` saying why when it is refused.

    Refused: anything but a string, a bad regular expression, and a pattern
    that matches an empty segment (it would take ``//`` for a version).

    Example::

        >>> compile_version_pattern("v[0-9]+", ignore_case=True).fullmatch("V2") is not None
        True
        >>> compile_version_pattern("v?")
        Traceback (most recent call last):
          ...
        ValueError: it matches an empty segment
    """
    if not isinstance(pattern, str):
        raise ValueError("a regular expression is required")
    try:
        compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ValueError(str(exc)) from None
    if compiled.fullmatch(""):
        raise ValueError("it matches an empty segment")
    return compiled


def find_version(segments: tuple[str, ...], pattern: re.Pattern, prefix_length: int = 0) -> int:
    """Index of the service's version segment in *segments*, or -1.

    The first *prefix_length* segments are the mount point (``SCRIPT_NAME``).
    The service's own mount is the end of it: what comes before was put
    there by whatever routed the request earlier, a client's
    ``X-Forwarded-Prefix`` included (oslo.middleware's
    ``http_proxy_to_wsgi`` prepends it to ``SCRIPT_NAME``).  So the version
    is the mount's last segment when *pattern* matches it (an app mounted
    at its version, as nova's urlmap mounts ``/v2.1``), else the first
    segment after the mount when it matches (an app mounted at the root or
    above its version).  A version-like segment earlier in the mount is
    never the version, and the segment after the version is never inside
    the mount: a tenant read there would not be the one the app routes.

    Example::

        >>> version = re.compile(DEFAULT_VERSION_PATTERN)
        >>> find_version(("v1", "aaaa", "v2.1", "servers"), version, 3)
        2
        >>> find_version(("compute", "v2.1", "servers"), version, 1)
        1
        >>> find_version(("v1", "aaaa", "servers"), version, 2)
        -1
    """
    match = pattern.fullmatch
    if 0 < prefix_length <= len(segments) and match(segments[prefix_length - 1]):
        return prefix_length - 1
    if 0 <= prefix_length < len(segments) and match(segments[prefix_length]):
        return prefix_length
    return -1


def header_environ_key(name: str) -> str:
    """The WSGI ``environ`` key of request header *name*: ``X-Tenant-Id`` -> ``HTTP_X_TENANT_ID``."""
    return "HTTP_" + name.upper().replace("-", "_")


def target_length(environ: dict) -> int:
    """The length of the request target in *environ*: the raw one when the server gives it.

    Without a raw target, ``SCRIPT_NAME + PATH_INFO`` and the query stand
    for it (decoded, so never longer than what was sent).
    """
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        return len(raw)
    query = environ.get("QUERY_STRING", "")
    return len(environ.get("SCRIPT_NAME", "")) + len(environ.get("PATH_INFO", "")) + (len(query) + 1 if query else 0)


def check_target_length(environ: dict, limit: int) -> None:
    """Raise :class:`TargetTooLong` (``414``) when the request target is over *limit* bytes.

    Example::

        >>> check_target_length({"RAW_URI": "/v2.1/" + "a" * 300}, 256)
        Traceback (most recent call last):
          ...
        tenancy_mw.core.paths.TargetTooLong: The request target is 306 bytes long; at most 256 are accepted here.
    """
    length = target_length(environ)
    if length > limit:
        raise TargetTooLong(
            "target-too-long",
            "The request target is %d bytes long; at most %d are accepted here." % (length, limit),
            length,
        )


def _not_latin1(what: str, value: str) -> PathRefused:
    return PathRefused(
        "not-latin-1",
        "%s %r holds characters a WSGI server cannot send (PEP 3333 carries bytes as latin-1 text)."
        % (what, shorten(value)),
        value,
    )


class CanonicalPath(NamedTuple):
    """A request path in canonical form.

    :ivar segments: the decoded segments, in order; empty strings stand for
        empty segments (``//``); a trailing slash adds none.
    :ivar trailing_slash: whether the path ended in ``/`` (the root ``/``
        included).
    :ivar prefix_length: how many leading segments belong to
        ``SCRIPT_NAME`` (where the app is mounted), 0 outside WSGI.
    """

    segments: tuple[str, ...]
    trailing_slash: bool = False
    prefix_length: int = 0

    @property
    def collapsed(self) -> tuple[str, ...]:
        """The segments with the empty ones (from ``//``) left out."""
        if "" not in self.segments:
            return self.segments
        return tuple(s for s in self.segments if s)

    def __str__(self) -> str:
        body = "/".join(self.segments)
        return "/" + body + ("/" if self.trailing_slash and body else "")


def _new_path(segments: tuple, trailing_slash: bool, prefix_length: int) -> CanonicalPath:
    # tuple.__new__ skips the named tuple's Python-level __new__: this is the hot path.
    return tuple.__new__(CanonicalPath, (segments, trailing_slash, prefix_length))


def shorten(value: str, limit: int = 80) -> str:
    """Return *value* cut to *limit* characters, marked when cut, for messages."""
    if len(value) <= limit:
        return value
    return "%s... (%d characters)" % (value[:limit], len(value))


def _decode_segment(raw: str, encoded: bool) -> str:
    if encoded:
        if "%" in raw:
            if _MALFORMED_ESCAPE.search(raw):
                raise PathRefused(
                    "malformed-escape",
                    "Path segment %r has a malformed percent-escape." % shorten(raw),
                    raw,
                )
            # The raw target is latin-1 text of the bytes sent; unquote the bytes.
            data = unquote_to_bytes(raw.encode("latin-1", "surrogateescape"))
        else:
            data = raw.encode("latin-1", "surrogateescape")
        if b"/" in data:
            raise PathRefused(
                "encoded-slash",
                "Path segment %r holds an encoded slash (%%2F); a path segment may not contain '/'." % shorten(raw),
                raw,
            )
    else:
        # PATH_INFO is already decoded; PEP 3333 carries its bytes as latin-1.
        try:
            data = raw.encode("latin-1")
        except UnicodeEncodeError:
            data = raw.encode("utf-8", "surrogateescape")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PathRefused(
            "invalid-utf8",
            "Path segment %r is not valid UTF-8 once decoded." % shorten(raw),
            raw,
        ) from None
    if not text.isprintable() and _CONTROL.search(text):
        rule = "nul" if "\x00" in text else "control-character"
        raise PathRefused(
            rule,
            "Path segment %r holds a control character." % shorten(raw),
            raw,
        )
    if "%" in text and _SECOND_ESCAPE.search(text):
        raise PathRefused(
            "double-encoding",
            "Path segment %r is encoded twice (it still holds a percent-escape after decoding)." % shorten(raw),
            raw,
        )
    if text == "." or text == "..":
        raise PathRefused(
            "dot-segment",
            "Path segment %r is a dot segment; send the path with dot segments resolved." % shorten(raw),
            raw,
        )
    return text


def target_path(target: str) -> str:
    """The still-encoded path part of a request target.

    Drops an absolute-form scheme and authority, the query and any fragment::

        >>> target_path("http://example.com/v2.1/x?limit=2")
        '/v2.1/x'
    """
    if not target.startswith("/"):
        match = _ABSOLUTE_FORM.match(target)
        if match:
            target = target[match.end() :] or "/"
    if "?" in target:
        target = target.split("?", 1)[0]
    if "#" in target:
        target = target.split("#", 1)[0]
    return target


def canonicalize(path: str, *, encoded: bool = True, prefix_length: int = 0) -> CanonicalPath:
    """Put *path* in canonical form, or raise :class:`PathRefused`.

    :param path: a request path or request target.  With ``encoded=True``
        (the default) it is still percent-encoded, as in ``RAW_URI``;
        absolute form, query and fragment are allowed and dropped.  Like
        every WSGI path it is read as latin-1 text of the bytes sent; a
        string with characters beyond latin-1 is taken as text and read as
        its UTF-8 bytes.
    :param encoded: ``False`` for a path that is already percent-decoded, as
        ``SCRIPT_NAME + PATH_INFO`` is (in PEP 3333's latin-1 form).
    :param prefix_length: recorded in the result; see
        :attr:`CanonicalPath.prefix_length`.

    Example::

        >>> canonicalize("http://h/v2.1/%E2%88%91/servers?x=1").segments
        ('v2.1', '∑', 'servers')
    """
    try:
        path.encode("latin-1")
    except UnicodeEncodeError:
        # Not the latin-1 form a WSGI server gives (PEP 3333) but text, such
        # as an IRI typed in Python: take its UTF-8 bytes.
        path = path.encode("utf-8", "surrogatepass").decode("latin-1")
    if encoded:
        path = target_path(path)
    return _canonicalize_path(path, encoded, prefix_length)


def _canonicalize_path(path: str, encoded: bool, prefix_length: int, decoded: bytes | None = None) -> CanonicalPath:
    """:func:`canonicalize` of a path (no query); *decoded* is its unquoted bytes if already known."""
    if path == "*":
        return _new_path((), False, 0)
    if not path.startswith("/"):
        if path == "" and not encoded:
            return _new_path((), True, 0)
        raise PathRefused(
            "not-a-path",
            "Request target %r is not an absolute path." % shorten(path),
            path,
        )
    if path == "/":
        return _new_path((), True, prefix_length)
    trailing = path.endswith("/")
    body = path[1:-1] if trailing else path[1:]
    if _PLAIN_PATH.fullmatch(path):
        return _new_path(tuple(body.split("/")), trailing, prefix_length)
    if decoded is not None:
        decoded = decoded[1:-1] if trailing else decoded[1:]
    segments = _decode_body(body, encoded, decoded)
    if segments is None:
        # Some rule is broken: go segment by segment to name the fault.
        plain = _PLAIN_SEGMENT.fullmatch
        segments = tuple(seg if plain(seg) else _decode_segment(seg, encoded) for seg in body.split("/"))
    return _new_path(segments, trailing, prefix_length)


def _decode_body(body: str, encoded: bool, decoded: bytes | None) -> tuple[str, ...] | None:
    """All segments of a path body decoded at once, or ``None`` if any rule may be broken.

    One pass over the whole body is much cheaper than one per segment; the
    checks are the same as :func:`_decode_segment`'s.
    """
    if encoded:
        if "%" in body:
            if _MALFORMED_OR_SLASH.search(body):
                return None
            data = decoded if decoded is not None else unquote_to_bytes(body.encode("latin-1", "surrogateescape"))
        else:
            data = body.encode("latin-1", "surrogateescape")
    else:
        try:
            data = body.encode("latin-1")
        except UnicodeEncodeError:
            return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.isprintable() and _CONTROL.search(text):
        return None
    if "%" in text and _SECOND_ESCAPE.search(text):
        return None
    segments = tuple(text.split("/"))
    if "." in text and ("." in segments or ".." in segments):
        return None
    return segments


def raw_request_path(environ: dict) -> str | None:
    """The still-encoded path the client asked for, or ``None`` if unknown.

    Read from ``RAW_URI`` or ``REQUEST_URI``; the query and an absolute-form
    scheme and authority are dropped.
    """
    target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not target:
        return None
    return target_path(target)


def _compute(environ: dict, script: str, path_info: str) -> CanonicalPath:
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    prefix_length = script.count("/")
    full = script + path_info
    # PEP 3333: every path string is latin-1 text of the bytes sent.  One
    # that is not (a lone surrogate, a character above U+00FF) was not built
    # by a conforming server: refuse it rather than guess what it means.
    if not full.isascii():
        try:
            full.encode("latin-1")
        except UnicodeEncodeError:
            raise _not_latin1("PATH_INFO", full) from None
    if raw and not raw.isascii():
        try:
            raw.encode("latin-1")
        except UnicodeEncodeError:
            raise _not_latin1("The raw request target", raw) from None
    if raw:
        if raw == "*":
            return _new_path((), False, 0)
        # target_path(), inlined: this runs on every request.
        if not raw.startswith("/"):
            raw = target_path(raw)
        else:
            cut = raw.find("?")
            if cut != -1:
                raw = raw[:cut]
            if "#" in raw:
                raw = raw.split("#", 1)[0]
        # Trust the raw target only while it still says what PATH_INFO says:
        # a filter or mount earlier in the pipeline may have rewritten it.
        if "%" not in raw:
            if raw == full:
                return _canonicalize_path(raw, True, prefix_length)
        else:
            decoded = unquote_to_bytes(raw.encode("latin-1", "surrogateescape"))
            if decoded.decode("latin-1") == full:
                return _canonicalize_path(raw, True, prefix_length, decoded)
    return _canonicalize_path(full, False, prefix_length)


def canonical_path(environ: dict) -> CanonicalPath:
    """The canonical form of the request in *environ*; raises :class:`PathRefused`.

    The result is cached in ``environ`` (under :data:`ENVIRON_KEY`) for as
    long as ``SCRIPT_NAME`` and ``PATH_INFO`` stay as they were, so the
    filters of one pipeline compute it once and all decide on the same form.

    Example::

        >>> env = {"RAW_URI": "/v2.1/a%20b/servers?limit=1",
        ...        "SCRIPT_NAME": "", "PATH_INFO": "/v2.1/a b/servers"}
        >>> canonical_path(env).segments
        ('v2.1', 'a b', 'servers')
    """
    script = environ.get("SCRIPT_NAME", "")
    path_info = environ.get("PATH_INFO", "")
    cached = environ.get(ENVIRON_KEY)
    if cached is not None and cached[0] == script and cached[1] == path_info:
        result = cached[2]
    else:
        try:
            result = _compute(environ, script, path_info)
        except PathRefused as exc:
            result = exc
        except (TypeError, AttributeError):
            # A value that is not a string at all (bytes, None): not an environ PEP 3333 allows.
            result = _not_latin1("SCRIPT_NAME, PATH_INFO or the raw target", repr((script, path_info)))
        environ[ENVIRON_KEY] = (script, path_info, result)
    if isinstance(result, PathRefused):
        raise result
    return result


def routed_path(environ: dict) -> CanonicalPath:
    """The canonical form of ``SCRIPT_NAME + PATH_INFO`` as they are now.

    After a rewrite (:func:`remember_rewrite`) this is the path the app will
    route on, while :func:`canonical_path` stays the client's.  Raises
    :class:`PathRefused`.
    """
    script = environ.get("SCRIPT_NAME", "")
    return _canonicalize_path(script + environ.get("PATH_INFO", ""), False, script.count("/"))


#: ``environ`` key of the judges to call when a filter rewrites the path
#: after they passed the request (see :func:`remember_rewrite`).
REJUDGE_KEY = "tenancy.rejudge"
#: ``environ`` key set to ``True`` once a tenancy filter rewrote the path.
REWRITTEN_KEY = "tenancy.path_rewritten"


def remember_rewrite(environ: dict, canonical: CanonicalPath):
    """Record that the caller rewrote ``SCRIPT_NAME``/``PATH_INFO`` on purpose.

    Filters later in the pipeline keep deciding on *canonical* (the client's
    path) and also see :data:`REWRITTEN_KEY`, so they can judge the
    rewritten path the app will route on too.  Filters earlier in the
    pipeline that registered a judge under :data:`REJUDGE_KEY` judge it now:
    the first refusal they return (a callable taking ``start_response``) is
    returned, else ``None``.
    """
    environ[ENVIRON_KEY] = (
        environ.get("SCRIPT_NAME", ""),
        environ.get("PATH_INFO", ""),
        canonical,
    )
    environ[REWRITTEN_KEY] = True
    for judge in environ.get(REJUDGE_KEY, ()):
        refusal = judge(environ)
        if refusal is not None:
            return refusal
    return None
