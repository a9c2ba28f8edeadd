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
    A pattern whose first token is ``{version}`` is tried at every
    plausible version: each version-like segment of the mount point
    (``SCRIPT_NAME``), each segment of the run of version-like segments
    right after it, and each segment of the run starting at the first
    version-like segment anywhere (``/v1/v2.1/acme`` under a ``/v1`` mount
    may route ``v2.1`` as the version).  Any other pattern may start at any
    segment, so ``PUT,DELETE /os-services/*`` culls
    ``/v2.1/{tenant}/os-services/x``, ``/v2.1/os-services/x`` and
    ``/os-services/x`` alike, wherever the app is mounted.  A pattern must
    match up to the last segment; end it with ``/**`` to take in everything
    below.

How a path is read
    In the canonical form of :mod:`tenancy_mw.core.paths`, empty segments
    dropped, trailing slash ignored, and also as lenient routers and
    proxies might read it; a rule matches when it matches any reading:

    - literal segments compare case-folded (after NFKC for non-ASCII text,
      so fullwidth letters compare as ASCII), without ``;`` parameters,
      outer spaces or a final ``.extension``;
    - a segment that is empty once ``;`` parameters and spaces are dropped
      (``/;/``, ``/%20/``) is also read as absent;
    - a backslash is also read as a separator.

Action keys
    A rule may end with a parenthesised, comma-separated list of action
    keys, as OpenStack's policy documentation writes them::

        POST /servers/*/action (os-migrateLive,evacuate,os-resetState)

    Such a rule matches only a request whose path matches *and* whose JSON
    body has a top-level key among them (nova and cinder tell their
    ``.../action`` calls apart by that key: ``{"os-migrateLive": {...}}``
    is an admin's, ``{"reboot": {...}}`` a member's).  Keys are compared
    after NFKC, case folding and stripping outer white space, on both sides
    (:func:`fold_action_key`), so ``OS-MIGRATELIVE`` or fullwidth letters
    are the admin key too.  A key holds no white space, parentheses or
    commas; spaces after the commas are allowed.  The list comes last,
    after the pattern and a space.  How the body is read:
    :mod:`tenancy_mw.cull.actions`.

Example::

    >>> import re
    >>> rule = parse_rule("PUT,DELETE /os-services/*")
    >>> rule.matches(("v2.1", "acme", "os-services", "7"), {"DELETE"}, re.compile(r"v[0-9.]+"))
    True
    >>> rule = parse_rule("POST /servers/*/action (os-migrateLive, evacuate)")
    >>> sorted(rule.action_keys)
    ['evacuate', 'os-migratelive']
    >>> path = ("v2.1", "servers", "7", "action")
    >>> rule.matches(path, {"POST"}, re.compile(r"v[0-9.]+"), body_keys={"os-migrateLive"})
    True
    >>> rule.matches(path, {"POST"}, re.compile(r"v[0-9.]+"), body_keys={"reboot"})
    False
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "DEFAULT_RULES",
    "prepare_folding",
    "TENANT_READ_RULE",
    "CullRule",
    "fold_action_key",
    "PathView",
    "RuleError",
    "RuleTable",
    "parse_rule",
    "parse_rules",
]

#: The tenants spec's admin calls: create and delete a tenant, every move
#: action (of a resource or a whole tenant), every restore action, and the
#: tenant's own action namespace, wherever a lenient router could reach it.
DEFAULT_RULES = (
    "PUT,DELETE /{version}/{tenant}",
    # Every plausible split into mount, version and tenant, also a mount
    # whose own path holds a version-like segment then an ordinary one
    # (/api/v1/compute in front of an app routing /{version}/{tenant}).
    # Fails closed: PUT/DELETE of any path ending in a version-like segment
    # and one more (/v1/AUTH_acme/v2/photo.jpg) is culled too.
    "PUT,DELETE /**/{version}/{tenant}",
    "* /**/action/move/**",
    "* /**/action/restore/**",
    "* /{version}/{tenant}/action/**",
    # Routers that find a child controller without the tenant segment
    # (pecan's RestController looks up /{version}/action as the tenants
    # controller's "action" child) or at any depth (a get_one(*args)
    # controller, uWSGI resolving /x/../../action): the action namespace is
    # culled wherever it could be reached from, except nova-style public
    # POST .../{resource}/{id}/action, which has nothing below it.
    "* /{version}/action/**",
    "* /{version}/**/action/*/**",
    "GET /{version}/**/action",
)

