"""os-services and os-hypervisors of the demo across two cells: examples/api-paste.ini under gunicorn, 2 workers.

Served by the ``admin`` pipeline: the public one culls nova's admin calls on
these resources (tests/functional/test_demo_endpoints.py).

The cells are a SQLite file and a PostgreSQL database ($OS_ID_RESOLVER__CELLS),
holding the demo's sample rows with integer ids repeated across the cells.
The tests of one module share one server and run in file order: the ones
that change rows come last.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid

import pytest
import sqlalchemy as sa
import webtest
from demo_compute import config

from tests.conftest import require
from tests.functional.conftest import (
    DEMO_INI,
    EXAMPLES_DIR,
    DemoClient,
    demo_server_env,
    migrated_registry,
    sqlite_url,
)
from tests.support import databases
from tests.support.cells import CellProxy, silent_server
from tests.support.servers import GunicornServer, free_port, http_request

V253 = {"OpenStack-API-Version": "compute 2.53"}
LEGACY_253 = {"X-OpenStack-Nova-API-Version": "2.53"}


def start(tmp_path, cells: str, **settings: str) -> GunicornServer:
    database_url = sqlite_url(tmp_path / "demo.sqlite")
    registry_url = migrated_registry(database_url, tmp_path)
    # The project of the project-scoped URLs (/v2.1/acme/os-services) exists.
    DemoClient(None, registry_url).add_tenants("acme")
    env = dict(demo_server_env(database_url, registry_url, tmp_path), OS_ID_RESOLVER__CELLS=cells, **settings)
    server = GunicornServer(DEMO_INI, name="admin", workers=2, env=env, cwd=EXAMPLES_DIR, log_dir=tmp_path)
    server.start()
    return server


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("cells-demo")
    pg = databases.server_database("postgresql", require)
    try:
        cells = "cell1=%s, cell2=%s" % (sqlite_url(tmp_path / "cell1.sqlite"), next(pg))
        server = start(tmp_path, cells)
        try:
            yield DemoClient(server)
        finally:
            server.stop()
    finally:
        pg.close()


def get_json(demo, target: str, headers: dict | None = None, status: int = 200):
    response = demo.request("GET", target, headers=headers)
    assert response.status == status, (target, response.status, response.body)
    return response.json()


def error_of(response, status: int, code: str) -> str:
    assert response.status == status, (response.status, response.body)
    (error,) = response.json()["errors"]
    assert error["code"] == code, error
    return error["detail"]


def is_uuid(value) -> bool:
    return isinstance(value, str) and str(uuid.UUID(value)) == value


def services_at(demo, headers=None) -> list[dict]:
    return get_json(demo, "/v2.1/os-services", headers)["services"]


def by_host(services: list[dict]) -> dict[str, dict]:
    return {service["host"]: service for service in services}


# Lists ------------------------------------------------------------------------------------------


def test_services_below_253_have_integer_ids_repeated_across_cells(demo):
    services = services_at(demo)
    ids = sorted(service["id"] for service in services)
    assert ids == [1, 1, 2, 2, 3]
    assert {s["host"] for s in services} == {"cell1-conductor", "compute1", "compute2", "cell2-conductor", "compute3"}


@pytest.mark.parametrize("headers", [V253, LEGACY_253, {"OpenStack-API-Version": "compute latest"}])
def test_services_from_253_have_uuids_the_backfill_gave_exactly_once(demo, headers):
    # Both workers ran the backfill at start; every answer, from either worker, shows the same uuids.
    seen = {tuple(sorted((s["host"], s["id"]) for s in services_at(demo, headers))) for _ in range(6)}
    assert len(seen) == 1
    (pairs,) = seen
    assert all(is_uuid(ident) for _, ident in pairs)
    assert len({ident for _, ident in pairs}) == 5


def test_services_under_a_project_segment_too(demo):
    assert len(get_json(demo, "/v2.1/acme/os-services")["services"]) == 5


def test_hypervisors_list_and_detail(demo):
    below = get_json(demo, "/v2.1/os-hypervisors")["hypervisors"]
    assert sorted(h["id"] for h in below) == [1, 1, 2]
    detail = get_json(demo, "/v2.1/os-hypervisors/detail", V253)["hypervisors"]
    assert all(is_uuid(h["id"]) and is_uuid(h["service"]["id"]) for h in detail)
    assert {h["hypervisor_hostname"] for h in detail} == {
        "compute1.cell1.example",
        "compute2.cell1.example",
        "compute3.cell2.example",
    }


# Hypervisors by id -------------------------------------------------------------------------------


def uuid_of_hypervisor(demo, hostname: str) -> str:
    listed = get_json(demo, "/v2.1/os-hypervisors", V253)["hypervisors"]
    return next(h["id"] for h in listed if h["hypervisor_hostname"] == hostname)


def test_hypervisor_by_unique_integer_id_below_253(demo):
    shown = get_json(demo, "/v2.1/os-hypervisors/2")["hypervisor"]
    assert (shown["id"], shown["hypervisor_hostname"]) == (2, "compute2.cell1.example")
    uptime = get_json(demo, "/v2.1/acme/os-hypervisors/2/uptime")["hypervisor"]
    assert uptime["id"] == 2
    assert "up 93 days" in uptime["uptime"]


def test_hypervisor_by_ambiguous_integer_id_is_400_naming_253(demo):
    for target in ("/v2.1/os-hypervisors/1", "/v2.1/os-hypervisors/1/uptime"):
        detail = error_of(demo.request("GET", target), 400, "tenancy.ambiguous-id")
        assert "2.53" in detail


def test_hypervisor_by_uuid_from_253_picks_the_right_cell(demo):
    for hostname in ("compute1.cell1.example", "compute3.cell2.example"):  # both integer id 1
        ident = uuid_of_hypervisor(demo, hostname)
        shown = get_json(demo, "/v2.1/os-hypervisors/%s" % ident, V253)["hypervisor"]
        assert (shown["id"], shown["hypervisor_hostname"]) == (ident, hostname)
        upper = get_json(demo, "/v2.1/os-hypervisors/%s/uptime" % ident.upper(), LEGACY_253)["hypervisor"]
        assert upper["id"] == ident


def test_hypervisor_id_of_the_wrong_kind_is_400(demo):
    error_of(demo.request("GET", "/v2.1/os-hypervisors/2", headers=V253), 400, "tenancy.invalid-id.not-a-uuid")
    ident = uuid_of_hypervisor(demo, "compute2.cell1.example")
    error_of(demo.request("GET", "/v2.1/os-hypervisors/%s" % ident), 400, "tenancy.uuid-needs-microversion")
    for bad in ("2%20", "-2", "2.0", "1%27%20OR%20%271%27%3D%271", "99999999999999999999"):
        error_of(demo.request("GET", "/v2.1/os-hypervisors/%s" % bad), 400, demo_bad_id_code(bad))
    missing = demo.request("GET", "/v2.1/os-hypervisors/%s" % uuid.uuid4(), headers=V253)
    error_of(missing, 404, "tenancy.not-found")


def demo_bad_id_code(bad: str) -> str:
    return "tenancy.invalid-id.integer-too-large" if bad.isdigit() else "tenancy.invalid-id.not-an-integer"


# The hostname search ------------------------------------------------------------------------------


@pytest.mark.parametrize("parameter", ["hypervisor_hostname_pattern", "hypervisor_hostname"])
def test_hostname_search_from_253_by_nova_and_spec_parameter(demo, parameter):
    found = get_json(demo, "/v2.1/os-hypervisors?%s=cell1" % parameter, V253)["hypervisors"]
    assert sorted(h["hypervisor_hostname"] for h in found) == ["compute1.cell1.example", "compute2.cell1.example"]
    assert all(is_uuid(h["id"]) for h in found)
    assert (
        get_json(demo, "/v2.1/os-hypervisors/detail?%s=compute3" % parameter, V253)["hypervisors"][0]["hypervisor_type"]
        == "QEMU"
    )
    error_of(demo.request("GET", "/v2.1/os-hypervisors?%s=nowhere" % parameter, headers=V253), 404, "demo.not-found")


def test_hostname_search_wildcards_are_plain_text(demo):
    error_of(
        demo.request("GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=%25", headers=V253), 404, "demo.not-found"
    )
    error_of(
        demo.request("GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=_", headers=V253), 404, "demo.not-found"
    )


def test_hostname_search_route_below_253_and_gone_from_it(demo):
    found = get_json(demo, "/v2.1/os-hypervisors/compute/search")["hypervisors"]
    assert sorted(h["id"] for h in found) == [1, 1, 2]
    error_of(demo.request("GET", "/v2.1/os-hypervisors/compute/search", headers=V253), 404, "demo.not-found")


# Versions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"OpenStack-API-Version": "compute 2.x"}, 400, "tenancy.bad-version"),
        ({"X-OpenStack-Nova-API-Version": "2"}, 400, "tenancy.bad-version"),
        ({"OpenStack-API-Version": "compute 2.54"}, 406, "tenancy.version-not-acceptable"),
        ({"X-OpenStack-Nova-API-Version": "2.0"}, 406, "tenancy.version-not-acceptable"),
    ],
)
def test_bad_versions_on_id_routes(demo, headers, status, code):
    response = demo.request("GET", "/v2.1/os-hypervisors/2", headers=headers)
    error_of(response, status, code)
    assert "OpenStack-API-Version" in response.headers["vary"]


# Changes: last, they change the rows -------------------------------------------------------------------


def test_update_from_253_by_uuid_changes_only_that_cells_record(demo):
    before = by_host(services_at(demo, V253))
    ident = before["compute3"]["id"]  # integer id 2, as compute1's in the other cell
    body = {"status": "disabled", "disabled_reason": "maintenance"}
    response = demo.request("PUT", "/v2.1/os-services/%s" % ident, body, V253)
    assert response.status == 200, response.body
    service = response.json()["service"]
    assert (service["id"], service["host"], service["status"], service["disabled_reason"]) == (
        ident,
        "compute3",
        "disabled",
        "maintenance",
    )
    after = by_host(services_at(demo, V253))
    assert after["compute3"]["status"] == "disabled"
    assert after["compute1"]["status"] == "enabled"


def test_update_below_253_is_the_legacy_action_api(demo):
    response = demo.request(
        "PUT",
        "/v2.1/os-services/disable-log-reason",
        {"host": "compute1", "binary": "nova-compute", "disabled_reason": "disk"},
    )
    assert response.status == 200, response.body
    assert response.json()["service"] == {
        "host": "compute1",
        "binary": "nova-compute",
        "status": "disabled",
        "disabled_reason": "disk",
    }
    assert by_host(services_at(demo))["compute1"]["status"] == "disabled"
    # From 2.53 the action words are not ids.
    error_of(
        demo.request("PUT", "/v2.1/os-services/enable", {"host": "compute1", "binary": "nova-compute"}, V253),
        400,
        "demo.invalid-id",
    )
    error_of(
        demo.request("PUT", "/v2.1/os-services/3", {"status": "enabled"}, V253), 400, "tenancy.invalid-id.not-a-uuid"
    )


def test_delete_ambiguous_integer_id_is_400_and_deletes_nothing(demo):
    detail = error_of(demo.request("DELETE", "/v2.1/os-services/1"), 400, "tenancy.ambiguous-id")
    assert "2.53" in detail
    assert len(services_at(demo)) == 5


def test_delete_by_unique_integer_id_below_253_then_by_uuid_from_253(demo):
    assert demo.request("DELETE", "/v2.1/os-services/3").status == 204  # compute2, cell1 only
    error_of(demo.request("DELETE", "/v2.1/os-services/3"), 404, "tenancy.not-found")
    conductor = by_host(services_at(demo, V253))["cell2-conductor"]["id"]
    assert demo.request("DELETE", "/v2.1/acme/os-services/%s" % conductor, headers=V253).status == 204
    error_of(demo.request("DELETE", "/v2.1/os-services/%s" % conductor, headers=V253), 404, "tenancy.not-found")
    assert sorted(s["host"] for s in services_at(demo)) == ["cell1-conductor", "compute1", "compute3"]
    # compute2's node went with its service.
    error_of(demo.request("GET", "/v2.1/os-hypervisors/2"), 404, "tenancy.not-found")


# Cells that hang or refuse, at start and on a request -------------------------------------------------

#: The cell_timeout of the demos below (the demo's settings say 2).
CELL_TIMEOUT = 1.0
#: What a bound on a wait allows beyond cell_timeout: the request's own work on a loaded machine.
MARGIN = 2.0
#: The drivers of a cell that does not answer, on a port of the test's.
DRIVER_URLS = {
    "postgresql": "postgresql+psycopg2://root@127.0.0.1:%d/test",
    "mariadb": "mysql+pymysql://root:@127.0.0.1:%d/test",
}
CELL1_HOSTS = ["cell1-conductor", "compute1", "compute2"]
CELL1_HYPERVISORS = ["compute1.cell1.example", "compute2.cell1.example"]


def start_timed(tmp_path, cell2_url: str) -> GunicornServer:
    """A demo whose cell2 is *cell2_url* (cell1 a SQLite file), once it answers ``GET /`` (which reaches no cell)."""
    cells = "cell1=%s, cell2=%s" % (sqlite_url(tmp_path / "cell1.sqlite"), cell2_url)
    server = start(tmp_path, cells, OS_ID_RESOLVER__CELL_TIMEOUT=str(CELL_TIMEOUT))
    try:
        # The request waits in the listen queue until a worker has built the app: a worker that
        # hangs while building it never answers.  Generous: imports on a loaded machine.
        response = http_request(server.port, "GET", "/", timeout=60)
    except BaseException:
        server.stop()
        raise
    assert response.status == 200, (response.status, response.body, server.log())
    return server


def timed(demo, method: str, target: str, body=None, headers=None):
    """The response to one request, checked to come within cell_timeout (and the margin)."""
    started = time.monotonic()
    response = demo.request(method, target, body, headers)
    elapsed = time.monotonic() - started
    # Liveness, not speed: a cell that does not answer costs a request its cell_timeout, never a hang.
    assert elapsed < CELL_TIMEOUT + MARGIN, (method, target, elapsed)
    return response


def hosts_of(response) -> list[str]:
    assert response.status == 200, (response.status, response.body)
    return sorted(service["host"] for service in response.json()["services"])


def assert_serving_without_cell2(demo, cell2_hypervisor: str | None = None) -> None:
    """Lists show cell1 only; answers that rest on cell2 are 503, each within the bound."""
    assert hosts_of(timed(demo, "GET", "/v2.1/os-services")) == CELL1_HOSTS
    listed = timed(demo, "GET", "/v2.1/os-hypervisors/detail", headers=V253).json()["hypervisors"]
    assert sorted(h["hypervisor_hostname"] for h in listed) == CELL1_HYPERVISORS
    # A uuid in cell1 is still found (the filter does not wait for cell2 once cell1 has it).
    shown = timed(demo, "GET", "/v2.1/os-hypervisors/%s" % listed[0]["id"], headers=V253)
    assert shown.json()["hypervisor"]["id"] == listed[0]["id"]
    # cell2's own hypervisor, or an integer id cell2 could hold too: the filter's 503.
    for target, headers in (
        ("/v2.1/os-hypervisors/%s" % (cell2_hypervisor or uuid.uuid4()), V253),
        ("/v2.1/os-hypervisors/2", {}),
    ):
        response = timed(demo, "GET", target, headers=headers)
        error_of(response, 503, "tenancy.cells-unavailable")
        assert response.headers["retry-after"] == "1"
    # A search that matched nothing in cell1, and a legacy action by host: cell2 could change them.
    search = timed(demo, "GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=compute3", headers=V253)
    assert "did not answer in time" in error_of(search, 503, "demo.cells-unavailable")
    assert search.headers["retry-after"] == "1"
    action = timed(demo, "PUT", "/v2.1/os-services/disable", {"host": "compute1", "binary": "nova-compute"})
    error_of(action, 503, "demo.cells-unavailable")
    assert by_host(services_at(demo))["compute1"]["status"] == "enabled"


@pytest.mark.parametrize("driver", sorted(DRIVER_URLS))
@pytest.mark.parametrize("down", ["hung", "refused"])
def test_a_cell_down_at_start_costs_the_start_at_most_cell_timeout_and_is_left_out(tmp_path, driver, down):
    with contextlib.ExitStack() as stack:
        # hung: the port accepts and never says a word; refused: nothing listens.
        port = stack.enter_context(silent_server()) if down == "hung" else free_port()
        server = start_timed(tmp_path, DRIVER_URLS[driver] % port)
        stack.callback(server.stop)
        assert_serving_without_cell2(DemoClient(server))
        # Each worker says how long building its app waited for cell2 (the imports before it depend
        # on the machine's load): liveness, not speed, at most cell_timeout and a margin.  The
        # other worker may still be importing: its word is waited for.
        said = r"demo cell cell2 is not ready at start: it did not answer within ([0-9.]+) s"
        deadline = time.monotonic() + 60
        while len(re.findall(said, server.log())) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        log = server.log()
        waits = [float(wait) for wait in re.findall(said, log)]
        assert len(waits) == 2, log
        assert max(waits) < CELL_TIMEOUT + MARGIN, waits
        assert "demo cell cell2 left out of a list" in log


@pytest.mark.parametrize("driver", sorted(DRIVER_URLS))
@pytest.mark.parametrize("failure", ["go_silent", "refuse"])
def test_a_cell_that_fails_while_serving_is_left_out_within_cell_timeout(tmp_path, make_database, driver, failure):
    with CellProxy(make_database(driver)) as proxy:
        server = start_timed(tmp_path, proxy.url)
        try:
            demo = DemoClient(server)
            assert len(services_at(demo)) == 5
            hypervisors = get_json(demo, "/v2.1/os-hypervisors", V253)["hypervisors"]
            (cell2_hypervisor,) = [h["id"] for h in hypervisors if h["hypervisor_hostname"].endswith(".cell2.example")]
            getattr(proxy, failure)()
            # Twice: each of the two workers meets the failure at least once on its pooled connection.
            for _ in range(2):
                assert_serving_without_cell2(demo, cell2_hypervisor)
            assert "demo cell cell2 left out of a list" in server.log()
        finally:
            proxy.refuse()
            server.stop()


@pytest.mark.parametrize("driver", sorted(DRIVER_URLS))
def test_a_cell_down_at_start_joins_the_lists_when_it_answers(tmp_path, make_database, driver):
    with CellProxy(make_database(driver)) as proxy:
        proxy.go_silent()
        server = start_timed(tmp_path, proxy.url)
        try:
            demo = DemoClient(server)
            assert hosts_of(demo.request("GET", "/v2.1/os-services")) == CELL1_HOSTS
            proxy.resume()
            # The first lists after it is back prepare it (tables, sample rows, uuids), in each worker.
            deadline = time.monotonic() + 30
            while len(services_at(demo)) < 5 and time.monotonic() < deadline:
                time.sleep(0.2)
            seen = [services_at(demo, V253) for _ in range(4)]
            assert all(
                sorted(s["host"] for s in services) == sorted(CELL1_HOSTS + ["cell2-conductor", "compute3"])
                for services in seen
            ), seen
            assert all(is_uuid(s["id"]) for services in seen for s in services)
        finally:
            server.stop()


@pytest.mark.parametrize("driver", sorted(DRIVER_URLS))
def test_a_cell_that_goes_silent_after_the_filter_found_the_id_is_503_from_the_app(
    tmp_path, make_database, monkeypatch, driver
):
    # In process, the demo's admin pipeline (the public one culls os-hypervisors): the filter
    # finds the hypervisor in cell2, then cell2 goes silent just as the app reads it.
    from paste.deploy import loadapp

    with CellProxy(make_database(driver)) as proxy:
        cells = "cell1=%s, cell2=%s" % (sqlite_url(tmp_path / "cell1.sqlite"), proxy.url)
        database_url = sqlite_url(tmp_path / "demo.sqlite")
        env = dict(
            demo_server_env(database_url, migrated_registry(database_url, tmp_path), tmp_path),
            OS_ID_RESOLVER__CELLS=cells,
            OS_ID_RESOLVER__CELL_TIMEOUT=str(CELL_TIMEOUT),
        )
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        parts = chain(loadapp("config:" + DEMO_INI, name="admin"))
        try:
            client = webtest.TestApp(parts[0])
            listed = client.get("/v2.1/os-hypervisors", headers=V253).json["hypervisors"]
            (ident,) = [h["id"] for h in listed if h["hypervisor_hostname"].endswith(".cell2.example")]
            demo_cells = parts[-1].cells_api.cells
            sa.event.listen(demo_cells.engines["cell2"], "before_cursor_execute", lambda *_: proxy.go_silent())
            started = time.monotonic()
            response = client.get("/v2.1/os-hypervisors/%s" % ident, headers=V253, expect_errors=True)
            assert time.monotonic() - started < CELL_TIMEOUT + MARGIN
            assert response.status_int == 503, response.text
            assert response.json["errors"][0]["code"] == "demo.cells-unavailable"
            assert response.headers["Retry-After"] == "1"
        finally:
            proxy.refuse()  # the app's thread still waiting on cell2 gets its error
            close_all(parts)


def chain(app) -> list:
    """The objects of a built pipeline, outermost first (each filter keeps the next in ``application``)."""
    found = [app]
    while hasattr(found[-1], "application"):
        found.append(found[-1].application)
    return found


def close_all(parts: list) -> None:
    """Close what the pipeline's parts opened (stores, lookups, the demo's cells)."""
    for part in parts:
        cells_api = getattr(part, "cells_api", None)
        for closable in (
            getattr(part, "store", None),
            getattr(part, "lookup", None),
            getattr(cells_api, "cells", None),
            getattr(part, "registry", None),
        ):
            if hasattr(closable, "close"):
                closable.close()


def test_cells_default_to_sqlite_files_in_examples_state():
    with open(DEMO_INI) as ini:
        assert "id_resolver demo_compute" in ini.read()
    # Relative to the servers' working folder, examples/ (make demo runs them there).
    assert config.load().id_resolver.cells == ("cell1=sqlite:///state/cell1.sqlite, cell2=sqlite:///state/cell2.sqlite")
    assert os.path.basename(EXAMPLES_DIR) == "examples"
