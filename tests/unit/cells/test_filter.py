"""id_resolver across three cells at once (SQLite, PostgreSQL, MariaDB), with ids duplicated across them."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
import webtest

from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.cells.lookup import CellLookup
from tenancy_mw.core.base import ConfigError
from tests.support.apps import Recorder
from tests.support.cells import NO_UUID, ROWS, closed_port_url, row_uuid, silent_server
from tests.unit.cells.conftest import wait_idle

RESOURCES = """
/os-services/{id} services id uuid except=enable,disable,disable-log-reason,force-down
/os-hypervisors/{id} compute_nodes id uuid except=detail,statistics
/os-hypervisors/{id}/uptime compute_nodes id uuid
"""
LEGACY = "X-OpenStack-Nova-API-Version"
AT = {"OpenStack-API-Version": "compute 2.53"}
BELOW = {"OpenStack-API-Version": "compute 2.52"}


def cells_option(cells: dict) -> str:
    return ", ".join("%s=%s" % item for item in cells.items())


def options(cells: dict, **extra) -> dict:
    conf = {
        "cells": cells_option(cells),
        "resources": RESOURCES,
        "uuid_microversion": "compute 2.53",
        "max_microversion": "2.90",
        "legacy_version_header": LEGACY,
        "cell_timeout": "3",
    }
    conf.update(extra)
    return conf


@pytest.fixture(scope="module")
def resolver(cells):
    recorder = Recorder()
    filt = IdResolver(recorder, options(cells))
    filt.recorder = recorder
    yield filt
    filt.lookup.close()


@pytest.fixture
def app(resolver):
    resolver.recorder.seen.clear()
    return webtest.TestApp(resolver)


def seen(resolver) -> dict:
    (environ,) = resolver.recorder.seen
    return {key: environ.get(key) for key in ("tenancy.cell", "tenancy.resource_id", "tenancy.resource_uuid")}


# Below the switch: integer ids --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "cell", "ident", "table"),
    [
        ("/v2.1/os-services/3", "c-sqlite", 3, "services"),
        ("/v2.1/os-services/4", "c-pg", 4, "services"),
        ("/v2.1/os-services/5", "c-maria", 5, "services"),
        ("/v2.1/acme/os-services/4", "c-pg", 4, "services"),
        ("/v2.1/os-hypervisors/2", "c-pg", 2, "compute_nodes"),
        ("/v2.1/os-hypervisors/3/uptime", "c-maria", 3, "compute_nodes"),
        ("/v2.1/acme/os-hypervisors/3/uptime", "c-maria", 3, "compute_nodes"),
    ],
)
def test_unique_integer_id_below_the_switch_passes_with_its_cell(app, resolver, path, cell, ident, table):
    app.get(path)  # no version header: the service's minimum
    assert seen(resolver) == {
        "tenancy.cell": cell,
        "tenancy.resource_id": ident,
        "tenancy.resource_uuid": row_uuid(cell, table, ident),
    }


def test_the_table_is_handed_on_with_the_cell(app, resolver):
    app.get("/v2.1/os-hypervisors/3/uptime")
    assert resolver.recorder.seen[0]["tenancy.resource_table"] == "compute_nodes"
    resolver.recorder.seen.clear()
    app.get("/v2.1/acme/os-services/3")
    assert resolver.recorder.seen[0]["tenancy.resource_table"] == "services"


def test_integer_id_of_a_row_without_uuid_passes_with_none(app, resolver):
    assert ("c-maria", "services", 6) in NO_UUID
    app.get("/v2.1/os-services/6", headers=BELOW)
    assert seen(resolver) == {"tenancy.cell": "c-maria", "tenancy.resource_id": 6, "tenancy.resource_uuid": None}


@pytest.mark.parametrize("path", ["/v2.1/os-services/1", "/v2.1/os-services/2", "/v2.1/os-hypervisors/1"])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_integer_id_in_several_cells_is_400_naming_the_microversion(app, resolver, path, method):
    response = app.request(path, method=method, headers=BELOW, expect_errors=True)
    assert response.status_int == 400
    error = response.json["errors"][0]
    assert error["code"] == "tenancy.ambiguous-id"
    assert "2 records in different cells" in error["detail"]
    assert "2.53" in error["detail"]
    assert resolver.recorder.seen == []


def test_integer_id_in_no_cell_is_404(app, resolver):
    response = app.get("/v2.1/os-services/77", expect_errors=True)
    assert response.status_int == 404
    assert response.json["errors"][0]["code"] == "tenancy.not-found"
    assert "77" in response.json["errors"][0]["detail"]
    assert resolver.recorder.seen == []


def test_uuid_below_the_switch_is_400_naming_the_microversion(app, resolver):
    uuid = row_uuid("c-pg", "services", 4)
    for headers in ({}, BELOW, {LEGACY: "2.1"}):
        response = app.get("/v2.1/os-services/%s" % uuid, headers=headers, expect_errors=True)
        assert response.status_int == 400
        assert response.json["errors"][0]["code"] == "tenancy.uuid-needs-microversion"
        assert "2.53" in response.json["errors"][0]["detail"]
    assert resolver.recorder.seen == []


# At and above the switch: uuids ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        AT,
        {"OpenStack-API-Version": "compute 2.60"},
        {"OpenStack-API-Version": "compute 2.90"},
        {"OpenStack-API-Version": "compute latest"},
        {LEGACY: "2.53"},
        {LEGACY: "latest"},
        # The standard header wins over the legacy one.
        {"OpenStack-API-Version": "compute 2.53", LEGACY: "2.1"},
        {"OpenStack-API-Version": "volume 3.0, compute 2.70"},
    ],
)
@pytest.mark.parametrize(
    ("cell", "table", "ident"), [("c-sqlite", "services", 1), ("c-pg", "services", 1), ("c-maria", "services", 2)]
)
def test_uuid_at_or_above_the_switch_finds_its_cell(app, resolver, headers, cell, table, ident):
    # services 1 and 2 are each in two cells: the uuid says which record.
    uuid = row_uuid(cell, table, ident)
    app.delete("/v2.1/os-services/%s" % uuid, headers=headers)
    assert seen(resolver) == {"tenancy.cell": cell, "tenancy.resource_id": ident, "tenancy.resource_uuid": uuid}


def test_uuid_in_upper_case_is_found_and_handed_on_as_stored(app, resolver):
    uuid = row_uuid("c-maria", "compute_nodes", 3)
    app.get("/v2.1/os-hypervisors/%s/uptime" % uuid.upper(), headers=AT)
    assert seen(resolver)["tenancy.resource_uuid"] == uuid
    assert seen(resolver)["tenancy.cell"] == "c-maria"


def test_uuid_in_no_cell_is_404(app, resolver):
    response = app.get("/v2.1/os-hypervisors/00000000-0000-4000-8000-000000000000", headers=AT, expect_errors=True)
    assert response.status_int == 404
    assert response.json["errors"][0]["code"] == "tenancy.not-found"


@pytest.mark.parametrize("headers", [AT, {"OpenStack-API-Version": "compute latest"}, {LEGACY: "2.60"}])
def test_integer_id_at_or_above_the_switch_is_400_invalid_uuid(app, resolver, headers):
    response = app.get("/v2.1/os-services/3", headers=headers, expect_errors=True)
    assert response.status_int == 400
    error = response.json["errors"][0]
    assert error["code"] == "tenancy.invalid-id.not-a-uuid"
    assert "'3'" in error["detail"]
    assert resolver.recorder.seen == []


# Versions ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"OpenStack-API-Version": "compute 2"},
        {"OpenStack-API-Version": "compute 2.x"},
        {"OpenStack-API-Version": "compute two.five"},
        {"OpenStack-API-Version": "compute 2.-1"},
        {LEGACY: "abc"},
        {LEGACY: ""},
        # int() takes these, so parse_version_string alone would read 2.53 or 0.53 into them.
        {"OpenStack-API-Version": "compute 2.5_3"},
        {"OpenStack-API-Version": "compute +2.53"},
        {"OpenStack-API-Version": "compute 2.+53"},
        {"OpenStack-API-Version": "compute -0.53"},
        {"OpenStack-API-Version": "compute 2.\u0665\u0663"},  # ARABIC-INDIC DIGITS FIVE, THREE
        {"OpenStack-API-Version": "compute 2 . 53"},
        {"OpenStack-API-Version": "compute 2.053"},  # nova's own reading refuses leading zeros
        {LEGACY: "2.5_3"},
    ],
)
def test_malformed_version_is_400(app, resolver, headers):
    response = app.get("/v2.1/os-services/3", headers=headers, expect_errors=True)
    assert response.status_int == 400, response.text
    assert response.json["errors"][0]["code"] == "tenancy.bad-version"
    assert "OpenStack-API-Version" in response.headers["Vary"]
    assert LEGACY in response.headers["Vary"]
    assert resolver.recorder.seen == []


@pytest.mark.parametrize("headers", [{"OpenStack-API-Version": "compute 2.91"}, {LEGACY: "3.0"}])
def test_version_above_the_maximum_is_406(app, resolver, headers):
    response = app.get("/v2.1/os-services/3", headers=headers, expect_errors=True)
    assert response.status_int == 406
    error = response.json["errors"][0]
    assert error["code"] == "tenancy.version-not-acceptable"
    assert "2.90" in error["detail"]


def test_version_below_the_minimum_is_406_when_a_minimum_is_set(cells):
    filt = IdResolver(Recorder(), options(cells, min_microversion="2.1"))
    try:
        response = webtest.TestApp(filt).get("/v2.1/os-services/3", headers={LEGACY: "2.0"}, expect_errors=True)
        assert response.status_int == 406
        assert webtest.TestApp(filt).get("/v2.1/os-services/3", headers={LEGACY: "2.1"}).status_int == 200
    finally:
        filt.lookup.close()


def test_another_services_version_is_not_this_ones(app, resolver):
    # Only "volume" is named: compute is at its minimum, below the switch.
    app.get("/v2.1/os-services/3", headers={"OpenStack-API-Version": "volume 3.70"})
    assert seen(resolver)["tenancy.resource_id"] == 3


# Requests it does not look at -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v2.1/os-services",
        "/v2.1/acme/servers/1",
        "/v2.1/os-hypervisors/detail",
        "/v2.1/os-hypervisors/statistics",
        "/v2.1/acme/os-hypervisors/detail",
        "/v2.1/os-hypervisors/london/search",
        "/v2.1/os-services/disable",
        "/",
        "/v2.1",
        "/healthcheck",
    ],
)
def test_other_routes_pass_untouched_whatever_their_version_header(app, resolver, path):
    app.put(path, headers={"OpenStack-API-Version": "compute nonsense"})
    assert seen(resolver) == {"tenancy.cell": None, "tenancy.resource_id": None, "tenancy.resource_uuid": None}


def test_empty_segments_and_trailing_slash_do_not_hide_the_id(app, resolver):
    response = app.get("/v2.1//os-services/1/", headers=BELOW, expect_errors=True)
    assert response.status_int == 400
    assert response.json["errors"][0]["code"] == "tenancy.ambiguous-id"


def test_path_without_canonical_form_is_400(app, resolver):
    environ = {"RAW_URI": "/v2.1/os-services/1%2F2", "PATH_INFO": "/v2.1/os-services/1/2"}
    response = app.get("/v2.1/os-services/1/2", extra_environ=environ, expect_errors=True)
    assert response.status_int == 400
    assert response.json["errors"][0]["code"] == "tenancy.bad-path.encoded-slash"


# Bad ids ------------------------------------------------------------------------------------------

BAD_IDS = [
    " 3",
    "3 ",
    "+3",
    "-3",
    "3.0",
    "1.0",
    "0x3",
    "3e0",
    "\uff13",  # FULLWIDTH DIGIT THREE: int() would take it
    "\u0663",  # ARABIC-INDIC DIGIT THREE
    "9223372036854775808",
    "9" * 5000,
    "3;DROP TABLE services",
    "3' OR '1'='1",
    "3 OR 1=1",
    "3--",
    "%",
    "_",
    "*",
    "NULL",
    "8e6e4ab606624ff58994dde92bedada1",
    "{8e6e4ab6-0662-4ff5-8994-dde92bedada1}",
    "urn:uuid:8e6e4ab6-0662-4ff5-8994-dde92bedada1",
    "8e6e4ab6-0662-4ff5-8994-dde92bedada1 ",
    "8e6e4ab6-0662-4ff5-8994-dde92bedada",
    "8e6e4ab6-0662-4ff5-8994-dde92bedada1x",
    "g" * 8 + "-0662-4ff5-8994-dde92bedada1",
]


@pytest.mark.parametrize("headers", [BELOW, AT])
@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_400_and_never_queried(app, resolver, headers, bad):
    from urllib.parse import quote

    response = app.get("/v2.1/os-services/" + quote(bad, safe=""), headers=headers, expect_errors=True)
    assert response.status_int == 400, (bad, response.text)
    assert response.json["errors"][0]["code"].startswith("tenancy.invalid-id."), response.text
    assert resolver.recorder.seen == []


def test_largest_integer_id_is_looked_up_and_not_found(app):
    assert app.get("/v2.1/os-services/9223372036854775807", expect_errors=True).status_int == 404
    assert app.get("/v2.1/os-services/0", expect_errors=True).status_int == 404


def test_leading_zeros_name_the_same_integer(app, resolver):
    app.get("/v2.1/os-services/0004")
    assert seen(resolver)["tenancy.resource_id"] == 4


def test_leading_zeros_beyond_pythons_digit_limit_are_not_a_500(app, resolver):
    # int() refuses strings of more than 4300 digits; a server with long request lines lets them in.
    app.get("/v2.1/os-services/" + "0" * 5000 + "4")
    assert seen(resolver)["tenancy.resource_id"] == 4


def test_tables_are_intact_after_the_bad_ids(cells, app):
    for bad in BAD_IDS:
        from urllib.parse import quote

        app.get("/v2.1/os-services/" + quote(bad, safe=""), expect_errors=True)
    for cell, url in cells.items():
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                count = conn.execute(sa.text("SELECT COUNT(*) FROM services")).scalar()
        finally:
            engine.dispose()
        assert count == len(ROWS[cell]["services"]), cell


# Engines and connections ------------------------------------------------------------------------


def test_one_engine_per_cell_and_no_connection_left_checked_out(app, resolver):
    engines = dict(resolver.lookup.engines)
    assert set(engines) == set(ROWS)
    for _ in range(3):
        app.get("/v2.1/os-services/4")
        app.get("/v2.1/os-services/1", headers=BELOW, expect_errors=True)
        app.get("/v2.1/os-services/%s" % row_uuid("c-sqlite", "services", 1), headers=AT)
    wait_idle(resolver.lookup)
    assert resolver.lookup.engines == engines
    assert all(resolver.lookup.engines[name] is engine for name, engine in engines.items())


def test_concurrent_requests_from_many_threads(resolver):
    app = webtest.TestApp(resolver)
    failures = []

    def client(ident):
        try:
            for _ in range(5):
                response = app.get("/v2.1/os-services/%d" % ident, expect_errors=True)
                expected = 200 if ident in (3, 4, 5) else 400
                if response.status_int != expected:
                    failures.append((ident, response.status_int, response.text))
        except Exception as exc:  # noqa: BLE001 - collected and shown below
            failures.append((ident, repr(exc)))

    threads = [threading.Thread(target=client, args=(ident,)) for ident in (1, 2, 3, 4, 5) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    wait_idle(resolver.lookup)


# Cells that do not answer -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_down_cell(cells):
    """The three cells plus a fourth on a closed port."""
    recorder = Recorder()
    conf = dict(cells, down=closed_port_url("postgresql"))
    filt = IdResolver(recorder, options(conf, cell_timeout="2"))
    filt.recorder = recorder
    yield filt
    filt.lookup.close()


def test_unreachable_cell_makes_an_unfound_uuid_503_not_404(with_down_cell):
    response = webtest.TestApp(with_down_cell).get(
        "/v2.1/os-services/00000000-0000-4000-8000-000000000000", headers=AT, expect_errors=True
    )
    assert response.status_int == 503
    assert response.headers["Retry-After"] == "2"
    assert response.json["errors"][0]["code"] == "tenancy.cells-unavailable"
    assert "1 cell database did not answer" in response.json["errors"][0]["detail"]


def test_unreachable_cell_does_not_hide_a_found_uuid(with_down_cell):
    with_down_cell.recorder.seen.clear()
    uuid = row_uuid("c-pg", "services", 4)
    webtest.TestApp(with_down_cell).get("/v2.1/os-services/%s" % uuid, headers=AT)
    assert with_down_cell.recorder.seen[0]["tenancy.cell"] == "c-pg"


@pytest.mark.parametrize("ident", ["3", "1", "77"])
def test_unreachable_cell_makes_any_integer_id_503(with_down_cell, ident):
    # 3 is in one answering cell, 1 in two, 77 in none: the down cell could change each answer.
    response = webtest.TestApp(with_down_cell).get("/v2.1/os-services/" + ident, expect_errors=True)
    assert response.status_int == 503
    assert "Retry-After" in response.headers


@pytest.mark.parametrize(
    "url_of",
    [
        lambda port: "mysql+pymysql://root:@127.0.0.1:%d/test" % port,
        lambda port: "postgresql+psycopg2://root@127.0.0.1:%d/test" % port,
    ],
)
def test_a_hung_cell_costs_its_timeout_and_never_blocks_the_pool(cells, url_of):
    with silent_server() as port:
        conf = {"c-sqlite": cells["c-sqlite"], "hung": url_of(port)}
        filt = IdResolver(Recorder(), options(conf, cell_timeout="0.3", pool_size="2"))
        app = webtest.TestApp(filt)
        try:
            started = time.monotonic()
            # More requests than the hung cell has connections: each still costs at most its timeout.
            statuses = [app.get("/v2.1/os-services/3", expect_errors=True).status_int for _ in range(5)]
            elapsed = time.monotonic() - started
            assert statuses == [503] * 5
            # Liveness, not speed: five waits of 0.3 s, nowhere near a hang.
            assert elapsed < 4, elapsed
            # The driver gives up too (libpq after its 2 s minimum), so the threads come back.
            wait_idle(filt.lookup, timeout=10)
        finally:
            filt.lookup.close()


# Configuration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("cells", "", "no cells"),
        ("cells", "cell1", "name=URL"),
        ("cells", "cell1=sqlite://, cell1=sqlite://", "named twice"),
        ("cells", "cell 1=sqlite://", "cell name"),
        ("cells", "c1=not a url", "SQLAlchemy URL"),
        ("resources", "", "no resources"),
        ("resources", "/os-services services id uuid", "{id} exactly once"),
        ("resources", "/os-services/{id} services id", "expected ROUTE"),
        ("resources", "/os-services/{id} services; id uuid", "not a table or column"),
        ("resources", "/os-services/{id} services id uuid only=x", "except="),
        ("resources", "/os-services/{id} services id uuid tenant=a-b", "not a table or column"),
        ("resources", "/os-services/{id} services id uuid tenant=a tenant=b", "tenant=COLUMN"),
        ("uuid_microversion", "2.53", "SERVICE_TYPE X.Y"),
        ("uuid_microversion", "compute two", "X.Y"),
        ("max_microversion", "", "X.Y"),
        ("max_microversion", "2.52", "below uuid_microversion"),
        ("min_microversion", "2.60", "below uuid_microversion"),
        ("legacy_version_header", "X Nova", "header name"),
        ("cell_timeout", "0", "cell_timeout"),
        # Beyond what the drivers take (Linux TCP_KEEPIDLE: 32767 s): every lookup would fail as "down".
        ("cell_timeout", "40000", "cell_timeout"),
        ("pool_size", "0", "pool_size"),
        ("version_pattern", "v(", "version_pattern"),
    ],
)
def test_bad_options_fail_at_load_naming_the_option(option, value, message):
    conf = options({"c1": "sqlite://"})
    conf[option] = value
    with pytest.raises(ConfigError) as error:
        IdResolver(Recorder(), conf)
    assert option in str(error.value)
    assert message in str(error.value)


def test_cell_passwords_are_not_shown_in_config_errors():
    with pytest.raises(ConfigError) as error:
        IdResolver(Recorder(), dict(options({}), cells="c1=postgresql://u:s3cret@db/n, c1=sqlite://"))
    assert "named twice" in str(error.value)
    assert "s3cret" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        IdResolver(Recorder(), dict(options({}), cells="c1=postgresql://u:s3cret@db/n, c2=://u:s3cret@x"))
    assert "s3cret" not in str(error.value)


# Tenant-owned resources (tenant=COLUMN) ------------------------------------------------------------


@pytest.fixture(scope="module")
def owned(cells):
    """/servers/{id} over the services table, owned by the tenant in its host column, behind tenant_path."""
    from tenancy_mw.tenants.path_filter import TenantPath

    recorder = Recorder()
    filt = IdResolver(recorder, options(cells, resources="/servers/{id} services id uuid tenant=host"))
    app = webtest.TestApp(TenantPath(filt, {}))
    app.recorder = recorder
    yield app
    filt.lookup.close()


def test_tenant_owned_record_is_found_under_its_tenant(owned):
    owned.recorder.seen.clear()
    owned.get("/v2.1/c-pg-4/servers/4")
    owned.get("/v2.1/c-pg-4/servers/%s" % row_uuid("c-pg", "services", 4), headers=AT)
    assert [(e["tenancy.cell"], e["tenancy.resource_id"]) for e in owned.recorder.seen] == [("c-pg", 4)] * 2


def test_another_tenants_record_is_not_found(owned):
    owned.recorder.seen.clear()
    assert owned.get("/v2.1/c-sqlite-3/servers/4", expect_errors=True).status_int == 404
    uuid = row_uuid("c-pg", "services", 4)
    assert owned.get("/v2.1/c-sqlite-3/servers/%s" % uuid, headers=AT, expect_errors=True).status_int == 404
    assert owned.recorder.seen == []


def test_another_tenants_record_with_the_same_id_makes_no_ambiguity(owned):
    # Id 1 is in c-sqlite (tenant c-sqlite-1) and c-pg (tenant c-pg-1): each tenant sees only its own,
    # so neither learns from a 400 that the other's exists.
    owned.recorder.seen.clear()
    owned.get("/v2.1/c-pg-1/servers/1")
    owned.get("/v2.1/c-sqlite-1/servers/1")
    assert [e["tenancy.cell"] for e in owned.recorder.seen] == ["c-pg", "c-sqlite"]


def test_tenant_owned_resource_without_a_tenant_is_not_found(cells):
    filt = IdResolver(Recorder(), options(cells, resources="/servers/{id} services id uuid tenant=host"))
    try:
        response = webtest.TestApp(filt).get("/v2.1/servers/4", expect_errors=True)
        assert response.status_int == 404
        assert "tenant" in response.json["errors"][0]["detail"]
    finally:
        filt.lookup.close()
    helper = CellLookup({"c": "sqlite://"})
    try:
        with pytest.raises(ValueError, match="tenant"):
            helper.resolve("services", 1, by_uuid=False, tenant_column="host")
    finally:
        helper.close()


def sqlite_cell(path, *rows: tuple) -> str:
    """The URL of a new SQLite cell at *path* whose ``services (id, uuid, host)`` holds *rows*."""
    url = "sqlite:///%s" % path
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE services (id INTEGER PRIMARY KEY, uuid VARCHAR(36), host VARCHAR(64))")
            for row in rows:
                conn.exec_driver_sql("INSERT INTO services VALUES (?, ?, ?)", row)
    finally:
        engine.dispose()
    return url


@pytest.fixture
def owned_by_literal_tenant(tmp_path):
    """One SQLite cell whose tenant-owned record 4 belongs to a tenant spelled like a route's literal segment."""
    from tenancy_mw.tenants.path_filter import TenantPath

    url = sqlite_cell(
        tmp_path / "owned.sqlite",
        (4, "4b9c0f5e-8d43-4a0a-b7f2-7f2d6e0c9a14", "servers"),
        (5, "5c1d2e3f-8d43-4a0a-b7f2-7f2d6e0c9a15", "acme"),
    )
    recorder = Recorder()
    filt = IdResolver(recorder, options({"c1": url}, resources="/servers/{id} services id uuid tenant=host"))
    app = webtest.TestApp(TenantPath(filt, {}))
    app.recorder = recorder
    app.bare = webtest.TestApp(filt)
    yield app
    filt.lookup.close()