#: Added by ``cull_tenant_reads``: the spec leaves GET/HEAD of a tenant public
#: or admin at the operator's choice.
TENANT_READ_RULE = "GET /{version}/{tenant}"

_METHOD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LITERAL = re.compile(r"[^\s/*{}()]+")
# An action key: anything but white space, parentheses and commas.
_ACTION_KEY = re.compile(r"[^\s(),]+")


class RuleError(ValueError):
    """A rule that cannot be parsed; the message names the rule and the fault."""


class _Token(NamedTuple):
    kind: str  # "literal", "one", "any", "version"
    text: str = ""


class CullRule:
    """One parsed rule: a set of methods (``None`` for every method), a pattern, and maybe action keys.

    Build it with :func:`parse_rule`.  :attr:`action_keys` is ``None`` for a
    rule without a key list, else the frozenset of its keys, folded
    (:func:`fold_action_key`).
    """

    __slots__ = (
        "action_keys",
        "anchor",
        "fixed_length",
        "from_first",
        "literals",
        "methods",
        "program",
        "source",
        "tail_checks",
        "tail_length",
        "tokens",
        "version_index",
    )

    def __init__(
        self,
        source: str,
        methods: frozenset | None,
        tokens: tuple,
        anchor: str,
        action_keys: frozenset[str] | None = None,
    ) -> None:
        self.source = source
        self.methods = methods
        self.action_keys = action_keys
        self.tokens = tokens
        #: "version" (the first token is {version}) or "anywhere".
        self.anchor = anchor
        #: Folded literal tokens; each must occur in the path for a match.
        self.literals = tuple(t.text for t in tokens if t.kind == "literal")
        #: How many segments the pattern matches, or None when it holds '**'.
        self.fixed_length = None if any(t.kind == "any" for t in tokens) else len(tokens)
        #: A pattern that, on a path of one reading, can only match the
        #: path's last ``tail_length`` segments (a fixed-length ``{version}``
        #: pattern; one that may start anywhere with no ``**`` but the
        #: leading one, as ``/**/{version}/{tenant}``) is compiled here into
        #: its checks: ``(offset, literal)`` for each token but ``*``, the
        #: literal ``None`` for ``{version}``.  None for other patterns.
        self.tail_checks: tuple | None = None
        self.tail_length = 0
        tail = None
        if anchor == "version" and self.fixed_length is not None:
            tail = tokens
        elif anchor == "anywhere" and not any(t.kind == "any" for t in tokens[1:]):
            tail = tokens[1:]
        #: With :attr:`tail_checks`, the index from the end (negative) of a
        #: segment that must be version-like for the pattern to match a path
        #: of one reading, else None: rules without a literal to pre-test
        #: are grouped by it, so one version test skips a whole group.
        self.version_index: int | None = None
        if tail is not None:
            self.tail_length = len(tail)
            self.tail_checks = tuple(
                (offset, token.text if token.kind == "literal" else None)
                for offset, token in enumerate(tail)
                if token.kind != "one"
            )
            self.version_index = next(
                (offset - self.tail_length for offset, literal in self.tail_checks if literal is None), None
            )
        #: The pattern compiled for a simple path (:attr:`PathView.simple`),
        #: whose one reading is plain ASCII: a regular expression matched on
        #: :attr:`PathView.text` from where the pattern starts (the start of
        #: the path, or the end of a ``{version}`` segment), with the leftmost
        #: place of every ``**`` but the last taken for good, so a match costs
        #: some steps per segment whatever the pattern.  None for a pattern
        #: with a ``{version}`` past its first token (:func:`_match` then).
        self.program = _program(tokens, anchor)
        #: Whether a ``{version}`` pattern is tried at the first version start
        #: only: its ``{version}`` is followed by ``**``, which takes in every
        #: later start.
        self.from_first = anchor == "version" and len(tokens) > 1 and tokens[1].kind == "any"

    def __repr__(self) -> str:
        return "CullRule(%r)" % self.source

    def applies_to(self, methods: Iterable[str]) -> bool:
        """Whether the rule names one of *methods* (upper-case)."""
        return self.methods is None or not self.methods.isdisjoint(methods)

    def accepts_keys(self, folded_keys: frozenset[str]) -> bool:
        """Whether a body with these top-level keys (folded, as :mod:`.actions` gives them) is one the rule names.

        Always true for a rule without action keys.
        """
        return self.action_keys is None or not self.action_keys.isdisjoint(folded_keys)

    def matches(
        self,
        segments: tuple[str, ...],
        methods: Iterable[str],
        version_re: re.Pattern,
        prefix_length: int = 0,
        body_keys: Iterable[str] = (),
    ) -> bool:
        """Whether a request with these canonical *segments* and *methods* is culled by this rule.

        *segments* are the non-empty canonical segments, the first
        *prefix_length* of them the mount point's; *version_re* matches a
        version segment; *body_keys* are the top-level keys of the JSON
        body, as sent (judged only by a rule with action keys).  To test
        many rules on one request, build one :class:`PathView` and call
        :meth:`matches_view`.
        """
        if not self.accepts_keys(frozenset(fold_action_key(k) for k in body_keys)):
            return False
        return self.matches_view(PathView(segments, version_re, prefix_length), methods)

    def matches_view(self, view: PathView, methods: Iterable[str]) -> bool:
        """:meth:`matches` on a prepared :class:`PathView`, the body's keys left out (see :meth:`accepts_keys`)."""
        return self.applies_to(methods) and self.matches_path(view)

    def matches_path(self, view: PathView) -> bool:
        """Whether the rule's pattern matches the path, whatever the method."""
        # Every literal token must occur somewhere: a cheap test that skips
        # most rules on most requests before any reading is worked out.
        for literal in self.literals:
            if literal not in view.folded:
                return False
        checks = self.tail_checks
        if checks is not None and view.plain:
            # One reading, and only one place the pattern can start.
            segments, version_re = view.segments, view.version_re
            start = len(segments) - self.tail_length
            if start < 0:
                return False
            simple = view.simple
            for offset, literal in checks:
                segment = segments[start + offset]
                if literal is None:
                    if not _is_version(segment, version_re):
                        return False
                elif simple:
                    # _literal_matches() on a plain ASCII segment: itself or its stem, lower-cased.
                    segment = segment.lower()
                    if segment != literal and ("." not in segment or segment.rsplit(".", 1)[0] != literal):
                        return False
                elif not _literal_matches(literal, segment):
                    return False
            prefix = view.prefix_length
            if self.anchor == "version" and start > prefix:
                # A version start only if its run of version-like segments
                # begins right after the mount point, or holds the first
                # version-like segment of the path (see _version_starts).
                run = start
                while run > prefix and _is_version(segments[run - 1], version_re):
                    run -= 1
                if run > prefix and any(_is_version(s, version_re) for s in segments[:run]):
                    return False
            return True
        program = self.program
        if program is not None and view.simple:
            if self.anchor != "version":
                return program.match(view.text) is not None
            positions = view.positions
            if not positions:
                return False
            text = view.text
            if self.from_first:
                return program.match(text, positions[0]) is not None
            return any(program.match(text, position) is not None for position in positions)
        for segments, versions in view.readings:
            if self.anchor == "version":
                if any(_match(self.tokens, segments, start, view.version_re) for start in versions):
                    return True
            elif _match(self.tokens, segments, 0, view.version_re):
                return True
        return False


