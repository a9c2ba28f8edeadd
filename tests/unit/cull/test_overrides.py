"""The method-override scanner, tenancy_mw.cull.overrides.

What each public function finds (``_method`` in url-encoded and multipart
forms, override headers in every environ spelling, media-type versions,
the multipart boundary), what it refuses, and the bounds past which it
raises TooManyCandidates instead of working harder.
"""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.cull.overrides import (
    MAX_CANDIDATES,
    MAX_ESCAPES,
    MAX_VERSIONS,
    OVERRIDE_HEADERS,
    TooManyCandidates,
    media_type_versions,
    multipart_boundary,
    multipart_method_overrides,
    override_header_values,
    override_names,
    urlencoded_method_overrides,
)
from tests.support.apps import Recorder
from tests.support.wsgi import call, make_environ

FORM = (("Content-Type", "application/x-www-form-urlencoded"),)


# override_names: the methods override values name.


def test_override_names_splits_comma_lists_and_upper_cases():
    assert override_names(["delete", " put , patch "]) == {"DELETE", "PUT", "PATCH"}


def test_an_empty_override_value_is_named_so_it_is_judged_not_ignored():
    assert override_names([""]) == {"<empty>"}
    assert override_names([" , "]) == {"<empty>"}
    assert override_names([]) == set()


def test_an_override_naming_too_many_methods_raises():
    override_names([",".join(["GET"] * MAX_CANDIDATES)])
    with pytest.raises(TooManyCandidates):
        override_names([",".join(["GET"] * (MAX_CANDIDATES + 1))])


# override_header_values: the override headers in every spelling a framework reads.


def test_a_request_without_override_headers_has_no_values():
    assert override_header_values({"REQUEST_METHOD": "POST", "PATH_INFO": "/method"}) == []


@pytest.mark.parametrize("key", OVERRIDE_HEADERS)
def test_each_override_header_is_read(key):
    assert override_header_values({"REQUEST_METHOD": "POST", key: "DELETE"}) == ["DELETE"]


@pytest.mark.parametrize(
    "key", ["HTTP_X-HTTP-METHOD-OVERRIDE", "HTTP_x_http_method_override", "HTTP_X-Method_Override"]
)
def test_other_spellings_of_an_override_header_are_read_too(key):
    assert override_header_values({"REQUEST_METHOD": "POST", key: "PUT"}) == ["PUT"]


def test_two_spellings_side_by_side_are_both_read():
    environ = {"REQUEST_METHOD": "POST", "HTTP_X_HTTP_METHOD": "GET", "HTTP_x-http-method": "DELETE"}
    assert sorted(override_header_values(environ)) == ["DELETE", "GET"]


def test_headers_that_merely_mention_method_are_not_overrides():
    environ = {"REQUEST_METHOD": "POST", "HTTP_X_METHOD_NAME": "DELETE", "HTTP_X_HTTP_METHOD_OVERRIDES": "PUT"}
    assert override_header_values(environ) == []


# urlencoded_method_overrides: _method in a query or url-encoded form.


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"_method=DELETE", {"DELETE"}),
        (b"name=web1&_method=put", {"PUT"}),
        (b"a=1;_method=patch", {"PATCH"}),
        (b"%5Fm%45THOD=delete", {"DELETE"}),
        (b"+_method+=delete", {"DELETE"}),
        (b"_method=%44ELETE", {"DELETE"}),
        (b"_method", {"<empty>"}),
        (b"_method=put&_method=delete", {"PUT", "DELETE"}),
    ],
)
def test_method_fields_are_found_however_webob_would_decode_them(data, named):
    assert urlencoded_method_overrides(data) == named


@pytest.mark.parametrize("data", [b"", b"name=_method", b"x_method=PUT", b"_methods=PUT", b"a=set+_method+later"])
def test_values_and_other_keys_that_mention_method_name_nothing(data):
    assert urlencoded_method_overrides(data) == set()


def test_a_value_too_long_to_be_a_method_is_named_as_such():
    assert urlencoded_method_overrides(b"_method=" + b"A" * 1000) == {"<LONG VALUE>"}


def test_too_many_mentions_of_method_raise_naming_what_was_scanned():
    assert urlencoded_method_overrides(b"&".join([b"_method=GET"] * MAX_CANDIDATES)) == {"GET"}
    with pytest.raises(TooManyCandidates, match="query string"):
        urlencoded_method_overrides(b"&".join([b"_method=GET"] * (MAX_CANDIDATES + 1)), "query string")


def test_too_many_percent_escapes_raise():
    assert urlencoded_method_overrides(b"a=" + b"%C3" * MAX_ESCAPES) == set()
    with pytest.raises(TooManyCandidates, match="percent-escapes"):
        urlencoded_method_overrides(b"a=" + b"%C3" * (MAX_ESCAPES + 1))


