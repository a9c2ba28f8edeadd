"""Fixtures of the tests through real OpenStack: one cloud per test session.

Keystone, and nova-api and cinder-api from PyPI, unmodified
(:mod:`tests.support.openstack`): each service's own installed
``api-paste.ini``, with the filters added by the library's recipe
(``tenancy-mw-manage paste add``), served under gunicorn:

- ``nova_public`` / ``cinder_public``: the public endpoint (``admin_cull`` on);
- ``nova_admin`` / ``cinder_admin``: the admin endpoint (no ``admin_cull``);
- ``nova_plain``: nova's installed file untouched (what the recipe changes).

The catalog publishes each service in both layouts: region ``RegionOne``
without the project id in the URL (``/v2.1``), ``RegionTwo`` with it
(``/v2.1/%(project_id)s``); the public interface is the public endpoint,
the admin interface the admin one.
"""

from __future__ import annotations

import pytest

from tests.conftest import require
from tests.support import memcached
from tests.support.openstack import OTHER_REGION, REGION, Cloud, apply_recipe

#: idempotency's secret in every filtered endpoint (they share one memcached).
SECRET = "tenancy-mw-openstack-tests-secret"


def pytest_terminal_summary(terminalreporter):
    """admin_cull's derived rules against nova's and cinder's own answers (test_policy_truth.py), when it ran."""
    from tests.support.policy_truth import RESULTS

    if RESULTS:
        terminalreporter.section("admin_cull from policy, judged by the services")
        for line in RESULTS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def cloud(tmp_path_factory, openstack_venv):
    """Keystone with an admin and two member projects (alice in alpha, bob in beta)."""
    the_cloud = Cloud(tmp_path_factory.mktemp("openstack"), openstack_venv)
    yield the_cloud
    the_cloud.stop()


@pytest.fixture(scope="session")
def openstack_memcached():
    """The memcached server the filtered endpoints keep idempotency records in."""
    require(memcached.available(), "memcached")
    server = memcached.MemcachedServer()
    yield server
    server.stop()


def _settings(openstack_memcached) -> dict[str, str]:
    return {
        "idempotency.backend": "memcached",
        "idempotency.memcached_servers": openstack_memcached.address,
        "idempotency.secret": SECRET,
    }


def _filtered(cloud, service: str, openstack_memcached) -> tuple:
    """(public, admin) servers of *service*: its installed api-paste.ini after the recipe for each endpoint."""
    installed = cloud.installed_paste(service)
    settings = _settings(openstack_memcached)
    start = getattr(cloud, service)
    return tuple(
        start(endpoint, apply_recipe(service, endpoint, installed, cloud.workdir, settings))
        for endpoint in ("public", "admin")
    )


def _register(cloud, service_type: str, name: str, servers: tuple, layouts: dict[str, str]) -> None:
    """Catalog entries of *servers* (public, admin) in each region's URL layout (*layouts*: region -> path)."""
    public, admin = servers
    cloud.register(
        service_type,
        name,
        {region: public.url + path for region, path in layouts.items()},
        admin_urls={region: admin.url + path for region, path in layouts.items()},
    )


@pytest.fixture(scope="session")
def nova_endpoints(cloud, openstack_memcached):
    """(public, admin, plain) nova-api services, registered in the catalog in both layouts."""
    public, admin = _filtered(cloud, "nova", openstack_memcached)
    plain = cloud.nova("plain", cloud.installed_paste("nova"), workers=1)
    _register(cloud, "compute", "nova", (public, admin), {REGION: "/v2.1", OTHER_REGION: "/v2.1/%(project_id)s"})
    return public, admin, plain


@pytest.fixture(scope="session")
def nova_public(nova_endpoints):
    return nova_endpoints[0]


@pytest.fixture(scope="session")
def nova_admin(nova_endpoints):
    return nova_endpoints[1]


@pytest.fixture(scope="session")
def nova_plain(nova_endpoints):
    return nova_endpoints[2]


@pytest.fixture(scope="session")
def cinder_endpoints(cloud, openstack_memcached):
    """(public, admin) cinder-api services, registered in the catalog in both layouts."""
    servers = _filtered(cloud, "cinder", openstack_memcached)
    _register(cloud, "block-storage", "cinder", servers, {REGION: "/v3/%(project_id)s", OTHER_REGION: "/v3"})
    return servers