class PathView:
    """A request path prepared once for matching against many rules.

    *canonical* says the segments are canonical ones, none empty (as
    ``admin_cull`` builds its views): a plain ASCII path of them is simple
    without each segment being checked again.

    :ivar folded: the path, case-folded, for the literal pre-test.
    :ivar plain: whether the path has a single reading (no ``;``
        parameters, spaces or backslashes).
    :ivar simple: whether it is also plain ASCII text: printable, every
        segment non-empty and free of ``/`` (as every canonical path of
        ASCII letters is).  There a literal token matches a segment only as
        the segment lower-cased or as its stem before a final ``.extension``,
        so rules are tried on :attr:`text` with a regular expression
        (:attr:`CullRule.program`) and looked up by segment (:class:`RuleTable`).
    :ivar readings: ``(segments, version starts)`` pairs, one per way a
        lenient router could read the path: as given; without segments that
        are empty once ``;`` parameters and spaces are dropped; with
        backslashes as separators; both.  ``version starts`` are the indexes
        where a ``{version}`` pattern is tried: the version-like segments of
        the mount point and the first one after it, and the first
        version-like segment anywhere.  Worked out on first use only: most
        requests fail every rule's literal pre-test first.
    """

    __slots__ = ("_positions", "_readings", "folded", "plain", "prefix_length", "segments", "simple", "version_re")

    def __init__(
        self, segments: tuple[str, ...], version_re: re.Pattern, prefix_length: int = 0, canonical: bool = False
    ) -> None:
        self.segments = segments
        self.version_re = version_re
        self.prefix_length = prefix_length
        joined = "/".join(segments)
        if joined.isascii():
            # _fold(), its ASCII case inlined: every request builds a view.
            folded = self.folded = joined.lower()
            # Control characters never get this far (the canonical form refuses them).
            self.plain = ";" not in folded and "\\" not in folded and " " not in folded
            # What canonical segments, none empty, guarantee: checked for the others.
            self.simple = self.plain and (
                canonical or (folded.isprintable() and "" not in segments and folded.count("/") == len(segments) - 1)
            )
        else:
            folded = self.folded = _fold(joined)
            if folded.isascii():
                self.plain = ";" not in folded and "\\" not in folded and " " not in folded
            else:
                self.plain = _ODD.search(folded) is None
            # Folding may turn a letter into several, or into a '/' (fullwidth solidus).
            self.simple = False
        self._readings: tuple | None = None
        self._positions: list | None = None

    @property
    def text(self) -> str:
        """The folded path with its leading slash, as a :attr:`CullRule.program` reads it (a simple view's)."""
        return "/" + self.folded

    @property
    def positions(self) -> list[int]:
        """Where a ``{version}`` pattern's :attr:`CullRule.program` starts in :attr:`text`: after each version start.

        A simple view's only; the ends of the segments its one reading
        tries ``{version}`` at.
        """
        if self._positions is None:
            segments = self.segments
            if self.prefix_length == 0:
                # _version_starts() with no mount point: the run of version-like
                # segments from the first (on a simple view a segment is one when
                # the pattern matches it as it is), usually one segment tested.
                fullmatch = self.version_re.fullmatch
                positions: list[int] = []
                position = 0
                for segment in segments:
                    position += len(segment) + 1
                    if fullmatch(segment) is not None:
                        positions.append(position)
                    elif positions:
                        break
                self._positions = positions
            else:
                self._positions = [sum(map(len, segments[: start + 1])) + start + 1 for start in self.readings[0][1]]
        return self._positions

    def version_at(self, index: int) -> bool:
        """Whether ``segments[index]`` is version-like (``index`` negative, from the end); False past the start.

        One test for every rule of a :attr:`CullRule.version_index` group
        on a plain path.
        """
        segments = self.segments
        return len(segments) >= -index and _is_version(segments[index], self.version_re)

    @property
    def readings(self) -> tuple:
        """The ``(segments, version starts)`` readings; see the class documentation."""
        if self._readings is None:
            segments = self.segments
            if self.plain:
                # The common case: no parameters, spaces or backslashes, one reading.
                self._readings = ((segments, _version_starts(segments, self.prefix_length, self.version_re)),)
                return self._readings
            # Each segment carries whether it belongs to the mount point, so
            # every reading knows how far its mount point reaches.
            tagged = [(s, i < self.prefix_length) for i, s in enumerate(segments)]
            variants = [tagged]
            if any(_is_blank(s) for s, _ in tagged):
                variants.append([(s, p) for s, p in tagged if not _is_blank(s)])
            if "\\" in self.folded:
                variants += [[(part, p) for s, p in v for part in s.split("\\") if part] for v in list(variants)]
            readings: list[tuple] = []
            for variant in variants:
                reading = tuple(s for s, _ in variant)
                if any(reading == r[0] for r in readings):
                    continue
                prefix = sum(p for _, p in variant)
                readings.append((reading, _version_starts(reading, prefix, self.version_re)))
            self._readings = tuple(readings)
        return self._readings


