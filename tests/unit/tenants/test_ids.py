"""Tenant id helpers (tenancy_mw.tenants.ids), against the spec's rules and example table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenancy_mw.core.paths import CanonicalPath, PathRefused, canonicalize
from tenancy_mw.tenants.ids import (
    DEFAULT_TENANTLESS_COLLECTIONS,
    DEFAULT_VERSION_PATTERN,
    InvalidTenantId,
    LayoutError,
    TenantLayout,
    TenantPathParts,
    UnknownPathSegment,
    quote_tenant_id,
    split_tenant_path,
    tenant_layout_opts,
    tenant_segment_index,
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


# The URL layout (TenantLayout) -------------------------------------------------------------------

#: nova 34.0.0's top-level route names (nova/api/openstack/compute/routes.py) and cinder 29.0.0's
#: (cinder/api/v3/router.py and the ResourceExtensions of cinder/api/contrib): served without a project id.
NOVA_COLLECTIONS = """extensions flavors images limits os-agents os-aggregates os-assisted-volume-snapshots
os-availability-zone os-baremetal-nodes os-cells os-certificates os-cloudpipe os-console-auth-tokens os-fixed-ips
os-floating-ip-dns os-floating-ip-pools os-floating-ips os-floating-ips-bulk os-fping os-hosts os-hypervisors
os-instance_usage_audit_log os-keypairs os-migrations os-networks os-quota-class-sets os-quota-sets
os-security-group-default-rules os-security-group-rules os-security-groups os-server-external-events
os-server-groups os-services os-simple-tenant-usage os-snapshots os-tenant-networks os-volumes os-volumes_boot
servers versions""".split()
CINDER_COLLECTIONS = """attachments backups capabilities cgsnapshots clusters consistencygroups default-types
extensions group_snapshots group_types groups limits manageable_snapshots manageable_volumes messages
os-availability-zone os-hosts os-quota-class-sets os-quota-sets os-services os-snapshot-manage os-volume-manage
os-volume-transfer qos-specs resource_filters scheduler-stats snapshots types volume-transfers volumes
workers""".split()


def segments_of(path: str, prefix_length: int = 0):
    return canonicalize(path, prefix_length=prefix_length)


def test_the_default_collections_are_nova_and_cinders_top_level_names_once_each():
    assert set(DEFAULT_TENANTLESS_COLLECTIONS) == set(NOVA_COLLECTIONS) | set(CINDER_COLLECTIONS)
    assert len(DEFAULT_TENANTLESS_COLLECTIONS) == len(set(DEFAULT_TENANTLESS_COLLECTIONS))
    assert TenantLayout().collections == frozenset(DEFAULT_TENANTLESS_COLLECTIONS)


@pytest.mark.parametrize(
    ("path", "optional", "always"),
    [
        ("/v2.1/6f70656e/servers", 1, 1),
        ("/v2.1/acme", 1, 1),
        ("/v2.1/servers", -1, 1),
        ("/v2.1/servers/detail", -1, 1),
        ("/v2.1/os-keypairs", -1, 1),
        ("/v2/flavors/1/os-extra_specs", -1, 1),
        ("/v3/volumes", -1, 1),
        ("/v3/default-types/x", -1, 1),
        # Routes' format suffix: cinder serves /v3/volumes.json as volumes.
        ("/v3/volumes.json", -1, 1),
        # Only one suffix, and only after a listed name.
        ("/v3/volumes.x.y", 1, 1),
        ("/v3/acme.json", 1, 1),
        ("/v3/volumes.", 1, 1),
        # Compared exactly, as Routes does.
        ("/v2.1/Servers", 1, 1),
        ("/v2.1/servers%20", 1, 1),
        ("/v2.1", -1, -1),
        ("/v2.1/", -1, -1),
        ("/", -1, -1),
        ("/healthcheck", -1, -1),
    ],
)
def test_the_optional_layout_takes_no_collection_for_a_tenant(path, optional, always):
    canonical = segments_of(path)
    assert TenantLayout().tenant_index(canonical) == optional
    assert TenantLayout(tenant_in_path="always").tenant_index(canonical) == always
    assert TenantLayout(tenant_in_path="never").tenant_index(canonical) == -1


@pytest.mark.parametrize("name", NOVA_COLLECTIONS + CINDER_COLLECTIONS)
def test_every_nova_and_cinder_collection_is_no_tenant(name):
    assert TenantLayout().tenant_index(segments_of("/v2.1/%s/x" % name)) == -1


def test_the_always_reading_is_tenant_segment_index():
    layout = TenantLayout(tenant_in_path="always")
    for path in ("/v2.1/servers", "/v1.0/acme/widgets", "/healthcheck", "/x/v2/t"):
        canonical = segments_of(path)
        assert layout.tenant_index(canonical) == tenant_segment_index(canonical, layout.version_re)


def test_the_version_may_be_in_the_mount():
    mounted = segments_of("/v2.1/acme/servers", prefix_length=1)
    assert TenantLayout().tenant_index(mounted, mounted.prefix_length) == 1
    deeper = segments_of("/compute/v2.1/servers", prefix_length=1)
    assert TenantLayout().tenant_index(deeper, 1) == -1
    assert TenantLayout(tenant_in_path="always").tenant_index(deeper, 1) == 2
    assert TenantLayout(tenant_in_path="always").tenant_index(deeper, 0) == -1


@pytest.mark.parametrize(
    ("script", "path_info", "tenant"),
    [
        # oslo.middleware's http_proxy_to_wsgi prepends a client's X-Forwarded-Prefix to nova's /v2.1 mount.
        ("/v1/aaaa/v2.1", "/servers", None),
        ("/v1/aaaa/v2.1", "/6f70656e/servers", "6f70656e"),
        ("/v1/aaaa/", "/v2.1/servers", None),
        # A deployment mounting nova's urlmap deeper, under a version-like name of its own.
        ("/api/v1/compute/v2.1", "/servers/detail", None),
        ("/api/v1/compute/v2.1", "/6f70656e/servers", "6f70656e"),
        # A version-like segment inside the mount, more of the mount after it: the app's version is its own.
        ("/v1/aaaa", "/v3/6f70656e/volumes", "6f70656e"),
        ("/v1/aaaa", "/volumes", None),
        ("/v1", "/aaaa/servers", "aaaa"),
    ],
)
def test_the_version_is_the_end_of_the_mount_never_a_segment_before_it(script, path_info, tenant):
    mounted = segments_of(script + path_info, prefix_length=script.count("/"))
    for layout in (TenantLayout(tenant_id_pattern="[0-9a-f-]+"), TenantLayout()):
        index = layout.tenant_index(mounted, mounted.prefix_length)
        assert (mounted.segments[index] if index >= 0 else None) == tenant
        # Never a segment inside the mount.
        assert index == -1 or index >= mounted.prefix_length
    always = TenantLayout(tenant_in_path="always").tenant_index(mounted, mounted.prefix_length)
    assert always == -1 or always >= mounted.prefix_length
    assert always == tenant_segment_index(mounted, TenantLayout().version_re, mounted.prefix_length)


def test_a_tenant_id_pattern_makes_an_unknown_segment_a_404_naming_it():
    nova = TenantLayout(tenant_id_pattern="[0-9a-f-]+")
    assert nova.tenant_index(segments_of("/v2.1/6f70656e-1/servers")) == 1
    assert nova.tenant_index(segments_of("/v2.1/servers")) == -1
    for segment in ("os-widgets", "ACME", "6f70656e%20"):
        with pytest.raises(UnknownPathSegment) as caught:
            nova.tenant_index(segments_of("/v2.1/%s/x" % segment))
        refused = caught.value
        assert (refused.status, refused.rule) == (404, "unknown-path-segment")
        assert refused.value == segments_of("/" + segment).segments[0]
        assert repr(refused.value) in refused.detail
        assert "extra_tenantless_collections" in refused.detail
    # An empty segment is the caller's to refuse as a tenant id (400), not an unknown one.
    assert nova.tenant_index(segments_of("/v2.1//servers")) == 1


def test_in_the_always_layout_the_pattern_checks_every_tenant():
    layout = TenantLayout(tenant_in_path="always", tenant_id_pattern="[0-9a-f-]+")
    assert layout.tenant_index(segments_of("/v3/abc123/volumes")) == 1
    with pytest.raises(UnknownPathSegment) as caught:
        layout.tenant_index(segments_of("/v3/volumes"))
    assert "'volumes'" in caught.value.detail
    assert "[0-9a-f-]+" in caught.value.detail


def test_own_collections_replace_the_defaults_and_blank_names_are_skipped():
    layout = TenantLayout(tenantless_collections=[" widgets ", "", "os-things"])
    assert layout.collections == {"widgets", "os-things"}
    assert layout.tenant_index(segments_of("/v1/widgets/3")) == -1
    assert layout.tenant_index(segments_of("/v1/servers/3")) == 1


def test_extra_collections_add_to_the_defaults():
    layout = TenantLayout(tenant_id_pattern="[0-9a-f-]+", extra_tenantless_collections=[" os-widgets ", ""])
    assert layout.collections == frozenset(DEFAULT_TENANTLESS_COLLECTIONS) | {"os-widgets"}
    for path in ("/v2.1/os-widgets/7", "/v2.1/servers", "/v3/volumes.json"):
        assert layout.tenant_index(segments_of(path)) == -1
    assert layout.tenant_index(segments_of("/v2.1/6f70656e/os-widgets")) == 1


@pytest.mark.parametrize(
    ("arguments", "option", "value"),
    [
        ({"version_pattern": "v[0-9"}, "version_pattern", "v[0-9"),
        ({"version_pattern": "v?"}, "version_pattern", "v?"),
        ({"version_pattern": None}, "version_pattern", None),
        ({"tenant_in_path": "sometimes"}, "tenant_in_path", "sometimes"),
        ({"tenantless_collections": ["servers", "a/b"]}, "tenantless_collections", "a/b"),
        ({"tenantless_collections": [".."]}, "tenantless_collections", ".."),
        ({"tenantless_collections": ["a\nb"]}, "tenantless_collections", "a\nb"),
        ({"tenantless_collections": ["a%2Fb"]}, "tenantless_collections", "a%2Fb"),
        ({"tenant_id_pattern": "[0-9"}, "tenant_id_pattern", "[0-9"),
        ({"extra_tenantless_collections": ["os-widgets", "a/b"]}, "extra_tenantless_collections", "a/b"),
    ],
)
def test_bad_layout_options_are_refused_naming_option_and_value(arguments, option, value):
    with pytest.raises(LayoutError) as caught:
        TenantLayout(**arguments)
    assert (caught.value.option, caught.value.value) == (option, value)
    assert option in str(caught.value)
    assert repr(value) in str(caught.value)


def test_from_options_raises_the_filters_own_config_error():
    options = SimpleNamespace(
        version_pattern="v[0-9]+",
        tenant_in_path="always",
        tenantless_collections=["x"],
        tenant_id_pattern="(",
        extra_tenantless_collections=["y"],
    )
    seen = []

    def config_error(option, value, reason):
        seen.append((option, value))
        return KeyError(option)

    with pytest.raises(KeyError):
        TenantLayout.from_options(options, config_error)
    assert seen == [("tenant_id_pattern", "(")]
    with pytest.raises(LayoutError):
        TenantLayout.from_options(options)
    options.tenant_id_pattern = None
    assert TenantLayout.from_options(options).tenant_in_path == "always"
    assert TenantLayout.from_options(options).collections == {"x", "y"}


def test_the_layout_options_are_new_copies_each_time():
    first, second = tenant_layout_opts(), tenant_layout_opts()
    assert [o.dest for o in first] == [
        "version_pattern",
        "tenant_in_path",
        "tenantless_collections",
        "extra_tenantless_collections",
        "tenant_id_pattern",
    ]
    assert not {id(o) for o in first} & {id(o) for o in second}
    defaults = {o.dest: o.default for o in first}
    assert defaults == {
        "version_pattern": DEFAULT_VERSION_PATTERN,
        "tenant_in_path": "optional",
        "tenantless_collections": list(DEFAULT_TENANTLESS_COLLECTIONS),
        "tenant_id_pattern": None,
        "extra_tenantless_collections": [],
    }
    first[2].default.append("changed")
    assert "changed" not in second[2].default
    assert "changed" not in DEFAULT_TENANTLESS_COLLECTIONS


@given(st.lists(st.sampled_from(["v2.1", "acme", "servers", "volumes.json", "", "x.y", "6f70"]), max_size=5))
def test_optional_is_always_or_nothing_and_never_a_collection(segments):
    canonical = CanonicalPath(tuple(segments))
    optional = TenantLayout().tenant_index(canonical)
    always = TenantLayout(tenant_in_path="always").tenant_index(canonical)
    assert optional in (-1, always)
    if optional == -1 and always >= 0:
        assert TenantLayout().is_collection(canonical.segments[always])