def test_tenant_owned_resource_at_a_url_without_tenant_segment_is_404(owned_by_literal_tenant):
    # /v2.1/servers/4 carries no tenant ("servers" is a collection, never a tenant): no tenant's record may
    # be picked for it, least of all the one of a tenant named "servers".
    from tenancy_mw.tenants.path_filter import TenantPath

    app = owned_by_literal_tenant
    response = app.get("/v2.1/servers/4", expect_errors=True)
    assert response.status_int == 404, response.text
    assert response.json["errors"][0]["code"] == "tenancy.not-found"
    # In the default layout a tenant spelled like a collection has no URL of its own either.
    assert app.get("/v2.1/servers/servers/4", expect_errors=True).status_int == 404
    assert app.recorder.seen == []
    # In the tenants spec's own layout it has: there the same record is found under its tenant's URL,
    # and /v2.1/servers/4 (tenant "servers", then no route) still finds nothing.
    always = webtest.TestApp(TenantPath(app.bare.app, {"tenant_in_path": "always"}))
    assert always.get("/v2.1/servers/4", expect_errors=True).status_int == 404
    always.get("/v2.1/servers/servers/4")
    assert [e["tenancy.resource_id"] for e in app.recorder.seen] == [4]


def test_tenant_owned_lookup_uses_the_paths_tenant_segment_not_another_reading(owned_by_literal_tenant):
    # An earlier filter that read the tenant elsewhere (another version_pattern) must not make the
    # lookup use a tenant other than the segment the route matched after.
    app = owned_by_literal_tenant
    response = app.bare.get("/v2.1/other/servers/5", extra_environ={"tenancy.tenant_id": "acme"}, expect_errors=True)
    assert response.status_int == 404, response.text
    assert app.recorder.seen == []