class RuleTable:
    """Rules arranged so a request finds the few that may match its path, whatever their methods.

    A rule is tried (:meth:`CullRule.matches_path`) only if the path could
    hold a match: every rule with literal tokens is filed under one of them,
    and skipped on a path without it.  Build one when the pipeline loads
    (``admin_cull`` builds one of all its rules); per request,
    :meth:`simple_candidates` (a simple view, :attr:`PathView.simple`) or
    :meth:`candidates` (any views) give the rules to try, in the table's
    order within each kind; the caller tells them apart by method.

    On a simple view, a rule whose pattern can only match the path's last
    segments (:attr:`CullRule.tail_checks`) is looked up by the one segment
    its most telling literal must be, counted from the end: a few dict
    lookups, whatever the number of rules (nova's policy gives some fifty).

    Example::

        >>> table = RuleTable(parse_rules(["GET /os-hosts/*/reboot", "* /**/action/move/**"]))
        >>> view = PathView(("v2.1", "os-hosts", "h1", "reboot"), re.compile("v[0-9.]+"))
        >>> table.simple_candidates(view)
        [CullRule('GET /os-hosts/*/reboot')]
        >>> table.simple_candidates(PathView(("v2.1", "servers"), re.compile("v[0-9.]+")))
        []
    """

    __slots__ = ("by_literal", "by_version", "groups", "simple_groups", "tail_index", "unconditional")

    def __init__(self, rules: Iterable[CullRule]) -> None:
        rules = list(rules)
        #: Rules without a literal nor a version group: tried on every path.
        self.unconditional = [r for r in rules if not r.literals and r.version_index is None]
        by_version: dict[int, list] = {}
        for rule in rules:
            if not rule.literals and rule.version_index is not None:
                by_version.setdefault(rule.version_index, []).append(rule)
        #: ``(index, rules)``: rules without a literal that need ``segments[index]``
        #: version-like on a plain path (:meth:`PathView.version_at`).
        self.by_version = list(by_version.items())
        #: ``(literal, rules)`` by longest literal (the most specific: a path with
        #: ``servers`` but no ``diagnostics`` skips ``GET /servers/*/diagnostics``), and as a dict.
        self.groups = _group_by_literal([r for r in rules if r.literals])
        self.by_literal = dict(self.groups)
        # Simple views: rules ending in fixed segments by segment, the others as above.
        tail = [r for r in rules if r.literals and r.tail_checks is not None and _has_literal_check(r)]
        other = [r for r in rules if r.literals and r not in tail]
        #: ``(index, {literal: rules})``, index from the end, for simple views.
        self.tail_index = _tail_index(tail)
        #: The rules with literals not in :attr:`tail_index`, by longest literal, each
        #: group with one regular expression for all its programs (see :func:`_screen`).
        self.simple_groups = [(literal,) + _screen(group) for literal, group in _group_by_literal(other)]

    def simple_candidates(self, view: PathView) -> list[CullRule]:
        """The rules that may match the simple view *view*; the others cannot."""
        found = self.unconditional
        if self.by_version:
            # PathView.version_at(), inlined: on a simple view a segment is
            # version-like when the pattern matches it as it is.
            segments = view.segments
            count = len(segments)
            fullmatch = view.version_re.fullmatch
            for index, group in self.by_version:
                if count >= -index and fullmatch(segments[index]) is not None:
                    found = found + group
        folded = view.folded
        if self.tail_index:
            parts = folded.split("/")
            count = len(parts)
            for index, by_literal in self.tail_index:
                if count < -index:
                    break  # the indexes come nearest the end first
                segment = parts[index]
                hit = by_literal.get(segment)
                if hit is not None:
                    found = found + hit
                if "." in segment:
                    hit = by_literal.get(segment.rsplit(".", 1)[0])
                    if hit is not None:
                        found = found + hit
        text = None
        for literal, anywhere, anywhere_rules, version, version_rules, others in self.simple_groups:
            if literal not in folded:
                continue
            if text is None:
                text = view.text
            if others:
                found = found + others
            if anywhere is not None:
                match = anywhere.match(text)
                if match is not None:
                    # The alternatives before the one that matched did not.
                    found = found + anywhere_rules[match.lastindex - 1 :]
            if version is not None:
                first = len(version_rules)
                for position in view.positions:
                    match = version.match(text, position)
                    if match is not None and match.lastindex - 1 < first:
                        first = match.lastindex - 1
                        if first == 0:
                            break
                if first < len(version_rules):
                    found = found + version_rules[first:]
        return found

    def candidates(self, views: list[PathView], folded: str) -> list[CullRule]:
        """The rules that may match one of *views*, whose folded texts *folded* joins."""
        found = self.unconditional
        if self.by_version:
            plain = views[0] if len(views) == 1 and views[0].plain else None
            for index, group in self.by_version:
                # A version test holds only for a path of one reading.
                if plain is None or plain.version_at(index):
                    found = found + group
        for literal, group in self.groups:
            if literal in folded:  # one substring test skips a whole group
                found = found + group
        return found


