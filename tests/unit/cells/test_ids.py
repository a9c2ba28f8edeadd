"""The pure parsers of tenancy_mw.cells.ids: ids, cell lists, resource lines, microversions."""

from __future__ import annotations

import pytest
from microversion_parse import Version

from tenancy_mw.cells.ids import (
    MAX_INTEGER_ID,
    InvalidId,
    SpecError,
    VersionRefused,
    check_names,
    looks_like_uuid,
    parse_cells,
    parse_integer_id,
    parse_resources,
    parse_service_version,
    parse_uuid,
    parse_version,
    requested_version,
)

UUID = "8e6e4ab6-0662-4ff5-8994-dde92bedada1"


# Ids ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [UUID, UUID.upper()])
def test_a_canonical_uuid_in_any_case_is_taken_in_lower_case(text):
    assert looks_like_uuid(text)
    assert parse_uuid(text) == UUID


@pytest.mark.parametrize(
    "text", ["", UUID.replace("-", ""), "{%s}" % UUID, " %s" % UUID, UUID + "0", "urn:uuid:" + UUID, "42"]
)
def test_anything_but_a_canonical_uuid_is_not_a_uuid(text):
    assert not looks_like_uuid(text)
    with pytest.raises(InvalidId) as refused:
        parse_uuid(text)
    assert refused.value.rule == "not-a-uuid"


@pytest.mark.parametrize(("text", "ident"), [("0", 0), ("42", 42), ("0042", 42), (str(MAX_INTEGER_ID), MAX_INTEGER_ID)])
def test_decimal_digits_are_an_integer_id(text, ident):
    assert parse_integer_id(text) == ident


@pytest.mark.parametrize("text", ["", "-1", "+5", " 5", "1.0", "0x10", "\u0665", "1 OR 1=1", UUID])
def test_anything_but_ascii_digits_is_not_an_integer_id(text):
    with pytest.raises(InvalidId) as refused:
        parse_integer_id(text)
    assert refused.value.rule == "not-an-integer"


@pytest.mark.parametrize("text", [str(MAX_INTEGER_ID + 1), "9" * 5000])
def test_an_integer_beyond_bigint_is_too_large(text):
    with pytest.raises(InvalidId) as refused:
        parse_integer_id(text)
    assert refused.value.rule == "integer-too-large"
    assert len(str(refused.value)) < 300


# Cells --------------------------------------------------------------------------------------------


def test_cells_are_read_from_commas_new_lines_and_mappings():
    expected = {"cell1": "sqlite:////tmp/c1.db", "cell2": "postgresql://u@db2/nova"}
    assert parse_cells("cell1=sqlite:////tmp/c1.db, cell2=postgresql://u@db2/nova") == expected
    assert parse_cells("\n cell1 = sqlite:////tmp/c1.db\n\ncell2=postgresql://u@db2/nova\n") == expected
    assert parse_cells(["cell1=sqlite:////tmp/c1.db", "cell2=postgresql://u@db2/nova"]) == expected
    assert parse_cells(expected) == expected


def test_a_comma_in_a_url_is_percent_encoded():
    assert parse_cells("c1=postgresql://u:a%2Cb@db/nova") == {"c1": "postgresql://u:a%2Cb@db/nova"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no cells"),
        ("cell1", "name=URL"),
        ("c1=sqlite://, c1=sqlite://", "named twice"),
        ("cell 1=sqlite://", "cell name"),
        ("c1=not a url", "not a SQLAlchemy URL"),
    ],
)
def test_a_bad_cell_list_is_a_spec_error_naming_the_item(spec, message):
    with pytest.raises(SpecError, match=message):
        parse_cells(spec)


def test_a_bad_cell_item_does_not_show_its_password():
    for spec in ("c1=postgresql://u:s3cret@db/n, c1=sqlite://", "c1=://u:s3cret@x", "postgresql://u:s3cret@db/n"):
        with pytest.raises(SpecError) as error:
            parse_cells(spec)
        assert "s3cret" not in str(error.value)


# Resources ----------------------------------------------------------------------------------------


def test_a_resource_line_gives_its_route_table_columns_and_options():
    (resource,) = parse_resources("/os-hypervisors/{id}/uptime nova.compute_nodes id uuid except=detail tenant=owner")
    assert resource.route == "/os-hypervisors/{id}/uptime"
    assert (resource.segments, resource.id_index) == (("os-hypervisors", None, "uptime"), 1)
    assert (resource.table, resource.schema, resource.table_name) == ("nova.compute_nodes", "nova", "compute_nodes")
    assert (resource.id_column, resource.uuid_column, resource.tenant_column) == ("id", "uuid", "owner")
    assert resource.except_words == frozenset({"detail"})