def _statuses_of_concurrent_gets(filt: IdResolver, path: str, clients: int) -> list[int]:
    app = webtest.TestApp(filt)
    barrier = threading.Barrier(clients)
    statuses: list = []

    def client():
        barrier.wait()
        statuses.append(app.get(path, expect_errors=True).status_int)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_a_burst_on_a_busy_but_answering_cell_is_served_not_503(tmp_path):
    # 30 lookups at once on a cell of 2 connections, 20 ms a query: all are answered well within
    # cell_timeout, so none may be told the cell "did not answer in time".
    url = sqlite_cell(tmp_path / "busy.sqlite", (3, None, "compute3"))
    filt = IdResolver(Recorder(), options({"busy": url}, cell_timeout="10", pool_size="2"))
    sa.event.listen(filt.lookup.engines["busy"], "before_cursor_execute", lambda *_: time.sleep(0.02))
    try:
        assert _statuses_of_concurrent_gets(filt, "/v2.1/os-services/3", 30) == [200] * 30
        wait_idle(filt.lookup)
    finally:
        filt.lookup.close()


def test_a_hung_cell_with_a_full_queue_is_counted_as_not_answering_at_once(cells, caplog):
    with silent_server() as port:
        conf = {"c-sqlite": cells["c-sqlite"], "hung": "mysql+pymysql://root:@127.0.0.1:%d/test" % port}
        filt = IdResolver(Recorder(), options(conf, cell_timeout="0.5", pool_size="1"))
        try:
            time.sleep(0.6)  # the hung cell has not answered for longer than cell_timeout
            # 1 connection, 4 waiting at most: the other 4 lookups do not queue behind a hung cell.
            assert _statuses_of_concurrent_gets(filt, "/v2.1/os-services/3", 8) == [503] * 8
            shed = [r for r in caplog.records if "counted as not answering" in r.getMessage()]
            assert len(shed) >= 3, [r.getMessage() for r in caplog.records]
            wait_idle(filt.lookup, timeout=10)
        finally:
            filt.lookup.close()


