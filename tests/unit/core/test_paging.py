"""OpenStack's paging conventions (tenancy_mw.core.paging): parse_page's rules and next_link's URL."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from webob.multidict import MultiDict

import tenancy_mw
from tenancy_mw.core.paging import (
    DEFAULT_MAX_LIMIT,
    MAX_LIMIT_VALUE,
    MAX_MARKER_LENGTH,
    InvalidPage,
    Page,
    next_link,
    parse_page,
)
from tenancy_mw.core.paths import Refused
from tenancy_mw.tags.model import MAX_RESOURCE_ID_LENGTH

# parse_page ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "page"),
    [
        ("", Page(None, DEFAULT_MAX_LIMIT)),
        ("tags=red&sort_key=id", Page(None, DEFAULT_MAX_LIMIT)),
        ("limit=0", Page(None, 0)),
        ("limit=1", Page(None, 1)),
        ("limit=007", Page(None, 7)),
        ("limit=1000", Page(None, 1000)),
        # Above the bound: capped, as nova caps it.
        ("limit=1001", Page(None, 1000)),
        ("limit=%d" % MAX_LIMIT_VALUE, Page(None, 1000)),
        ("marker=srv-1", Page("srv-1", 1000)),
        ("marker=a%20b&limit=3", Page("a b", 3)),
        ("marker=a+b", Page("a b", 1000)),
        ("marker=%E2%88%91", Page("∑", 1000)),
        ("marker=" + "m" * MAX_MARKER_LENGTH, Page("m" * MAX_MARKER_LENGTH, 1000)),
        # A name percent-encoded is the same name.
        ("%6Cimit=4&%6Darker=x", Page("x", 4)),
    ],
)
def test_parse_page_reads_limit_and_marker(query, page):
    assert parse_page(query) == page


def test_the_bound_is_the_callers():
    assert parse_page("", max_limit=50) == Page(None, 50)
    assert parse_page("limit=51", max_limit=50) == Page(None, 50)
    assert parse_page("limit=49", max_limit=50) == Page(None, 49)
    for bad in (0, -1, 1.5, "10", True, None):
        with pytest.raises(ValueError, match="max_limit"):
            parse_page("", max_limit=bad)


@pytest.mark.parametrize(
    "params",
    [
        "limit=2&marker=m",
        {"limit": "2", "marker": "m"},
        {"limit": ["2"], "marker": ("m",), "tags": ["a", "b"]},
        parse_qs("limit=2&marker=m&tags=a&tags=b"),
        MultiDict([("tags", "a"), ("limit", "2"), ("marker", "m")]),
    ],
    ids=["query-string", "mapping", "lists", "parse_qs", "multidict"],
)
def test_every_form_of_parameters_reads_alike(params):
    assert parse_page(params) == Page("m", 2)


def test_a_value_that_is_no_string_or_params_of_no_known_kind_is_a_programming_error():
    with pytest.raises(TypeError, match="limit"):
        parse_page({"limit": 2})
    with pytest.raises(TypeError, match="marker"):
        parse_page({"marker": [b"m"]})
    with pytest.raises(TypeError, match="params"):
        parse_page([("limit", "2")])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "rule", "named"),
    [
        ("limit=", "limit-not-a-number", "''"),
        ("limit=-1", "limit-not-a-number", "'-1'"),
        ("limit=%2B5", "limit-not-a-number", "'+5'"),
        ("limit=+5", "limit-not-a-number", "' 5'"),
        ("limit=%205", "limit-not-a-number", "' 5'"),
        ("limit=5.0", "limit-not-a-number", "'5.0'"),
        ("limit=1e3", "limit-not-a-number", "'1e3'"),
        ("limit=1_000", "limit-not-a-number", "'1_000'"),
        ("limit=ten", "limit-not-a-number", "'ten'"),
        # Digits of other scripts, which Python's int() would read.
        ("limit=%D9%A3", "limit-not-a-number", "'٣'"),
        ("limit=%EF%BC%95", "limit-not-a-number", "'５'"),
        ("limit=%d" % (MAX_LIMIT_VALUE + 1), "limit-too-large", "'%d'" % (MAX_LIMIT_VALUE + 1)),
        ("limit=" + "9" * 5000, "limit-too-large", "'9999"),
        ("limit=1&limit=2", "limit-repeated", "('1', '2')"),
        ("limit=1&limit=1", "limit-repeated", "('1', '1')"),
        ("marker=", "marker-empty", "marker is empty"),
        ("marker=" + "m" * (MAX_MARKER_LENGTH + 1), "marker-too-long", "256 characters long"),
        ("marker=a%00b", "marker-control-character", "'a\\x00b'"),
        ("marker=a%0A", "marker-control-character", "'a\\n'"),
        ("marker=a%7F", "marker-control-character", "'a\\x7f'"),
        ("marker=a&marker=b", "marker-repeated", "('a', 'b')"),
    ],
)
def test_a_malformed_page_is_refused_naming_the_value(query, rule, named):
    with pytest.raises(InvalidPage) as refused:
        parse_page(query)
    error = refused.value
    assert error.rule == rule
    assert error.parameter == rule.split("-")[0]
    assert named in error.detail
    assert str(error) == error.detail
    # A client's error (400), of the same family as the library's other refusals.
    assert isinstance(error, ValueError)
    assert isinstance(error, Refused)
    assert error.status == 400


def test_a_long_value_is_shortened_in_the_detail():
    with pytest.raises(InvalidPage) as refused:
        parse_page("limit=" + "9" * 5000)
    assert len(refused.value.detail) < 200
    assert refused.value.value == "9" * 5000


def test_markers_are_as_long_as_the_tag_tables_ids():
    assert MAX_MARKER_LENGTH == MAX_RESOURCE_ID_LENGTH


# next_link ----------------------------------------------------------------

URL = "http://compute.example:8774/v2.1/acme/servers/detail"


def href(url: str, ids: list[str], page: Page) -> str:
    link = next_link(url, ids, page)
    assert link is not None
    assert set(link) == {"rel", "href"}
    assert link["rel"] == "next"
    return link["href"]


def test_a_full_page_links_to_the_next_one_a_short_or_empty_one_does_not():
    page = Page(None, 3)
    assert href(URL + "?limit=3", ["a", "b", "c"], page) == URL + "?limit=3&marker=c"
    assert next_link(URL + "?limit=3", ["a", "b"], page) is None
    assert next_link(URL + "?limit=3", [], page) is None
    # limit=0: an empty page, which never is full.
    assert next_link(URL + "?limit=0", [], Page(None, 0)) is None
    # No limit asked: the bound is the page's size, and a full page links on (as nova's does).
    assert href(URL, ["a", "b"], Page(None, 2)) == URL + "?marker=b"


def test_the_link_keeps_every_other_parameter_as_the_client_wrote_it():
    query = "tags=red,blue&tags-any=a%2Cb&not-tags=x+y&tags=green&limit=2&sort_key=&flag"
    assert href(URL + "?" + query, ["a", "b"], Page(None, 2)) == URL + "?" + query + "&marker=b"


def test_the_marker_is_replaced_where_it_was_and_once():
    page = Page("old", 2)
    assert href(URL + "?marker=old&limit=2&tags=t", ["p", "q"], page) == URL + "?marker=q&limit=2&tags=t"
    assert href(URL + "?limit=2&%6Darker=old", ["p", "q"], page) == URL + "?limit=2&marker=q"
    assert href(URL + "?marker=a&limit=2&marker=b", ["p", "q"], page) == URL + "?marker=q&limit=2"
    assert href(URL + "?limit=2&&marker=a", ["p", "q"], page) == URL + "?limit=2&marker=q"


def test_the_last_id_is_percent_encoded_and_reads_back():
    awkward = "a b&c=d/e?f#g%h+∑"
    link = href(URL + "?limit=1", [awkward], Page(None, 1))
    assert urlsplit(link).fragment == ""
    assert " " not in link
    assert parse_page(urlsplit(link).query) == Page(awkward, 1)


def test_a_relative_url_and_a_fragment_stay():
    assert href("/v2.1/acme/servers?limit=1", ["x"], Page(None, 1)) == "/v2.1/acme/servers?limit=1&marker=x"
    assert href(URL + "?limit=1#top", ["x"], Page(None, 1)) == URL + "?limit=1&marker=x#top"


def test_next_link_refuses_what_is_not_a_page():
    with pytest.raises(TypeError, match="sequence of ids"):
        next_link(URL, "ab", Page(None, 2))
    with pytest.raises(TypeError, match="string"):
        next_link(URL, [1, 2], Page(None, 2))
    with pytest.raises(ValueError, match="3 ids on a page of at most 2"):
        next_link(URL, ["a", "b", "c"], Page(None, 2))


_NAMES = st.sampled_from(["tags", "tags-any", "not-tags", "sort_key", "name", "marker", "limit", "x y", "∑"])
_VALUES = st.text(max_size=12)
_IDS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40)


@given(
    st.lists(st.tuples(_NAMES, _VALUES), max_size=8),
    st.lists(_IDS, min_size=1, max_size=5),
)
def test_following_the_link_asks_the_same_list_after_the_last_id(params, ids):
    """Whatever else the query holds: the link's query is the same parameters, its marker the last id."""
    query = urlencode(params)
    page = Page(None, len(ids))
    link = href(URL + "?" + query, ids, page)
    assert link.startswith(URL + "?")
    following = parse_qsl(urlsplit(link).query, keep_blank_values=True)
    before = parse_qsl(query, keep_blank_values=True)
    assert [p for p in following if p[0] != "marker"] == [p for p in before if p[0] != "marker"]
    assert [value for name, value in following if name == "marker"] == [ids[-1]]


# Imports ------------------------------------------------------------------

# The tenancy_mw under test, first on the child's path.
SOURCE_ROOT = str(Path(tenancy_mw.__file__).resolve().parent.parent)
#: What a pure helper may not import: WSGI, SQL, configuration.
HEAVY = ("webob", "sqlalchemy", "alembic", "oslo_config", "oslo_middleware", "routes", "microversion_parse")


def test_the_module_imports_and_works_without_webob_sqlalchemy_or_oslo():
    """A fresh interpreter where those cannot be imported, as in a script or another framework's service."""
    code = textwrap.dedent(
        """
        import importlib.abc
        import sys

        HEAVY = %r

        class Blocked(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HEAVY:
                    raise ModuleNotFoundError("No module named %%r (blocked)" %% name, name=name)
                return None

        sys.meta_path.insert(0, Blocked())

        from tenancy_mw.core.paging import next_link, parse_page

        page = parse_page("tags=a&limit=1")
        print(page, next_link("http://h/s?tags=a&limit=1", ["x"], page)["href"])
        print(sorted(name for name in sys.modules if name.split(".")[0] in HEAVY))
        """
        % (HEAVY,)
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")]))},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Page(marker=None, limit=1) http://h/s?tags=a&limit=1&marker=x", "[]"]