def _group_by_literal(rules: list[CullRule]) -> list[tuple[str, list[CullRule]]]:
    """``(literal, rules)``, each rule under its longest literal, in the rules' order."""
    groups: dict[str, list] = {}
    for rule in rules:
        groups.setdefault(max(rule.literals, key=len), []).append(rule)
    return list(groups.items())


def _screen(rules: list[CullRule]) -> tuple:
    """``(anywhere, anywhere rules, version, version rules, other rules)`` for :attr:`RuleTable.simple_groups`.

    *anywhere* is the alternation of the programs of the rules that may
    start anywhere (matched from the start of a simple view's text),
    *version* that of the ``{version}`` rules' programs (matched after each
    version start: a program of :attr:`CullRule.from_first` matches after a
    later start only where it matches after the first too); each is None
    without such rules.  On a simple view where neither matches, none of
    their rules can, whatever their literal pre-test says, and one match
    call tries them all; where one matches, the rules before the
    alternative that matched (its group, the match's ``lastindex``) did not.
    Rules without a program are always candidates.
    """
    anywhere = [r for r in rules if r.program is not None and r.anchor != "version"]
    version = [r for r in rules if r.program is not None and r.anchor == "version"]
    others = [r for r in rules if r.program is None]

    def alternation(group: list[CullRule]) -> re.Pattern | None:
        # A group per alternative: the match's lastindex names the first that matched.
        patterns = ["(%s)" % r.program.pattern for r in group if r.program is not None]
        return re.compile("|".join(patterns)) if patterns else None

    return alternation(anywhere), anywhere, alternation(version), version, others