def test_a_cell_failing_with_an_empty_message_is_503_not_500(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "failing.sqlite")
    filt = IdResolver(Recorder(), options({"failing": url}))

    def fail(*_args):
        raise RuntimeError()  # no message at all

    sa.event.listen(filt.lookup.engines["failing"], "before_cursor_execute", fail)
    try:
        response = webtest.TestApp(filt).get("/v2.1/os-services/3", expect_errors=True)
        assert response.status_int == 503, response.text
        assert response.json["errors"][0]["code"] == "tenancy.cells-unavailable"
    finally:
        filt.lookup.close()


@pytest.mark.parametrize("tenant", ["C-MARIA-5", "c-maria-5 ", "C-PG-4", "C-SQLITE-3"])
def test_a_tenant_spelled_otherwise_does_not_see_the_record(owned, tenant):
    # Case and trailing spaces make another tenant id; a case-insensitive or PAD SPACE column
    # collation (MariaDB's defaults) must not let "C-MARIA-5" or "c-maria-5 " see c-maria-5's record.
    from urllib.parse import quote

    owned.recorder.seen.clear()
    ident = tenant.strip().rsplit("-", 1)[1]
    response = owned.get("/v2.1/%s/servers/%s" % (quote(tenant), ident), expect_errors=True)
    assert response.status_int == 404, response.text
    assert owned.recorder.seen == []


