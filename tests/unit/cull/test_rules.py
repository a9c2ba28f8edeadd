"""The admin_cull rule language (tenancy_mw.cull.rules)."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tenancy_mw.cull.rules import (
    DEFAULT_RULES,
    PathView,
    RuleError,
    RuleTable,
    fold_action_key,
    parse_rule,
    parse_rules,
)
from tenancy_mw.tenants.ids import DEFAULT_VERSION_PATTERN

VERSION = re.compile(DEFAULT_VERSION_PATTERN, re.IGNORECASE)


def culls(rule_text, method, path):
    segments = tuple(s for s in path.split("/") if s)
    return parse_rule(rule_text).matches(segments, {method}, VERSION)


@pytest.mark.parametrize(
    ("rule", "method", "path", "expected"),
    [
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v2.1/acme", True),
        ("PUT,DELETE /{version}/{tenant}", "delete".upper(), "/V2.1/acme", True),
        ("PUT,DELETE /{version}/{tenant}", "GET", "/v2.1/acme", False),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v2.1/acme/servers", False),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/compute/v2.1/acme", True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v2.1", False),
        ("* /**/action/move/**", "GET", "/v2.1/acme/action/move", True),
        ("* /**/action/move/**", "OPTIONS", "/v2.1/acme/servers/7/action/move", True),
        ("* /**/action/move/**", "POST", "/v2.1/acme/servers/7/Action;x/MOVE.json", True),
        ("* /**/action/move/**", "POST", "/v2.1/acme/servers/7/action", False),
        ("* /**/action/move/**", "POST", "/v2.1/acme/servers/7/actions/move", False),
        ("* /{version}/{tenant}/action/**", "POST", "/v2.1/acme/action", True),
        ("* /{version}/{tenant}/action/**", "POST", "/v2.1/acme/action/restore/now", True),
        ("* /{version}/{tenant}/action/**", "POST", "/v2.1/acme/servers/7/action", False),
        # Resource patterns: tried at the root, after the version and after the tenant.
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/acme/os-services/7", True),
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/os-services/7", True),
        ("PUT,DELETE /os-services/*", "DELETE", "/os-services/7", True),
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/acme/os-services", False),
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/acme/os-services/7/x", False),
        ("PUT,DELETE /os-services/*", "GET", "/v2.1/acme/os-services/7", False),
        ("* /os-hypervisors/**", "GET", "/v2.1/acme/os-hypervisors", True),
        ("* /os-hypervisors/**", "GET", "/v2.1/acme/os-hypervisors/1/servers", True),
        ("* /os-hypervisors/**", "GET", "/v2.1/acme/servers/os-hypervisors", True),
        ("* /os-hypervisors/**", "GET", "/v2.1/acme/os-hypervisor", False),
        ("GET /a/*/c", "GET", "/v1/t/a/b/c", True),
        ("GET /a/*/c", "GET", "/v1/t/a/c", False),
        # Patterns of fixed length (after a leading "**") are matched at the
        # path's end only on a path of one reading: still leniently.
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/acme/OS-Services.json/7", True),
        ("PUT,DELETE /os-services/*", "DELETE", "/v2.1/acme/os-services.json/7/x", False),
        ("GET /a/*/c", "GET", "/v1/t/A/b/C.xml", True),
        ("GET /a/*/c", "GET", "/v1/t/a/b/c/d", False),
        ("PUT,DELETE /**/{version}/{tenant}", "DELETE", "/api/V2/acme", True),
        ("PUT,DELETE /**/{version}/{tenant}", "DELETE", "/acme", False),
        ("PUT,DELETE /**/{version}/{tenant}", "DELETE", "/v2/acme/servers", False),
    ],
)
def test_rule_matching(rule, method, path, expected):
    assert culls(rule, method, path) is expected


@pytest.mark.parametrize(
    ("rule", "method", "path", "prefix", "expected"),
    [
        # Operator rules are tried at any segment: mounts and forwarded prefixes hide nothing.
        ("PUT,DELETE /os-services/**", "DELETE", "/compute/os-services/3", 1, True),
        ("PUT,DELETE /os-services/**", "DELETE", "/x/os-services/3", 0, True),
        ("PUT,DELETE /os-services/**", "DELETE", "/acme/os-services/3", 0, True),
        # {version} is tried in the mount point, in the run of version-like segments right
        # after it, and in the run starting at the first version-like segment: every plausible
        # split into mount point, version and tenant (a urlmap mounting /v1 in front of an app
        # routing /{version}/{tenant} routes /v1/v2.1/acme as tenant acme).
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1/v2.1/acme", 1, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1/v2.1/acme;x", 1, True),
        ("* /{version}/{tenant}/action/**", "POST", "/v1/v2.1/acme/action/restore", 1, True),
        ("* /{version}/{tenant}/action/**", "POST", "/v1/v2.1/acme/action/restore", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1/v2.1/acme", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/compute/v1/v2.1/acme", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1/v2/v3/acme", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1/x/v2.1/acme", 0, False),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/compute/v2.1/acme", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "PUT", "/v1/AUTH_acme/v2/photo.jpg", 0, False),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1.0/acme/widgets/v2/9", 0, False),
        # Fail closed: a tenant named like a version may be a version under a /v2.1 mount.
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v2.1/v3/servers", 0, True),
        ("PUT,DELETE /{version}/{tenant}", "DELETE", "/v2.1/v3/servers/7", 0, False),
        ("GET /{version}/{tenant}", "GET", "/v2.1/acme/servers/v2/detail", 0, False),
    ],
)
def test_where_patterns_are_tried(rule, method, path, prefix, expected):
    segments = tuple(s for s in path.split("/") if s)
    assert parse_rule(rule).matches(segments, {method}, VERSION, prefix) is expected


@pytest.mark.parametrize(
    "path",
    [
        "/v2.1/acme/;/action/restore",
        "/v2.1/;/acme/action/restore",
        "/v2.1/acme/servers/7/action/;/move",
        "/v2.1/acme/ /action/restore",
        "/v2.1/acme/\xa0/action/restore",
        "/v2.1/acme/act\u0131on/restore",
        "/v2.1/acme/\uff41ction/restore",
        "/v2.1/acme/act\u0130on/restore",
        "/v2.1/acme/acti\u00f3n/restore",
        "/v2.1\xa0/acme/action/restore",
    ],
)
def test_lenient_readings(path):
    segments = tuple(s for s in path.split("/") if s)
    rules = parse_rules(DEFAULT_RULES)
    assert any(r.matches(segments, {"POST"}, VERSION) for r in rules), path


def test_backslash_is_also_read_as_a_separator():
    assert culls("* /**/action/move/**", "POST", "/v2.1/acme/servers\\7\\action\\move")
    # ... while a backslash tenant id is still one segment for /{version}/{tenant}.
    assert culls("PUT,DELETE /{version}/{tenant}", "DELETE", "/v1.0/resel1\\sub2\\acct3")


def test_path_view_prepares_once_for_many_rules():
    rules = parse_rules(DEFAULT_RULES)
    view = PathView(("v2.1", "acme", "servers", "7", "action", "move"), VERSION)
    assert [r.source for r in rules if r.matches_view(view, {"POST"})] == [
        "* /**/action/move/**",
        "* /{version}/**/action/*/**",
    ]
    public = PathView(("v2.1", "acme", "servers", "7", "action"), VERSION)
    assert [r.source for r in rules if r.matches_view(public, {"POST"})] == []


def test_parse_rules_skips_comments_and_blank_lines():
    rules = parse_rules(["# operators' rules\n\nPUT,DELETE /os-services/*\n  * /os-hypervisors/**  \n"])
    assert [r.source for r in rules] == ["PUT,DELETE /os-services/*", "* /os-hypervisors/**"]
    assert rules[0].methods == frozenset({"PUT", "DELETE"})
    assert rules[1].methods is None


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("/os-services", "expected 'METHODS /pattern'"),
        ("GET", "expected 'METHODS /pattern'"),
        ("GET /a /b", "expected 'METHODS /pattern'"),
        ("GET os-services", "must start with '/'"),
        ("G@T /x", "is not an HTTP method"),
        ("GET,,PUT /x", "is not an HTTP method"),
        ("GET /", "names no segment"),
        ("GET /a/{project}", "is not a pattern token"),
        ("GET /a*b", "is not a pattern token"),
    ],
)
def test_bad_rules_are_refused_naming_the_rule(text, fault):
    with pytest.raises(RuleError) as caught:
        parse_rule(text)
    assert fault in str(caught.value)
    assert repr(text) in str(caught.value)


def test_repeated_double_star_collapses():
    assert parse_rule("* /**/**/move").tokens == parse_rule("* /**/move").tokens


_SEGMENTS = ["v1", "v2.1", "V3", "acme", "action", "Action.json", "move", "restore", "os-services", "x", "\u2211"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SEGMENTS), max_size=7), st.integers(0, 2))
def test_the_one_reading_shortcut_agrees_with_the_general_matcher(segments, prefix):
    # On a path of one reading, a rule of fixed length is tried at one place
    # only; the general matcher, which walks every reading and every start,
    # must come to the same answer for every rule.
    rules = parse_rules(list(DEFAULT_RULES) + ["PUT,DELETE /os-services/*", "GET /a/*/c", "* /x/{version}/*"])
    shortcut = PathView(tuple(segments), VERSION, prefix)
    general = _general(segments, prefix)
    assert shortcut.plain
    for rule in rules:
        assert rule.matches_path(shortcut) is rule.matches_path(general), (rule.source, segments, prefix)


def _general(segments, prefix: int) -> PathView:
    """A view of *segments* that takes the general matcher's road (every reading, every start, _match)."""
    view = PathView(tuple(segments), VERSION, prefix)
    view.plain = False
    view.simple = False
    return view


