"""The demo's microversions, as a nova client sees them (in process; real filters and SQLite)."""

from __future__ import annotations

import pytest
import webtest
from demo_compute.app import DemoCompute
from demo_compute.microversions import MAX_VERSION, MIN_VERSION
from demo_compute.storage import ServerStore
from oslo_middleware.request_id import RequestId

from tenancy_mw.tenants.path_filter import TenantPath
from tests.functional.conftest import sqlite_url


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    store = ServerStore(sqlite_url(tmp_path_factory.mktemp("mv") / "demo.sqlite"))
    yield webtest.TestApp(RequestId(TenantPath(DemoCompute(store), {})))
    store.close()


def served_at(response) -> str:
    """The version an answer says it was served at; both headers must agree."""
    standard = response.headers["OpenStack-API-Version"]
    legacy = response.headers["X-OpenStack-Nova-API-Version"]
    assert standard == "compute " + legacy
    assert "OpenStack-API-Version" in response.headers["Vary"]
    assert "X-OpenStack-Nova-API-Version" in response.headers["Vary"]
    return legacy


def test_no_header_is_the_minimum(client):
    assert served_at(client.get("/v2.1/acme/servers")) == str(MIN_VERSION)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"OpenStack-API-Version": "compute 2.26"}, "2.26"),
        ({"X-OpenStack-Nova-API-Version": "2.53"}, "2.53"),
        ({"OpenStack-API-Version": "compute latest"}, str(MAX_VERSION)),
        # The standard header wins over the legacy one.
        ({"OpenStack-API-Version": "compute 2.10", "X-OpenStack-Nova-API-Version": "2.30"}, "2.10"),
        # Another service's version is not ours.
        ({"OpenStack-API-Version": "volume 3.5"}, str(MIN_VERSION)),
    ],
)
def test_requested_version_is_served_and_echoed(client, headers, expected):
    assert served_at(client.get("/v2.1/acme/servers", headers=headers)) == expected


def served_at_no_version(response) -> None:
    """An answer to a version the demo cannot serve names none (as nova's to a malformed one), and varies."""
    assert "OpenStack-API-Version" not in response.headers
    assert "X-OpenStack-Nova-API-Version" not in response.headers
    assert response.headers["Vary"] == "OpenStack-API-Version, X-OpenStack-Nova-API-Version"


@pytest.mark.parametrize("value", ["compute 2", "compute 2.x", "compute two", "compute 2.1.1"])
def test_malformed_version_is_400_naming_it(client, value):
    response = client.get("/v2.1/acme/servers", headers={"OpenStack-API-Version": value}, status=400)
    assert value.split()[1] in response.json["errors"][0]["detail"]
    served_at_no_version(response)


@pytest.mark.parametrize("value", ["2.0", "2.54", "3.1", "1.9"])
def test_version_out_of_range_is_406(client, value):
    response = client.get("/v2.1/acme/servers", headers={"X-OpenStack-Nova-API-Version": value}, status=406)
    assert str(MAX_VERSION) in response.json["errors"][0]["detail"]
    served_at_no_version(response)


def test_version_document_advertises_the_range(client):
    version = client.get("/v2.1").json["version"]
    assert (version["min_version"], version["version"]) == (str(MIN_VERSION), str(MAX_VERSION))
    listed = client.get("/").json["versions"][0]
    assert (listed["min_version"], listed["version"]) == (str(MIN_VERSION), str(MAX_VERSION))