def test_a_long_id_is_not_echoed_whole(app):
    # 5000 leading zeros name id 77, which no cell has: the 404 names the id without the whole text.
    response = app.get("/v2.1/os-services/" + "0" * 5000 + "77", expect_errors=True)
    assert response.status_int == 404
    detail = response.json["errors"][0]["detail"]
    assert len(detail) < 300, len(detail)
    assert "5002 characters" in detail


# Both URL layouts: tenant_path's decision, the token's tenant ------------------------------------------

LAYOUT_RESOURCES = """
/os-services/{id} services id uuid
/servers/{id} services id uuid tenant=host
"""
TOKEN = {"X-Identity-Status": "Confirmed", "X-Project-Id": "6f70656e"}


@pytest.fixture
def layouts(tmp_path):
    """One SQLite cell: record 4 is tenant 6f70656e's, record 5 tenant acme's; tenant_path with token_tenant before."""
    from tenancy_mw.tenants.path_filter import TenantPath

    url = sqlite_cell(
        tmp_path / "layouts.sqlite",
        (4, "4b9c0f5e-8d43-4a0a-b7f2-7f2d6e0c9a14", "6f70656e"),
        (5, "5c1d2e3f-8d43-4a0a-b7f2-7f2d6e0c9a15", "acme"),
    )
    recorder = Recorder()
    filt = IdResolver(recorder, options({"c1": url}, resources=LAYOUT_RESOURCES))
    app = webtest.TestApp(TenantPath(filt, {"token_tenant": "true"}))
    app.recorder = recorder
    app.filter = filt
    yield app
    filt.lookup.close()