# Segments a simple (plain ASCII) path may hold, alike enough to rule literals to
# match in every way: as they are, in capitals, with an extension, as a longer stem.
_SIMPLE_SEGMENTS = [
    "v1",
    "v2.1",
    "V3",
    "v2.1.json",
    "v2",
    "acme",
    "action",
    "Action.json",
    "ACTION.",
    "action.x.json",
    "actions",
    "move",
    "MOVE.xml",
    "restore",
    "servers",
    "a.b",
    "A.B.json",
    "a.b.c",
    "x",
    "x.",
    ".json",
    "7",
    "a",
    "b",
]
# Pattern tokens: wildcards, versions, and literals with and without dots; one
# literal a fullwidth solidus folds into "/", which no segment of a simple path holds.
_TOKENS = ["**", "*", "{tenant}", "{version}", "action", "move", "servers", "v2.1", "a.b", "x", "", "a\uff0fb"]


@st.composite
def _patterns(draw) -> str:
    tokens = draw(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=6))
    if draw(st.booleans()):
        tokens.insert(0, "{version}")  # half of them tried at the version starts
    if not any(tokens):
        tokens.append("*")
    return "* /" + "/".join(tokens)


@settings(max_examples=1000, deadline=None)
@example(["* /{version}/x"], ["v1", "acme", "v2", "x"], 0)
@example(["* /{version}/**/action/*"], ["V3", "v2.1", "action.x.json", "7"], 1)
@example(["* /**/a\uff0fb/**"], ["v1", "a", "b"], 0)
@given(
    st.lists(_patterns(), min_size=1, max_size=6),
    st.lists(st.sampled_from(_SIMPLE_SEGMENTS), min_size=1, max_size=8),
    st.integers(0, 3),
)
def test_the_simple_path_matching_agrees_with_the_general_matcher(patterns, segments, prefix):
    # On a simple path a rule is tried by its compiled program or its tail
    # checks, and a table hands out only the rules that may match (looked up
    # by segment, screened by one regular expression per group): none of it
    # may tell another answer than the general matcher, which walks every
    # reading and every start, for any rule on any path.
    rules = parse_rules(patterns + list(DEFAULT_RULES))
    simple = PathView(tuple(segments), VERSION, prefix)
    assert simple.simple
    general = _general(segments, prefix)
    matching = [rule for rule in rules if rule.matches_path(general)]
    assert [rule for rule in rules if rule.matches_path(simple)] == matching, (segments, prefix)
    table = RuleTable(rules)
    for found in (table.simple_candidates(simple), table.candidates([general], general.folded)):
        assert {rule.source for rule in matching} <= {rule.source for rule in found}, (segments, prefix)