def _has_literal_check(rule: CullRule) -> bool:
    return any(literal is not None for _, literal in rule.tail_checks or ())


def _tail_index(rules: list[CullRule]) -> list[tuple[int, dict]]:
    """Rules ending in fixed segments by ``(index from the end, literal)``: see :class:`RuleTable`.

    Each rule is filed once.  A request looks up one segment per index
    used, so the indexes are kept few: those of the literal nearest the
    end of each rule.  Among its literals at those indexes, a rule is filed
    under the one fewest other rules share (then the longest): on a simple
    path its match needs that segment to be the literal or its stem.
    """

    def pairs(rule: CullRule) -> list[tuple[int, str]]:
        checks = rule.tail_checks or ()
        return [(offset - rule.tail_length, literal) for offset, literal in checks if literal is not None]

    used = {max(pairs(rule))[0] for rule in rules}
    shared: dict[tuple[int, str], int] = {}
    for rule in rules:
        for pair in set(pairs(rule)):
            shared[pair] = shared.get(pair, 0) + 1
    index: dict[int, dict[str, list]] = {}
    for rule in rules:
        choices = [pair for pair in pairs(rule) if pair[0] in used]
        at, literal = min(choices, key=lambda pair: (shared[pair], -len(pair[1]), -pair[0]))
        index.setdefault(at, {}).setdefault(literal, []).append(rule)
    return sorted(index.items(), reverse=True)


# Characters that make a lenient reading differ from the plain one.
_ODD = re.compile(r"[;\\\s]")


def _fold(text: str) -> str:
    """Case-fold *text* as a lenient router might compare it."""
    if text.isascii():
        return text.lower()
    # Compatibility forms (fullwidth a), letters that change case into ASCII
    # (dotless i, long s) and letters with marks (dotted capital I, as
    # re.IGNORECASE matches it) all compare as the plain ASCII letters.
    decomposed = unicodedata.normalize("NFKD", text)
    bare = decomposed.translate(_combining_marks())
    return unicodedata.normalize("NFKD", bare.upper().lower())


_COMBINING_MARKS: dict = {}