@pytest.mark.parametrize("path", ["/v2.1/os-services/4", "/v2.1/6f70656e/os-services/4", "/v2.1/acme/os-services/4"])
def test_a_cloud_resource_is_resolved_with_and_without_a_project_in_the_url(layouts, path):
    layouts.get(path)
    assert [(e["tenancy.cell"], e["tenancy.resource_id"]) for e in layouts.recorder.seen] == [("c1", 4)]


@pytest.mark.parametrize("path", ["/v2.1/servers/4", "/v2.1/6f70656e/servers/4"])
def test_a_tenant_owned_resource_is_found_for_its_tenant_in_either_layout(layouts, path):
    layouts.get(path, headers=TOKEN)
    assert [e["tenancy.resource_id"] for e in layouts.recorder.seen] == [4]


def test_the_token_tenant_sees_only_its_own_records(layouts):
    # Record 5 is acme's: the token's tenant 6f70656e does not see it in the layout without a project id.
    response = layouts.get("/v2.1/servers/5", headers=TOKEN, expect_errors=True)
    assert response.status_int == 404
    assert response.json["errors"][0]["code"] == "tenancy.not-found"
    # Neither does a request without a confirmed token, whose path carries no tenant.
    assert layouts.get("/v2.1/servers/4", headers={"X-Project-Id": "6f70656e"}, expect_errors=True).status_int == 404
    # Its path tenant is acme's own URL: found (check_token_project is tenant_path's business, off here).
    layouts.get("/v2.1/acme/servers/5", headers=TOKEN)
    assert [e["tenancy.resource_id"] for e in layouts.recorder.seen] == [5]