@pytest.mark.parametrize(
    ("segments", "simple"),
    [
        (("v2.1", "acme", "servers"), True),
        (("v2.1", "Acme.json", "a.b"), True),
        (("v2.1", "acme;x"), False),
        (("v2.1", "a b"), False),
        (("v2.1", "a\\b"), False),
        (("v2.1", "\u2211"), False),
        (("v2.1", "a\tb"), False),
        (("v2.1", "", "acme"), False),
        (("v2.1", "a/b"), False),
        ((), False),
    ],
)
def test_a_view_is_simple_only_when_plain_ascii_segments_as_the_canonical_form_gives(segments, simple):
    assert PathView(segments, VERSION).simple is simple


def test_a_table_looks_rules_ending_in_fixed_segments_up_by_segment():
    rules = parse_rules(["GET /os-hosts/*/reboot", "DELETE /servers/*/migrations/*", "* /**/action/move/**"])
    table = RuleTable(rules)
    assert [(index, sorted(literals)) for index, literals in table.tail_index] == [
        (-1, ["reboot"]),
        (-2, ["migrations"]),
    ]

    def found(*segments):
        return [rule.source for rule in table.simple_candidates(PathView(segments, VERSION))]

    assert found("v2.1", "os-hosts", "h1", "Reboot.json") == ["GET /os-hosts/*/reboot"]
    assert found("v2.1", "servers", "7", "migrations", "8") == ["DELETE /servers/*/migrations/*"]
    assert found("v2.1", "servers", "7", "action", "move") == ["* /**/action/move/**"]
    # An "action" segment alone is screened out by the group's expression.
    assert found("v2.1", "servers", "7", "action") == []
    assert found("v2.1", "servers", "detail") == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SEGMENTS + ["", "v2;x", " v1"]), max_size=7), st.integers(0, 2))