def prepare_folding() -> None:
    """Build the folding tables now (some milliseconds, once per process) rather than on a first request."""
    _combining_marks()


def _combining_marks() -> dict:
    """A ``str.translate`` table deleting every combining mark: one C-speed pass per path.

    Built once per process, on first use; ``admin_cull`` builds it when the
    pipeline loads, so no request pays for it.
    """
    if not _COMBINING_MARKS:
        # Every code point with a combining class lies below U+20000.
        _COMBINING_MARKS.update((cp, None) for cp in range(0x300, 0x20000) if unicodedata.combining(chr(cp)))
    return _COMBINING_MARKS


def fold_action_key(key: str) -> str:
    """An action key as compared: NFKC, case-folded, outer white space stripped.

    Both a rule's keys and a body's are folded, so a lenient service that
    would take ``OS-MIGRATELIVE`` or fullwidth letters for the admin key
    cannot be reached with them::

        >>> fold_action_key(" OS-\uff2digrateLive")
        'os-migratelive'
    """
    if key.isascii():
        return key.lower().strip()
    # NFKC again after folding: case folding can leave a string unnormalised.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", key).casefold()).strip()


def _bare(segment: str) -> str:
    """The segment as a lenient router might read it: no ;params or outer spaces, folded."""
    return _fold(segment.split(";", 1)[0].strip())


def _is_blank(segment: str) -> bool:
    """Whether *segment* is empty once ``;`` parameters and outer spaces are dropped."""
    return not segment.split(";", 1)[0].strip()


def _is_version(segment: str, version_re: re.Pattern) -> bool:
    if version_re.fullmatch(segment) is not None:
        return True
    if segment.isascii() and ";" not in segment and segment.strip() == segment:
        return False  # a lenient reading would not change it
    bare = _bare(segment)
    return bare != segment and version_re.fullmatch(bare) is not None


def _version_starts(segments: tuple[str, ...], prefix_length: int, version_re: re.Pattern) -> tuple[int, ...]:
    """Where ``{version}`` is tried: every plausible split of the path into mount point, version and rest.

    - each version-like segment of the mount point (``SCRIPT_NAME``);
    - each segment of the run of version-like segments right after the
      mount point (``/v1/v2.1/acme`` under a urlmap mounting ``/v1``: the
      version may be ``v1`` or ``v2.1``);
    - each segment of the run that starts at the first version-like segment
      anywhere (a mount point the filter cannot see, as ``/compute``).

    A version-like segment after a segment that is not one, past the first
    run, is not a version (``/v1/AUTH_acme/v2/photo.jpg``).
    """
    flags = [_is_version(segment, version_re) for segment in segments]
    starts = {i for i in range(min(prefix_length, len(segments))) if flags[i]}
    first = flags.index(True) if True in flags else None
    for begin in (prefix_length, first):
        if begin is None:
            continue
        index = begin
        while index < len(flags) and flags[index]:
            starts.add(index)
            index += 1
    return tuple(sorted(starts))


def _literal_matches(literal: str, segment: str) -> bool:
    if _fold(segment) == literal:
        return True
    base = _bare(segment)
    if base == literal:
        return True
    stem = base.rsplit(".", 1)[0]
    return stem == literal and stem != base


def _match(tokens: tuple, segments: tuple[str, ...], start: int, version_re: re.Pattern) -> bool:
    """Whether *tokens* match ``segments[start:]`` to the end.

    Walks the set of segment positions the tokens so far can end at, so the
    work is at most tokens x segments whatever the ``**`` in the pattern: a
    long path cannot make matching explode.
    """
    end = len(segments)
    positions = {start}
    for token in tokens:
        if token.kind == "any":
            positions = set(range(min(positions), end + 1))
            continue
        reached = set()
        for si in positions:
            if si < end:
                segment = segments[si]
                if token.kind == "one":
                    reached.add(si + 1)
                elif token.kind == "literal":
                    if _literal_matches(token.text, segment):
                        reached.add(si + 1)
                elif _is_version(segment, version_re):
                    reached.add(si + 1)
        if not reached:
            return False
        positions = reached
    return end in positions


# Pieces of a CullRule.program, on the text "/seg/seg/...": one segment, and
# any number of segments tried from the fewest (a "**" followed by more).
_ONE_SEGMENT = "/[^/]++"
_SKIP = "(?:/[^/]++)*?"