def test_a_collection_name_is_never_the_tenant_of_a_lookup(layouts):
    # "servers" after the version is a collection: the route after it is no tenant's reading.
    for path in ("/v2.1/servers/servers/4", "/v2.1/os-keypairs/servers/4"):
        assert layouts.get(path, headers=TOKEN, expect_errors=True).status_int == 404, path
    assert layouts.recorder.seen == []


@pytest.mark.parametrize("mount", ["/v1/aaaa/v2.1", "/api/v1/compute/v2.1"], ids=["forwarded prefix", "deeper mount"])
def test_routes_follow_the_version_at_the_end_of_the_mount(layouts, mount):
    # A client's X-Forwarded-Prefix (http_proxy_to_wsgi prepends it), or a deployment's own mount, before nova's /v2.1.
    under = {"SCRIPT_NAME": mount}
    layouts.get("/os-services/4", extra_environ=under)
    layouts.get("/6f70656e/os-services/4", extra_environ=under)
    layouts.get("/servers/4", headers=TOKEN, extra_environ=under)
    assert [(e.get("tenancy.tenant_id"), e["tenancy.resource_id"]) for e in layouts.recorder.seen] == [
        (None, 4),
        ("6f70656e", 4),
        ("6f70656e", 4),
    ]
    # Record 5 is acme's, not the token's tenant's: no segment of the mount makes it anyone's.
    response = layouts.get("/servers/5", headers=TOKEN, extra_environ=under, expect_errors=True)
    assert response.status_int == 404