def test_a_rule_whose_version_segment_is_not_one_never_matches(segments, prefix):
    # admin_cull skips a whole group of literal-less rules when the segment
    # their version_index names is not version-like: on a path of one
    # reading, no rule of the group may match then.
    rules = parse_rules(list(DEFAULT_RULES) + ["PUT /{version}/*/x", "* /**/{version}/*/*", "GET /a/{version}"])
    grouped = [rule for rule in rules if rule.version_index is not None]
    assert {rule.source for rule in grouped} >= {"PUT,DELETE /{version}/{tenant}", "PUT /{version}/*/x"}
    view = PathView(tuple(segments), VERSION, prefix)
    for rule in grouped:
        if view.plain and not view.version_at(rule.version_index):
            assert not rule.matches_path(view), (rule.source, segments, prefix)


# Action keys: "METHODS /pattern (key,key)", as OpenStack's policy docs write them.

LIVE_MIGRATE = "POST /servers/*/action (os-migrateLive,evacuate,os-resetState)"


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (LIVE_MIGRATE, {"os-migratelive", "evacuate", "os-resetstate"}),
        ("POST /servers/*/action (os-migrateLive, evacuate)", {"os-migratelive", "evacuate"}),
        ("POST  /volumes/*/action   (os-show_image_metadata)", {"os-show_image_metadata"}),
        ("* /servers/*/action (\uff45vacuate)", {"evacuate"}),
        ("POST /servers/*/action (Evacuate,EVACUATE)", {"evacuate"}),
        ("POST /servers/*/action", None),
    ],
)
def test_action_keys_are_parsed_folded(text, keys):
    rule = parse_rule(text)
    assert rule.action_keys == (None if keys is None else frozenset(keys))
    assert rule.source == " ".join(text.split())
    assert [t.kind for t in rule.tokens] == [t.kind for t in parse_rule(text.split("(")[0]).tokens]


@pytest.mark.parametrize(
    ("body_keys", "expected"),
    [
        ({"os-migrateLive"}, True),
        ({"reboot", "evacuate"}, True),
        ({"OS-MIGRATELIVE"}, True),
        ({" os-resetState\t"}, True),
        ({"\uff4fs-migrateLive"}, True),
        ({"reboot"}, False),
        ({"os-migrateLiv"}, False),
        (set(), False),
    ],
)
def test_a_keyed_rule_matches_when_path_and_a_body_key_match(body_keys, expected):
    rule = parse_rule(LIVE_MIGRATE)
    path = ("v2.1", "acme", "servers", "7", "action")
    assert rule.matches(path, {"POST"}, VERSION, body_keys=body_keys) is expected
    # The path and the method still decide first.
    assert rule.matches(path[:-1] + ("actions",), {"POST"}, VERSION, body_keys=body_keys) is False
    assert rule.matches(path, {"PUT"}, VERSION, body_keys=body_keys) is False


