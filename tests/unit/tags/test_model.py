"""The pure tag helpers: validation, the query parser and ``matches()`` (their SQL: test_sql.py)."""

from __future__ import annotations

import pytest

from tenancy_mw.tags.model import InvalidTag, InvalidTagQuery, parse_tag_query, validate_tag

# -- validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "red",
        "Red",
        "red ",
        " x",
        "é" * 30,
        "∑" * 20,
        "a" * 60,
        "100%",
        "a.b",
        "tags",
        "with space",
        "emoji-😀",
        "%",
        "%zz",
    ],
)
def test_valid_tags(tag):
    assert validate_tag(tag) == tag


@pytest.mark.parametrize(
    ("tag", "rule", "fragment"),
    [
        ("", "empty", "empty tag"),
        ("a" * 61, "too-long", "61 bytes"),
        ("é" * 31, "too-long", "62 bytes"),  # 31 characters, but 62 bytes: the spec counts bytes
        ("∑" * 21, "too-long", "63 bytes"),
        ("a/b", "slash", "'/'"),
        ("a,b", "comma", "','"),
        ("a\nb", "control-character", "control character"),
        ("a\x00", "control-character", "control character"),
        ("%2F", "percent-escape", "percent-escape"),
        ("%u0041", "percent-escape", "percent-escape"),
        (".", "dot-segment", "dot segment"),
        ("..", "dot-segment", "dot segment"),
        ("\ud800", "not-unicode", "lone surrogate"),
        (5, "not-a-string", "not a string"),
        (None, "not-a-string", "not a string"),
    ],
)
def test_invalid_tags_name_the_rule(tag, rule, fragment):
    with pytest.raises(InvalidTag) as caught:
        validate_tag(tag)
    assert caught.value.rule == rule
    assert fragment in caught.value.detail


# -- the parser ---------------------------------------------------------------


def test_the_four_parameters_of_the_spec():
    query = parse_tag_query("tags=red,blue&tags-any=green,orange&not-tags=old&not-tags-any=a,b&limit=5")
    assert query.tags == {"red", "blue"}
    assert query.tags_any == {"green", "orange"}
    assert query.not_tags == {"old"}
    assert query.not_tags_any == {"a", "b"}
    assert all(isinstance(field, frozenset) for field in query[:4])


def test_no_tag_parameters_matches_everything():
    for query_string in ("", "limit=10&marker=x", "name=tags"):
        query = parse_tag_query(query_string)
        assert not query
        assert query.matches([])
        assert query.matches(["anything"])


def test_a_repeated_parameter_is_merged():
    # openstacksdk sends a Python list as repeated parameters.
    assert parse_tag_query("tags=a&tags=b,c&tags=a").tags == {"a", "b", "c"}


def test_percent_encoding_and_plus_are_decoded_once():
    query = parse_tag_query("tags=%E2%88%91,a+b,%25zz")
    assert query.tags == {"∑", "a b", "%zz"}


def test_an_encoded_parameter_name_is_read_too():
    assert parse_tag_query("%74ags=red").tags == {"red"}


def test_tags_are_case_sensitive():
    query = parse_tag_query("tags=Red")
    assert query.matches(["Red"])
    assert not query.matches(["red"])


@pytest.mark.parametrize(
    ("query_string", "rule", "fragments"),
    [
        ("tags=", "empty", ["empty tag", "tags"]),
        ("tags-any=a,,b", "empty", ["empty tag", "tags-any"]),
        ("not-tags=a,", "empty", ["not-tags"]),
        ("tags=" + "x" * 61, "too-long", ["61 bytes", "tags"]),
        ("not-tags-any=a%2Fb", "slash", ["'a/b'", "not-tags-any"]),
        ("tags=a%0Ab", "control-character", ["tags"]),
        ("tags=%252F", "percent-escape", ["'%2F'"]),
        ("tags=%FF", "invalid-utf8", ["not valid UTF-8", "tags"]),
    ],
)
def test_bad_parameters_name_the_tag_parameter_and_rule(query_string, rule, fragments):
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query(query_string)
    assert caught.value.rule == rule
    for fragment in fragments:
        assert fragment in caught.value.detail


def test_a_wsgi_query_string_with_raw_utf8_bytes():
    # PEP 3333: a server may hand raw bytes as latin-1 text.
    raw = "tags=∑".encode().decode("latin-1")
    assert parse_tag_query(raw).tags == {"∑"}


def test_too_many_tags_in_one_query():
    names = ",".join("t%d" % n for n in range(51))
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query("tags=" + names)
    assert caught.value.rule == "too-many-tags"
    assert parse_tag_query("tags=" + names, max_tags=None).tags


def test_a_mapping_as_input():
    query = parse_tag_query({"tags": "a,b", "not-tags": ["c", "d,e"], "other": "x"})
    assert query.tags == {"a", "b"}
    assert query.not_tags == {"c", "d", "e"}


def test_unknown_semantics_is_refused():
    with pytest.raises(ValueError, match="not_tags_semantics"):
        parse_tag_query("tags=a", "neutron")


# -- matches(): the spec's sentences ---------------------------------------


def matching(query_string, semantics="guideline"):
    query = parse_tag_query(query_string, semantics)
    resources = {"none": set(), "red": {"red"}, "blue": {"blue"}, "both": {"red", "blue"}, "green": {"green"}}
    return sorted(name for name, tags in resources.items() if query.matches(tags))


def test_matches_follows_the_guideline():
    assert matching("tags=red,blue") == ["both"]
    assert matching("tags-any=red,blue") == ["blue", "both", "red"]
    # "do not have the red nor the blue tag"
    assert matching("not-tags=red,blue") == ["green", "none"]
    # "do not have the red tag, or do not have the blue tag"
    assert matching("not-tags-any=red,blue") == ["blue", "green", "none", "red"]


def test_nova_semantics_swap_the_not_parameters():
    assert matching("not-tags=red,blue", "nova") == ["blue", "green", "none", "red"]
    assert matching("not-tags-any=red,blue", "nova") == ["green", "none"]
    query = parse_tag_query("not-tags=red,blue", "nova")
    # The fields still hold what each parameter held.
    assert query.not_tags == {"red", "blue"}
    assert not query.not_tags_any


def test_a_contradictory_query_is_valid_and_matches_nothing():
    assert matching("tags=blue&not-tags=blue") == []
    assert matching("tags=red,blue&not-tags-any=red,blue") == []


# -- pure ------------------------------------------------------------------
# tenancy_mw.tags.model and tenancy_mw.tags.store import no WSGI machinery: checked
# with the other pure helpers in tests/unit/test_hot_path.py.  tenancy_mw.tags.model
# and the tag_query filter import no SQLAlchemy either: test_without_sql.py.


def test_a_multidict_as_input_merges_repeated_parameters():
    """webob's ``req.GET`` holds a repeated parameter once per value: all of them count, not the last."""
    from webob.multidict import MultiDict

    query = parse_tag_query(MultiDict([("tags", "a"), ("tags", "b,c"), ("not-tags", "x")]))
    assert query.tags == {"a", "b", "c"}
    assert query.not_tags == {"x"}


@pytest.mark.parametrize("value", [None, 3, b"red"], ids=["none", "int", "bytes"])
def test_a_mapping_value_that_is_not_text_is_refused_with_the_parameter(value):
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query({"tags-any": value})
    assert caught.value.rule == "not-a-string"
    assert caught.value.parameter == "tags-any"


def test_matches_refuses_a_bare_string():
    """``matches("red")`` would test the tags r, e and d."""
    with pytest.raises(TypeError, match="not a string"):
        parse_tag_query("tags=r,e,d").matches("red")