def test_alone_it_reads_the_layout_itself(tmp_path):
    url = sqlite_cell(tmp_path / "alone.sqlite", (4, "4b9c0f5e-8d43-4a0a-b7f2-7f2d6e0c9a14", "6f70656e"))
    recorder = Recorder()
    filt = IdResolver(recorder, options({"c1": url}, resources=LAYOUT_RESOURCES, tenant_id_pattern="[0-9a-f-]+"))
    try:
        app = webtest.TestApp(filt)
        app.get("/v2.1/6f70656e/os-services/4")
        app.get("/v2.1/os-services/4")
        # A segment it cannot tell apart: cloud records are still resolved (the service may route it
        # either way), a tenant's never.
        app.get("/v2.1/os-widgets/os-services/4")
        assert app.get("/v2.1/os-widgets/servers/4", expect_errors=True).status_int == 404
        owner = {"tenancy.tenant_id": "6f70656e"}
        app.get("/v2.1/6f70656e/servers/4", extra_environ=owner)
        assert [e["tenancy.resource_id"] for e in recorder.seen] == [4, 4, 4, 4]
    finally:
        filt.lookup.close()


def test_alone_it_reads_the_version_at_the_end_of_the_mount(tmp_path):
    url = sqlite_cell(tmp_path / "mounted.sqlite", (4, "4b9c0f5e-8d43-4a0a-b7f2-7f2d6e0c9a14", "6f70656e"))
    recorder = Recorder()
    filt = IdResolver(recorder, options({"c1": url}, resources=LAYOUT_RESOURCES, tenant_id_pattern="[0-9a-f-]+"))
    try:
        app = webtest.TestApp(filt)
        for mount in ("/v1/aaaa/v2.1", "/api/v1/compute/v2.1"):
            under = {"SCRIPT_NAME": mount}
            app.get("/os-services/4", extra_environ=under)
            app.get("/6f70656e/servers/4", extra_environ=dict(under, **{"tenancy.tenant_id": "6f70656e"}))
            # The mount's "aaaa" or "compute" is no tenant: a tenant-owned record is nobody's there.
            assert app.get("/servers/4", extra_environ=under, expect_errors=True).status_int == 404
        assert [e["tenancy.resource_id"] for e in recorder.seen] == [4, 4, 4, 4]
    finally:
        filt.lookup.close()


@pytest.mark.parametrize(
    ("option", "value"),
    [("tenant_in_path", "sometimes"), ("tenantless_collections", "os-services, .."), ("tenant_id_pattern", "[")],
)
def test_bad_layout_options_fail_at_load_naming_option_and_value(option, value):
    with pytest.raises(ConfigError) as caught:
        IdResolver(Recorder(), options({"c1": "sqlite://"}, **{option: value}))
    message = str(caught.value)
    assert "id_resolver" in message
    assert option in message
    assert repr(value.split(", ")[-1]) in message


def test_a_given_lookup_replaces_the_cells_option_and_not_both():
    from tenancy_mw.cells.outcomes import Found

    class Nowhere:
        def find_id(self, table, ident, **_how):
            return Found()

        def close(self):
            pass

    conf = options({})
    del conf["cells"]
    filt = IdResolver(Recorder(), conf, lookup=Nowhere())
    assert webtest.TestApp(filt).get("/v2.1/os-services/3", status=404).json["errors"][0]["code"] == "tenancy.not-found"
    with pytest.raises(ConfigError, match="not both"):
        IdResolver(Recorder(), options({"c1": "sqlite://"}), lookup=Nowhere())