def test_a_rule_without_keys_ignores_the_body():
    rule = parse_rule("POST /servers/*/action")
    assert rule.matches(("servers", "7", "action"), {"POST"}, VERSION, body_keys={"reboot"})
    assert rule.matches(("servers", "7", "action"), {"POST"}, VERSION)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("POST /servers/*/action ()", "an action key is empty"),
        ("POST /servers/*/action (evacuate,)", "an action key is empty"),
        ("POST /servers/*/action (,evacuate)", "an action key is empty"),
        ("POST /servers/*/action (a,,b)", "an action key is empty"),
        ("POST /servers/*/action (os migrateLive)", "action key 'os migrateLive' holds white space"),
        ("POST /servers/*/action (os-migrateLive) /more", "parentheses may only hold one list"),
        ("POST /servers/*/action (a) (b)", "parentheses may only hold one list"),
        ("POST /servers/*/action ((a))", "parentheses may only hold one list"),
        ("POST /servers/*/action (a", "parentheses may only hold one list"),
        ("POST /servers/*/action a)", "parentheses may only hold one list"),
        ("POST(a) /servers", "parentheses may only hold one list"),
        ("POST /servers/*/action(os-migrateLive)", "must follow the pattern after a space"),
        ("POST /servers/(a)/action", "parentheses may only hold one list"),
        ("(a)", "must follow the pattern after a space"),
        ("POST (a)", "expected 'METHODS /pattern'"),
        ("POST /servers/*/action (\uff08a)", "holds white space, a parenthesis or a comma"),
        ("POST /servers/*/action (a\uff0cb)", "holds white space, a parenthesis or a comma"),
    ],
)
def test_bad_action_key_lists_are_refused_naming_the_rule(text, fault):
    with pytest.raises(RuleError) as caught:
        parse_rule(text)
    assert fault in str(caught.value)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("key", "folded"),
    [
        ("os-migrateLive", "os-migratelive"),
        ("  Evacuate ", "evacuate"),
        ("\uff25\uff56acuate", "evacuate"),
        ("STRASSE", "strasse"),
        ("Stra\u00dfe", "strasse"),
        ("\u212bngstr\u00f6m", "\u00e5ngstr\u00f6m"),
        ("\u3000evacuate\u00a0", "evacuate"),
    ],
)
def test_action_keys_fold_as_nfkc_casefold_and_strip(key, folded):
    assert fold_action_key(key) == folded


# Segments of every kind a canonical path may hold, simple or not: lenient
# spellings of literals (parameters, outer and Unicode spaces, backslashes,
# fullwidth, dotless and dotted i, long s, Kelvin sign, combining marks,
# trailing and double dots, double extensions), version-like ones in odd
# spellings, and a fullwidth solidus.
_ODD_SEGMENTS = _SIMPLE_SEGMENTS + [
    "action;x",
    "action ",
    "\u00a0action",
    "act\u0131on",
    "ACT\u0130ON",
    "\uff41ction",
    "action\\move",
    "v2;p",
    " v1",
    "\uff56\uff12",
    "\u017fervers",
    "servers\u3000",
    "\u212a",
    "re\u0301store",
    "action..",
    "action.v2.json",
    "a\uff0fb",
    "\u2211",
]
# Rule literals spelled as an operator might: capitals, dots, non-ASCII forms.
_ODD_TOKENS = _TOKENS + ["Action", "\u017fervers", "\uff41ction", "restore", "\u0131", "K", "os-hosts.json"]


@st.composite
def _odd_patterns(draw) -> str:
    tokens = draw(st.lists(st.sampled_from(_ODD_TOKENS), min_size=1, max_size=5))
    if draw(st.booleans()):
        tokens.insert(0, "{version}")
    if not any(tokens):
        tokens.append("*")
    return "* /" + "/".join(tokens)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(_odd_patterns(), min_size=1, max_size=4),
    st.lists(st.sampled_from(_ODD_SEGMENTS), min_size=1, max_size=7),
    st.integers(0, 3),
)
def test_every_shortcut_agrees_with_the_general_matcher_on_odd_segments(patterns, segments, prefix):
    # The view admin_cull builds (canonical=True) may be simple, plain or
    # neither; whichever road a rule takes (tail checks, compiled program,
    # table lookups and screens), it must come to the general matcher's answer.
    rules = parse_rules(patterns + list(DEFAULT_RULES))
    view = PathView(tuple(segments), VERSION, prefix, canonical=True)
    general = _general(segments, prefix)
    matching = {rule.source for rule in rules if rule.matches_path(general)}
    assert {rule.source for rule in rules if rule.matches_path(view)} == matching, (segments, prefix)
    table = RuleTable(rules)
    found = table.simple_candidates(view) if view.simple else table.candidates([view], view.folded)
    assert matching <= {rule.source for rule in found}, (segments, prefix)
