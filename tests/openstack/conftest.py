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


@pytest.fixture(scope="session")
def nova_endpoints(cloud, openstack_memcached):
    """(public, admin, plain) nova-api services, registered in the catalog in both layouts."""
    installed = cloud.installed_paste("nova")
    settings = _settings(openstack_memcached)
    public = cloud.nova("public", apply_recipe("nova", "public", installed, cloud.workdir, settings))
    admin = cloud.nova("admin", apply_recipe("nova", "admin", installed, cloud.workdir, settings))
    plain = cloud.nova("plain", installed, workers=1)
    cloud.register(
        "compute",
        "nova",
        {REGION: public.url + "/v2.1", OTHER_REGION: public.url + "/v2.1/%(project_id)s"},
        admin_urls={REGION: admin.url + "/v2.1", OTHER_REGION: admin.url + "/v2.1/%(project_id)s"},
    )
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
    installed = cloud.installed_paste("cinder")
    settings = _settings(openstack_memcached)
    public = cloud.cinder("public", apply_recipe("cinder", "public", installed, cloud.workdir, settings))
    admin = cloud.cinder("admin", apply_recipe("cinder", "admin", installed, cloud.workdir, settings))
    cloud.register(
        "block-storage",
        "cinder",
        {REGION: public.url + "/v3/%(project_id)s", OTHER_REGION: public.url + "/v3"},
        admin_urls={REGION: admin.url + "/v3/%(project_id)s", OTHER_REGION: admin.url + "/v3"},
    )
    return public, admin