def _program(tokens: tuple, anchor: str) -> re.Pattern | None:
    """The pattern as a regular expression on a simple view's text (see :attr:`CullRule.program`).

    The tokens after a leading ``{version}`` (where the match starts at the
    end of the version segment) or all of them (a leading ``**``, from the
    start of the path) fall into blocks of fixed length between ``**``.
    Every block but the last is found at its leftmost place and kept there
    (an atomic group): a later place leaves less room for what follows, so
    the leftmost one matches whenever any does, and the work stays linear
    in the segments whatever the pattern.  The last block ends the path,
    unless ``**`` follows it.  On a simple path a literal token matches a
    segment that is the literal, or the literal and a final extension
    (``.json``): :func:`_literal_matches` on a plain ASCII segment.
    """
    rest = tokens[1:] if anchor == "version" else tokens
    if any(token.kind == "version" for token in rest):
        return None
    blocks: list[str] = [""]
    for token in rest:
        if token.kind == "any":
            blocks.append("")
        elif token.kind == "one":
            blocks[-1] += _ONE_SEGMENT
        elif "/" in token.text:
            # A fullwidth solidus folds to "/": no segment of a simple path holds it.
            return re.compile("(?!)")
        else:
            blocks[-1] += "/" + re.escape(token.text) + r"(?:\.[^/.]*+)?(?![^/])"
    parts = [blocks[0]]
    for block in blocks[1:-1]:
        parts.append("(?>" + _SKIP + block + ")")
    if len(blocks) == 1:
        parts.append(r"\Z")
    elif blocks[-1]:
        parts.append(_SKIP + blocks[-1] + r"\Z")
    return re.compile("".join(parts))


def parse_rule(text: str) -> CullRule:
    """Parse one rule line (``"METHODS PATTERN [(KEYS)]"``); raise :class:`RuleError` naming it.

    Example::

        >>> parse_rule("* /os-hypervisors/**").methods is None
        True
        >>> parse_rule("GET os-hypervisors")
        Traceback (most recent call last):
          ...
        tenancy_mw.cull.rules.RuleError: rule 'GET os-hypervisors': the pattern must start with '/'
        >>> parse_rule("POST /servers/*/action (evacuate,)")
        Traceback (most recent call last):
          ...
        tenancy_mw.cull.rules.RuleError: rule 'POST /servers/*/action (evacuate,)': an action key is empty
    """
    source = " ".join(text.split())
    head, action_keys = _split_action_keys(source, text)
    parts = head.split(" ")
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
    tokens: list = []
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
            tokens.append(_Token("literal", _fold(raw)))
        else:
            raise RuleError(
                "rule %r: %r is not a pattern token (a literal segment, *, **, {tenant} or {version})" % (text, raw)
            )
    if tokens[0].kind == "version":
        anchor = "version"
    else:
        anchor = "anywhere"
        if tokens[0].kind != "any":
            tokens.insert(0, _Token("any"))  # may start at any segment
    return CullRule(source, methods, tuple(tokens), anchor, action_keys)


def _split_action_keys(source: str, text: str) -> tuple[str, frozenset[str] | None]:
    """*source* without its final ``(key,key)`` list, and the list's keys folded (``None`` without one)."""
    if "(" not in source and ")" not in source:
        return source, None
    opening = source.find("(")
    if opening == -1 or source.count("(") != 1 or source.count(")") != 1 or not source.endswith(")"):
        raise RuleError(
            "rule %r: parentheses may only hold one list of action keys, at the end: "
            "'METHODS /pattern (key,key)'" % text
        )
    if not source[:opening].endswith(" "):
        raise RuleError("rule %r: the action-key list must follow the pattern after a space" % text)
    keys = set()
    for raw in source[opening + 1 : -1].split(","):
        key = raw.strip()
        if not key:
            raise RuleError("rule %r: an action key is empty" % text)
        folded = fold_action_key(key)
        if not (_ACTION_KEY.fullmatch(key) and _ACTION_KEY.fullmatch(folded)):
            raise RuleError("rule %r: action key %r holds white space, a parenthesis or a comma" % (text, key))
        keys.add(folded)
    return source[:opening].rstrip(), frozenset(keys)


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
