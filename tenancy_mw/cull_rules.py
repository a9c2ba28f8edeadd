"""Rules naming admin calls, and how a request is matched against them.

Pure helpers of the ``admin_cull`` filter; no WSGI machinery.

Rule syntax
-----------
A rule is one line: the methods, white space, then a path pattern::

    PUT,DELETE /{version}/{tenant}
    *          /**/action/move/**
    GET        /os-hypervisors/**

Methods
    A comma-separated list of HTTP methods (any case), or ``*`` for every
    method.  ``HEAD`` requests are judged as ``GET`` too, so a rule naming
    ``GET`` covers ``HEAD``.

Pattern tokens, separated by ``/``
    ``name``
        A literal segment.  It matches a segment that equals it ignoring
        case, and also one that only adds path parameters (``name;x=1``),
        an extension (``name.json``) or surrounding spaces: some routers and
        proxies drop those, so an admin call written that way is still
        culled.
    ``*``, ``{tenant}``
        Exactly one segment, whatever it holds.
    ``**``
        Any number of segments, none included.
    ``{version}``
        One segment matching the filter's ``version_pattern`` (ignoring
        case).

Where a pattern is tried
    A pattern whose first token is ``{version}`` is tried at every segment
    that matches ``version_pattern``; one that starts with ``**`` matches
    anywhere.  Any other pattern names a *resource path* and is tried at
    the root of the path, right after each version segment (APIs without a
    tenant in the URL) and right after the segment that follows it (the
    tenant).  So ``PUT,DELETE /os-services/*`` culls
    ``/v2.1/{tenant}/os-services/x``, ``/v2.1/os-services/x`` and
    ``/os-services/x`` alike.  A pattern must match up to the last segment;
    end it with ``/**`` to take in everything below.

Paths are matched in the canonical form of :mod:`tenancy_mw.paths`, empty
segments dropped, trailing slash ignored.  A segment holding a backslash is
also matched as if the backslash were a ``/`` (some servers and proxies
treat it so); a request is culled when either reading matches.

Example::

    >>> import re
    >>> rule = parse_rule("PUT,DELETE /os-services/*")
    >>> rule.matches(("v2.1", "acme", "os-services", "7"), {"DELETE"}, re.compile(r"v[0-9.]+"))
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "DEFAULT_RULES",
    "TENANT_READ_RULE",
    "CullRule",
    "PathView",
    "RuleError",
    "parse_rule",
    "parse_rules",
]

#: The tenants spec's admin calls: create and delete a tenant, every move
#: action (of a resource or a whole tenant), and the tenant's own action
#: namespace (where a restore call for deleted tenants will live).
DEFAULT_RULES = (
    "PUT,DELETE /{version}/{tenant}",
    "* /**/action/move/**",
    "* /{version}/{tenant}/action/**",
)

#: Added by ``cull_tenant_reads``: the spec leaves GET/HEAD of a tenant public
#: or admin at the operator's choice.
TENANT_READ_RULE = "GET /{version}/{tenant}"

_METHOD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LITERAL = re.compile(r"[^\s/*{}]+")


class RuleError(ValueError):
    """A rule that cannot be parsed; the message names the rule and the fault."""


class _Token(NamedTuple):
    kind: str  # "literal", "one", "any", "version"
    text: str = ""


class CullRule:
    """One parsed rule: a set of methods (``None`` for every method) and a pattern.

    Build it with :func:`parse_rule`.
    """

    __slots__ = ("anchor", "literals", "methods", "source", "tokens")

    def __init__(self, source: str, methods: frozenset | None, tokens: tuple, anchor: str) -> None:
        self.source = source
        self.methods = methods
        self.tokens = tokens
        #: "version" (first token is {version}), "anywhere" (starts with **)
        #: or "resource" (tried at the root, after the version and after the tenant).
        self.anchor = anchor
        #: Lower-case literal tokens; each must occur in the path for a match.
        self.literals = tuple(t.text for t in tokens if t.kind == "literal")

    def __repr__(self) -> str:
        return "CullRule(%r)" % self.source

    def applies_to(self, methods: Iterable[str]) -> bool:
        """Whether the rule names one of *methods* (upper-case)."""
        return self.methods is None or not self.methods.isdisjoint(methods)

    def matches(self, segments: tuple[str, ...], methods: Iterable[str], version_re: re.Pattern) -> bool:
        """Whether a request with these canonical *segments* and *methods* is culled by this rule.

        *segments* are the non-empty canonical segments; *version_re*
        matches a version segment.  To test many rules on one request, build
        one :class:`PathView` and call :meth:`matches_view`.
        """
        return self.matches_view(PathView(segments, version_re), methods)

    def matches_view(self, view: PathView, methods: Iterable[str]) -> bool:
        """:meth:`matches` on a prepared :class:`PathView`."""
        if not self.applies_to(methods):
            return False
        # Every literal token must occur somewhere: a cheap test that skips
        # most rules on most requests.
        for literal in self.literals:
            if literal not in view.lowered:
                return False
        for segments, versions in view.readings:
            if self._matches_reading(segments, versions, view.version_re):
                return True
        return False

    def _matches_reading(self, segments: tuple[str, ...], versions: tuple[int, ...], version_re: re.Pattern) -> bool:
        if self.anchor == "anywhere":
            return _match(self.tokens, 0, segments, 0, version_re)
        if self.anchor == "version":
            return any(_match(self.tokens, 0, segments, i, version_re) for i in versions)
        starts = {0}
        for i in versions:
            starts.add(i + 1)
            starts.add(i + 2)
        return any(_match(self.tokens, 0, segments, i, version_re) for i in starts if i <= len(segments))


class PathView:
    """A request path prepared once for matching against many rules.

    :ivar lowered: the path in lower case, for the literal pre-test.
    :ivar readings: ``(segments, version indexes)`` pairs: the path as
        given and, when a segment holds a backslash, the path read with
        backslashes as separators.  Worked out on first use only: most
        requests fail every rule's literal pre-test first.
    """

    __slots__ = ("_readings", "lowered", "segments", "version_re")

    def __init__(self, segments: tuple[str, ...], version_re: re.Pattern) -> None:
        self.segments = segments
        self.version_re = version_re
        self.lowered = "/".join(segments).lower()
        self._readings = None

    @property
    def readings(self) -> tuple:
        if self._readings is None:
            segments, version_re = self.segments, self.version_re
            readings = ((segments, _version_indexes(segments, version_re)),)
            if "\\" in self.lowered:
                split = tuple(p for s in segments for p in s.split("\\") if p)
                readings += ((split, _version_indexes(split, version_re)),)
            self._readings = readings
        return self._readings


def _is_version(segment: str, version_re: re.Pattern) -> bool:
    if version_re.fullmatch(segment) is not None:
        return True
    return (";" in segment or " " in segment) and version_re.fullmatch(_bare(segment)) is not None


def _version_indexes(segments: tuple[str, ...], version_re: re.Pattern) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(segments) if _is_version(s, version_re))


def _bare(segment: str) -> str:
    """The segment as a lenient router might read it: no ;params or outer spaces, lower case."""
    base = segment.split(";", 1)[0]
    return base.strip().lower()


def _literal_matches(literal: str, segment: str) -> bool:
    lowered = segment.lower()
    if lowered == literal:
        return True
    base = _bare(segment)
    if base == literal:
        return True
    stem = base.rsplit(".", 1)[0]
    return stem == literal and stem != base


def _match(tokens: tuple, ti: int, segments: tuple[str, ...], si: int, version_re: re.Pattern) -> bool:
    while ti < len(tokens):
        token = tokens[ti]
        if token.kind == "any":
            # '**': try every split; the rest of the pattern is short.
            return any(_match(tokens, ti + 1, segments, k, version_re) for k in range(si, len(segments) + 1))
        if si >= len(segments):
            return False
        segment = segments[si]
        if token.kind == "literal":
            if not _literal_matches(token.text, segment):
                return False
        elif token.kind == "version":
            if not _is_version(segment, version_re):
                return False
        ti += 1
        si += 1
    return si == len(segments)


def parse_rule(text: str) -> CullRule:
    """Parse one rule line (``"METHODS PATTERN"``); raise :class:`RuleError` naming it.

    Example::

        >>> parse_rule("* /os-hypervisors/**").methods is None
        True
        >>> parse_rule("GET os-hypervisors")
        Traceback (most recent call last):
          ...
        tenancy_mw.cull_rules.RuleError: rule 'GET os-hypervisors': the pattern must start with '/'
    """
    source = " ".join(text.split())
    parts = source.split(" ")
    if len(parts) != 2:
        raise RuleError("rule %r: expected 'METHODS /pattern' (methods, one space, a pattern)" % text)
    method_text, pattern = parts
    if method_text == "*":
        methods = None
    else:
        names = [m.strip() for m in method_text.split(",")]
        for name in names:
            if not _METHOD.fullmatch(name):
                raise RuleError("rule %r: %r is not an HTTP method (or '*')" % (text, name))
        methods = frozenset(n.upper() for n in names)
    if not pattern.startswith("/"):
        raise RuleError("rule %r: the pattern must start with '/'" % text)
    raw_tokens = [t for t in pattern[1:].split("/") if t != ""]
    if not raw_tokens:
        raise RuleError("rule %r: the pattern names no segment" % text)
    tokens = []
    for raw in raw_tokens:
        if raw == "**":
            if tokens and tokens[-1].kind == "any":
                continue
            tokens.append(_Token("any"))
        elif raw in ("*", "{tenant}"):
            tokens.append(_Token("one"))
        elif raw == "{version}":
            tokens.append(_Token("version"))
        elif _LITERAL.fullmatch(raw):
            tokens.append(_Token("literal", raw.lower()))
        else:
            raise RuleError(
                "rule %r: %r is not a pattern token (a literal segment, *, **, {tenant} or {version})" % (text, raw)
            )
    if tokens[0].kind == "version":
        anchor = "version"
    elif tokens[0].kind == "any":
        anchor = "anywhere"
    else:
        anchor = "resource"
    return CullRule(source, methods, tuple(tokens), anchor)


def parse_rules(lines: Iterable[str]) -> list[CullRule]:
    """Parse rules given as strings, each holding one or more lines.

    Blank lines and lines starting with ``#`` are skipped.
    """
    rules = []
    for entry in lines:
        for line in entry.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                rules.append(parse_rule(line))
    return rules