# multipart_boundary and multipart_method_overrides.


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [
        ("multipart/form-data; boundary=zz", b"zz"),
        ('multipart/form-data; BOUNDARY="a b:c"', b"a b:c"),
        ("multipart/form-data; boundary = zz ; charset=utf-8", b"zz"),
        ("multipart/form-data", None),
    ],
)
def test_the_boundary_is_read_from_the_content_type(content_type, boundary):
    assert multipart_boundary(content_type) == boundary


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data; boundary=a; boundary=b",
        'multipart/form-data; boundary="a\\"b"',
        "multipart/form-data; boundary=",
    ],
)
def test_a_boundary_parsers_could_read_differently_is_refused(content_type):
    with pytest.raises(ValueError, match="boundary"):
        multipart_boundary(content_type)


def _part(name: bytes, value: bytes, boundary: bytes = b"zz") -> bytes:
    return b"--%s\r\nContent-Disposition: form-data; name=%s\r\n\r\n%s\r\n" % (boundary, name, value)


@pytest.mark.parametrize("name", [b'"_method"', b"_method", b'"_METHOD"'])
def test_a_method_part_is_found(name):
    body = _part(b'"a"', b"1") + _part(name, b"delete") + b"--zz--\r\n"
    assert multipart_method_overrides(body, b"zz") == {"DELETE"}


def test_without_a_boundary_any_delimiter_like_line_ends_the_part():
    assert multipart_method_overrides(_part(b'"_method"', b"PUT") + b"--zz--\r\n") == {"PUT"}


def test_a_multipart_body_without_method_names_nothing():
    assert multipart_method_overrides(_part(b'"a"', b"_ method") + b"--zz--\r\n", b"zz") == set()


def test_a_method_part_that_does_not_end_is_refused():
    with pytest.raises(ValueError, match="does not end"):
        multipart_method_overrides(b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nPUT', b"zz")


def test_a_part_name_spelling_method_with_escapes_is_refused():
    body = b"--zz\r\nContent-Disposition: form-data; name*=utf-8''%5Fmethod\r\n\r\nPUT\r\n--zz--\r\n"
    with pytest.raises(ValueError, match="percent-escapes"):
        multipart_method_overrides(body, b"zz")


def test_too_many_method_parts_raise():
    body = _part(b'"_method"', b"GET") * (MAX_CANDIDATES + 1) + b"--zz--\r\n"
    with pytest.raises(TooManyCandidates):
        multipart_method_overrides(body, b"zz")


# media_type_versions: versions a version-routing urlmap reads from media types.


@pytest.mark.parametrize(
    ("accept", "content_type", "versions"),
    [
        ("application/json;version=2.1", "", ("v2.1",)),
        ("", 'application/json; Version="2.1"', ("v2.1",)),
        ("application/json;version=2.1/extra, text/plain;version=3", "", ("v2.1", "v3")),
        ("application/json;version=2.1", "application/json;version=2.1", ("v2.1",)),
        ("application/json", "", ()),
    ],
)
def test_media_type_versions_are_read_from_accept_and_content_type(accept, content_type, versions):
    assert media_type_versions(accept, content_type) == versions


def test_too_many_media_type_versions_raise():
    media_type_versions(", ".join("a/b;version=%d" % i for i in range(MAX_VERSIONS)), "")
    with pytest.raises(TooManyCandidates):
        media_type_versions(", ".join("a/b;version=%d" % i for i in range(MAX_VERSIONS + 1)), "")


# The scanner against what a framework decodes, and through the filter.


_ESCAPED_LETTERS = {letter: ["%%%02x" % letter, "%%%02X" % letter] for letter in b"_methodMETHOD"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.booleans(), min_size=7, max_size=7),
    st.lists(st.booleans(), min_size=7, max_size=7),
    st.integers(0, 300),
    st.integers(0, 64 * 1024),
)
def test_an_escaped_method_field_is_found_among_escapes_and_long_runs(escaped, upper, escapes_before, run):
    # However the key's letters are escaped, and whatever escapes and long
    # runs of other bytes come before and after it, the field a framework
    # decodes as _method is found; the decoding copies runs, never drops them.
    key = "".join(
        _ESCAPED_LETTERS[ord(c.upper() if up else c)][up] if esc else (c.upper() if up else c)
        for c, esc, up in zip("_method", escaped, upper, strict=True)
    )
    body = ("a=" + "%6d" * escapes_before + "\n" * run + "&" + key + "=DELETE&b=" + "x" * run).encode()
    assert [v for k, v in urllib.parse.parse_qsl(body.decode()) if k.lower() == "_method"] == ["DELETE"]
    assert urlencoded_method_overrides(body) == {"DELETE"}
    recorder = Recorder()
    status, _, _ = call(AdminCull(recorder, {}), make_environ("POST", "/v2.1/acme", FORM, body))
    assert status == 404
    assert recorder.seen == []
