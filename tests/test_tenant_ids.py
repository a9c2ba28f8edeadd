"""Tenant id helpers (tenancy_mw.tenant_ids), against the spec's rules and example table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenancy_mw.paths import PathRefused
from tenancy_mw.tenant_ids import (
    InvalidTenantId,
    TenantPathParts,
    quote_tenant_id,
    split_tenant_path,
    validate_tenant_id,
)

# The spec's "Example tenant IDs" table: (tenant id, URL path, valid).
SPEC_EXAMPLES = [
    ("12345", "/v1.0/12345/widgets", True),
    ("Bob's Tenant", "/v1.0/Bob's%20Tenant/widgets", True),
    ("∑∞∆∏", "/v1.0/%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F/widgets", True),
    ("resel1:sub2:acct3", "/v1.0/resel1:sub2:acct3/widgets", True),
    ("resel1\\sub2\\acct3", "/v1.0/resel1\\sub2\\acct3/widgets", True),
]


@pytest.mark.parametrize(("tenant_id", "path", "valid"), SPEC_EXAMPLES)
def test_spec_table_valid_ids(tenant_id, path, valid):
    assert validate_tenant_id(tenant_id) == tenant_id
    assert split_tenant_path(path) == TenantPathParts("", "v1.0", tenant_id, "/widgets")


def test_spec_table_path_separator_cannot_be_part_of_an_id():
    # "resel/sub/acct" - No, using path separator: the path names tenant resel1 ...
    assert split_tenant_path("/v1.0/resel1/sub2/acct3/widgets").tenant_id == "resel1"
    # ... the id itself is refused, and so is its encoded form in a path.
    with pytest.raises(InvalidTenantId) as caught:
        validate_tenant_id("resel/sub/acct")
    assert caught.value.rule == "slash"
    with pytest.raises(PathRefused) as refused:
        split_tenant_path("/v1.0/resel1%2Fsub2%2Facct3/widgets")
    assert refused.value.rule == "encoded-slash"


def test_spec_table_empty_id():
    with pytest.raises(InvalidTenantId) as caught:
        split_tenant_path("/v1.0//widgets")
    assert caught.value.rule == "empty"


@pytest.mark.parametrize(
    ("tenant_id", "rule"),
    [
        ("", "empty"),
        ("x" * 256, "too-long"),
        ("∑" * 256, "too-long"),
        ("a/b", "slash"),
        ("a\nb", "control-character"),
        ("a\x00", "control-character"),
        (".", "dot-segment"),
        ("a%2Fb", "percent-escape"),
        ("100%41", "percent-escape"),
        ("%u0041", "percent-escape"),
        ("..", "dot-segment"),
        (b"bytes", "not-a-string"),
        (None, "not-a-string"),
    ],
)
def test_invalid_ids_name_the_rule(tenant_id, rule):
    with pytest.raises(InvalidTenantId) as caught:
        validate_tenant_id(tenant_id)
    assert caught.value.rule == rule


def test_length_counts_characters_not_bytes():
    assert validate_tenant_id("∑" * 255) == "∑" * 255  # 765 UTF-8 bytes
    assert validate_tenant_id("x" * 255)


def test_too_long_message_names_length_and_limit():
    with pytest.raises(InvalidTenantId) as caught:
        validate_tenant_id("x" * 300)
    assert "300" in caught.value.detail
    assert "255" in caught.value.detail


def test_quote_is_rfc3986_segment_safe():
    assert quote_tenant_id("Bob's Tenant") == "Bob's%20Tenant"
    assert quote_tenant_id("resel1:sub2:acct3") == "resel1:sub2:acct3"
    assert quote_tenant_id("∑∞∆∏") == "%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F"
    assert quote_tenant_id("a?b#c%d") == "a%3Fb%23c%25d"
    with pytest.raises(InvalidTenantId):
        quote_tenant_id("a/b")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", None),
        ("/v2.1", None),
        ("/v2.1/", None),
        ("/healthcheck", None),
        ("/servers/v2.1/t", None),
        ("/v2.1/t", TenantPathParts("", "v2.1", "t", "")),
        ("/v2.1/t/", TenantPathParts("", "v2.1", "t", "/")),
        ("/v2/t/a/b%20c/", TenantPathParts("", "v2", "t", "/a/b%20c/")),
        ("/v2.1/t/servers?all_tenants=1", TenantPathParts("", "v2.1", "t", "/servers")),
    ],
)
def test_split(path, expected):
    assert split_tenant_path(path) == expected


def test_split_with_another_version_pattern():
    assert split_tenant_path("/2024-01-01/acme/x", r"\d{4}-\d\d-\d\d").tenant_id == "acme"
    assert split_tenant_path("/v2.1/acme/x", r"\d{4}-\d\d-\d\d") is None


@given(st.text(min_size=1, max_size=255))
def test_quote_then_split_round_trips_every_valid_id(tenant_id):
    try:
        validate_tenant_id(tenant_id)
    except InvalidTenantId:
        return
    quoted = quote_tenant_id(tenant_id)
    assert split_tenant_path("/v1.0/" + quoted + "/widgets").tenant_id == tenant_id


def test_percent_sign_without_escape_text_is_fine():
    assert split_tenant_path("/v1.0/" + quote_tenant_id("100% sure") + "/x").tenant_id == "100% sure"


def test_split_takes_text_beyond_latin1_as_utf8():
    assert split_tenant_path("/v1.0/∑∞/widgets").tenant_id == "∑∞"


@given(st.text(max_size=60))
def test_any_text_yields_a_valid_id_or_a_refusal(text):
    try:
        parts = split_tenant_path("/v1.0/" + text)
    except (PathRefused, InvalidTenantId) as exc:
        assert exc.rule
        assert exc.detail
        return
    if parts is not None:
        assert validate_tenant_id(parts.tenant_id) == parts.tenant_id


@given(st.binary(max_size=300))
def test_any_bytes_yield_a_valid_id_or_a_refusal(data):
    """Any byte string after /v1.0/ gives a valid tenant id, no tenant, or a refusal: never another exception."""
    path = "/v1.0/" + data.decode("latin-1")
    try:
        parts = split_tenant_path(path)
    except (PathRefused, InvalidTenantId) as exc:
        assert exc.rule
        assert exc.detail
        return
    if parts is not None:
        assert validate_tenant_id(parts.tenant_id) == parts.tenant_id