def test_a_resource_matches_the_segments_of_its_route_and_gives_the_id():
    (resource,) = parse_resources(["/os-hypervisors/{id}/uptime compute_nodes id uuid"])
    assert resource.schema is None
    assert resource.match(("os-hypervisors", "7", "uptime")) == "7"
    assert resource.match(("os-hypervisors", "7")) is None
    assert resource.match(("os-services", "7", "uptime")) is None
    assert resource.match(("os-hypervisors", "7", "uptime", "x")) is None


def test_blank_lines_and_comments_are_skipped():
    lines = "\n# the services\n/os-services/{id} services id uuid\n\n/os-hypervisors/{id} compute_nodes id uuid\n"
    assert [resource.route for resource in parse_resources(lines)] == ["/os-services/{id}", "/os-hypervisors/{id}"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "no resources"),
        ("/os-services services id uuid", "{id} exactly once"),
        ("/os-services/{id}/{id} services id uuid", "{id} exactly once"),
        ("os-services/{id} services id uuid", "must be a path"),
        ("/os-services/{name}/{id} services id uuid", "not a literal"),
        ("/os-services/{id} services id", "expected ROUTE"),
        ("/os-services/{id} services; id uuid", "not a table or column"),
        ("/os-services/{id} services id uuid only=x", "except="),
        ("/os-services/{id} services id uuid tenant=a-b", "not a table or column"),
        ("/os-services/{id} services id uuid tenant=a tenant=b", "tenant=COLUMN"),
        ("/os-services/{id} services id uuid\n/os-services/{id} other id uuid", "given twice"),
    ],
)
def test_a_bad_resource_line_is_a_spec_error_naming_it(line, message):
    with pytest.raises(SpecError, match=message):
        parse_resources(line)


@pytest.mark.parametrize("names", [("services",), ("nova.services", "id"), ("_t", "c_1")])
def test_plain_sql_names_pass(names):
    check_names(*names)


@pytest.mark.parametrize("names", [("a.b.c",), ("services", "id; --"), ("1services",), ("services", '"id"')])
def test_anything_but_a_plain_sql_name_is_refused(names):
    with pytest.raises(SpecError, match="not a table or column name"):
        check_names(*names)


# Microversions ------------------------------------------------------------------------------------


def test_a_configured_version_is_x_dot_y():
    assert parse_version("2.53") == Version(2, 53)
    assert parse_version(" 2 . 53 ") == Version(2, 53)
    assert parse_service_version("compute 2.53") == ("compute", Version(2, 53))
    for bad in ("2", "two.1", "2.53.1", "latest"):
        with pytest.raises(SpecError, match="X.Y"):
            parse_version(bad)
    for bad in ("2.53", "compute", "compute 2.53 x", "compute two"):
        with pytest.raises(SpecError):
            parse_service_version(bad)


def version_of(headers: dict, **range_):
    return requested_version(headers, "compute", maximum=Version(2, 90), **range_)


def test_the_requested_version_comes_from_the_standard_header_then_the_legacy_one():
    assert version_of({}) is None
    assert version_of({"HTTP_OPENSTACK_API_VERSION": "compute 2.53"}) == Version(2, 53)
    assert version_of({"HTTP_OPENSTACK_API_VERSION": "volume 3.1"}) is None
    legacy = {"HTTP_X_OPENSTACK_NOVA_API_VERSION": "2.60"}
    assert version_of(legacy) is None
    assert version_of(legacy, legacy_headers=["X-OpenStack-Nova-API-Version"]) == Version(2, 60)
    both = dict(legacy, HTTP_OPENSTACK_API_VERSION="compute 2.10")
    assert version_of(both, legacy_headers=["X-OpenStack-Nova-API-Version"]) == Version(2, 10)


@pytest.mark.parametrize("latest", ["latest", "LATEST", " Latest "])
def test_latest_is_the_maximum(latest):
    assert version_of({"HTTP_OPENSTACK_API_VERSION": "compute " + latest}) == Version(2, 90)


@pytest.mark.parametrize("value", ["2", "2.053", "+2.53", "2.5_3", "two", "2.\u0665"])
def test_a_malformed_requested_version_is_400(value):
    with pytest.raises(VersionRefused) as refused:
        version_of({"HTTP_OPENSTACK_API_VERSION": "compute " + value})
    assert refused.value.status == 400


def test_a_version_out_of_the_services_range_is_406():
    with pytest.raises(VersionRefused) as refused:
        version_of({"HTTP_OPENSTACK_API_VERSION": "compute 2.91"})
    assert refused.value.status == 406
    assert "maximum is 2.90" in refused.value.detail
    with pytest.raises(VersionRefused) as refused:
        version_of({"HTTP_OPENSTACK_API_VERSION": "compute 2.0"}, minimum=Version(2, 1))
    assert refused.value.status == 406
    assert "Minimum is 2.1" in refused.value.detail
