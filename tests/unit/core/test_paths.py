"""The canonical form of request paths (tenancy_mw.core.paths): each rule, and its refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenancy_mw.core.paths import CanonicalPath, PathRefused, canonical_path, canonicalize, remember_rewrite


@pytest.mark.parametrize(
    ("raw", "segments", "trailing"),
    [
        ("/", (), True),
        ("/v2.1", ("v2.1",), False),
        ("/v2.1/", ("v2.1",), True),
        ("/v2.1/t/servers", ("v2.1", "t", "servers"), False),
        ("/v1.0/Bob's%20Tenant/widgets", ("v1.0", "Bob's Tenant", "widgets"), False),
        ("/v1.0/%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F/w", ("v1.0", "∑∞∆∏", "w"), False),
        ("/v1.0/resel1\\sub2\\acct3/w", ("v1.0", "resel1\\sub2\\acct3", "w"), False),
        ("/v2.1//servers", ("v2.1", "", "servers"), False),
        ("/v2.1/t;x=1/servers", ("v2.1", "t;x=1", "servers"), False),
        ("/v2.1/%41cme", ("v2.1", "Acme"), False),
        ("/v2.1/.hidden/x", ("v2.1", ".hidden", "x"), False),
        ("/v2.1/t/servers?limit=1&marker=/x", ("v2.1", "t", "servers"), False),
        ("/v2.1/t#frag", ("v2.1", "t"), False),
        ("http://example.com/v2.1/t/servers", ("v2.1", "t", "servers"), False),
        ("https://example.com:8774/v2.1/t?x=/y", ("v2.1", "t"), False),
        ("http://example.com", (), True),
        ("*", (), False),
    ],
)
def test_canonical_segments(raw, segments, trailing):
    result = canonicalize(raw)
    assert result.segments == segments
    assert result.trailing_slash is trailing


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("/v2.1/a%2Fb/servers", "encoded-slash"),
        ("/v2.1/a%2fb", "encoded-slash"),
        ("/v2.1/t/servers%2F..", "encoded-slash"),
        ("/v2.1/a%00b", "nul"),
        ("/v2.1/a%0Ab", "control-character"),
        ("/v2.1/a%7F", "control-character"),
        ("/v2.1/a%252Fb", "double-encoding"),
        ("/v2.1/a%255Cb", "double-encoding"),
        ("/v2.1/%252E%252E/x", "double-encoding"),
        ("/v2.1/a%2500", "double-encoding"),
        ("/v2.1/a%25252F", "double-encoding"),
        ("/v2.1/%FF/x", "invalid-utf8"),
        ("/v2.1/%C0%AF", "invalid-utf8"),
        ("/v2.1/%E2%88", "invalid-utf8"),
        ("/v2.1/a%zz", "malformed-escape"),
        ("/v2.1/a%4", "malformed-escape"),
        ("/v2.1/a%", "malformed-escape"),
        ("/v2.1/../t", "dot-segment"),
        ("/v2.1/./t", "dot-segment"),
        ("/v2.1/%2E%2E/t", "dot-segment"),
        ("/v2.1/.%2e/t", "dot-segment"),
        ("/v2.1/t/..", "dot-segment"),
        ("v2.1/t", "not-a-path"),
    ],
)
def test_refused_paths_name_rule_and_value(raw, rule):
    with pytest.raises(PathRefused) as caught:
        canonicalize(raw)
    assert caught.value.rule == rule
    assert caught.value.value in raw
    assert repr(caught.value.value)[1:-1] in caught.value.detail or caught.value.value in caught.value.detail


def test_decoded_path_info_is_read_as_utf8_bytes_in_latin1():
    # PEP 3333: PATH_INFO holds the decoded bytes as latin-1 characters.
    path_info = "/v1.0/∑∞/w".encode().decode("latin-1")
    assert canonicalize(path_info, encoded=False).segments == ("v1.0", "∑∞", "w")


def test_decoded_path_info_refuses_leftover_escapes():
    # A literal "%2F" in PATH_INFO means the client sent "%252F".
    with pytest.raises(PathRefused) as caught:
        canonicalize("/v2.1/a%2Fb", encoded=False)
    assert caught.value.rule == "double-encoding"


def _environ(raw=None, script="", path_info="/"):
    env = {"SCRIPT_NAME": script, "PATH_INFO": path_info, "REQUEST_METHOD": "GET"}
    if raw is not None:
        env["RAW_URI"] = raw
    return env


def test_raw_uri_preferred_so_encoded_slash_is_seen():
    env = _environ("/v2.1/a%2Fb/servers", path_info="/v2.1/a/b/servers")
    with pytest.raises(PathRefused) as caught:
        canonical_path(env)
    assert caught.value.rule == "encoded-slash"


def test_request_uri_used_when_raw_uri_absent():
    env = _environ(path_info="/v2.1/a/b")
    env["REQUEST_URI"] = "/v2.1/a%2Fb?x=1"
    with pytest.raises(PathRefused):
        canonical_path(env)


def test_without_raw_target_path_info_is_used():
    env = _environ(path_info="/v2.1/Bob's Tenant/servers")
    assert canonical_path(env).segments == ("v2.1", "Bob's Tenant", "servers")


def test_stale_raw_target_is_ignored_for_the_rewritten_path():
    # A filter earlier in the pipeline rewrote PATH_INFO: the raw target no
    # longer describes what the app will route on.
    env = _environ("/old/path", path_info="/v2.1/t/servers")
    assert canonical_path(env).segments == ("v2.1", "t", "servers")


def test_mount_point_segments_are_counted():
    env = _environ("/compute/v2.1/t/servers", script="/compute", path_info="/v2.1/t/servers")
    result = canonical_path(env)
    assert result.segments == ("compute", "v2.1", "t", "servers")
    assert result.prefix_length == 1


def test_result_is_cached_while_the_path_is_unchanged():
    env = _environ("/v2.1/t", path_info="/v2.1/t")
    first = canonical_path(env)
    assert canonical_path(env) is first
    env["PATH_INFO"] = "/v2.1/u"
    env["RAW_URI"] = "/v2.1/u"
    assert canonical_path(env).segments == ("v2.1", "u")


def test_refusal_is_cached_too():
    env = _environ("/v2.1/a%00", path_info="/v2.1/a\x00")
    with pytest.raises(PathRefused):
        canonical_path(env)
    with pytest.raises(PathRefused):
        canonical_path(env)


def test_remember_rewrite_keeps_the_clients_path_for_later_filters():
    env = _environ("/v2.1/t/servers", path_info="/v2.1/t/servers")
    original = canonical_path(env)
    env["SCRIPT_NAME"], env["PATH_INFO"] = "/t", "/v2.1/servers"
    remember_rewrite(env, original)
    assert canonical_path(env) is original


def test_collapsed_and_str():
    path = CanonicalPath(("v2.1", "", "servers"), True, 0)
    assert path.collapsed == ("v2.1", "servers")
    assert str(path) == "/v2.1//servers/"


@given(st.binary(max_size=64))
def test_any_bytes_give_segments_or_a_refusal(data):
    raw = "/" + data.decode("latin-1")
    try:
        result = canonicalize(raw)
    except PathRefused as exc:
        assert exc.rule
        assert exc.detail
        return
    for segment in result.segments:
        assert "/" not in segment
        assert segment not in (".", "..")
        assert "\x00" not in segment


@given(st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s))
def test_quoted_segment_round_trips(text):
    from urllib.parse import quote

    raw = "/v2.1/" + quote(text, safe="")
    try:
        result = canonicalize(raw)
    except PathRefused as exc:
        # Only the documented refusals: control characters, dot segments, double escapes.
        assert exc.rule in ("nul", "control-character", "dot-segment", "double-encoding")
        return
    assert result.segments == ("v2.1", text)


def test_raw_utf8_bytes_next_to_escapes_in_one_segment():
    # A server passes raw non-ASCII bytes of the request line as latin-1 text.
    raw = "/v1.0/" + "∑".encode().decode("latin-1") + "%20x/w"
    assert canonicalize(raw).segments == ("v1.0", "∑ x", "w")
    env = _environ(raw, path_info="/v1.0/" + "∑ x".encode().decode("latin-1") + "/w")
    assert canonical_path(env).segments == ("v1.0", "∑ x", "w")


@given(st.lists(st.binary(max_size=12), min_size=1, max_size=5), st.booleans())
def test_one_pass_and_per_segment_decoding_agree(parts, encoded):
    """The fast whole-path decoder accepts exactly what the per-segment one accepts, with the same result."""
    from tenancy_mw.core.paths import _decode_body, _decode_segment

    body = "/".join(p.decode("latin-1") for p in parts)
    try:
        expected = tuple(_decode_segment(seg, encoded) for seg in body.split("/"))
    except PathRefused:
        expected = None
    fast = _decode_body(body, encoded, None)
    if expected is None:
        assert fast is None
    else:
        assert fast == expected


def test_safe_in_segment_keeps_pchar_sub_delims_and_escapes_what_would_end_a_segment():
    from urllib.parse import quote

    from tenancy_mw.core.paths import SAFE_IN_SEGMENT
    from tenancy_mw.tenants.ids import quote_tenant_id

    assert quote("a!$&'()*+,;=:@b", safe=SAFE_IN_SEGMENT) == "a!$&'()*+,;=:@b"
    assert quote("a/b?c#d%e f", safe=SAFE_IN_SEGMENT) == "a%2Fb%3Fc%23d%25e%20f"
    assert quote_tenant_id("acme:eu@1") == "acme:eu@1"


def _filters_with_a_version_pattern():
    from tenancy_mw import opts

    return {cls.opt_group: cls for cls in opts.FILTERS if any(o.dest == "version_pattern" for o in cls.all_opts())}


def test_the_four_path_reading_filters_share_one_version_pattern_option():
    from tenancy_mw.core.paths import DEFAULT_VERSION_PATTERN

    found = _filters_with_a_version_pattern()
    assert sorted(found) == ["admin_cull", "id_resolver", "tenant_admin", "tenant_path"]
    for cls in found.values():
        (opt,) = [o for o in cls.all_opts() if o.dest == "version_pattern"]
        assert opt.default == DEFAULT_VERSION_PATTERN
        assert opt.help.startswith("Regular expression a whole version segment matches (Python re syntax")


@pytest.mark.parametrize("group", ["admin_cull", "id_resolver", "tenant_admin", "tenant_path"])
@pytest.mark.parametrize("pattern", ["v?", "(v[0-9]+)?", ".*", "v[0-9]*|"])
def test_each_filter_refuses_at_load_a_version_pattern_matching_an_empty_segment(group, pattern):
    from tenancy_mw.core.base import ConfigError
    from tests.support.apps import Recorder
    from tests.support.filter_configs import minimal_options

    cls = _filters_with_a_version_pattern()[group]
    with pytest.raises(ConfigError, match=r"%s: option version_pattern = .* it matches an empty segment" % group):
        cls(Recorder(), minimal_options(group, version_pattern=pattern))


@pytest.mark.parametrize("group", ["admin_cull", "id_resolver", "tenant_admin", "tenant_path"])
def test_each_filter_refuses_at_load_a_version_pattern_that_is_no_regular_expression(group):
    from tenancy_mw.core.base import ConfigError
    from tests.support.apps import Recorder
    from tests.support.filter_configs import minimal_options

    cls = _filters_with_a_version_pattern()[group]
    with pytest.raises(ConfigError, match=r"%s: option version_pattern = 'v\[0-9' is invalid" % group):
        cls(Recorder(), minimal_options(group, version_pattern="v[0-9"))


def test_compile_version_pattern_reads_ignoring_case_only_when_asked():
    from tenancy_mw.core.paths import compile_version_pattern

    assert compile_version_pattern("v[0-9]+").fullmatch("V2") is None
    assert compile_version_pattern("v[0-9]+", ignore_case=True).fullmatch("V2")
    with pytest.raises(ValueError, match="a regular expression is required"):
        compile_version_pattern(None)
