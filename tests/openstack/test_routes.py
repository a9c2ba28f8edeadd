"""The default ``tenantless_collections`` against nova's and cinder's own route tables."""

from __future__ import annotations

import pytest

from tenancy_mw.tenants.ids import DEFAULT_TENANTLESS_COLLECTIONS
from tests.support.openstack import top_level_names


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_every_top_level_name_the_router_serves_is_a_tenantless_collection(openstack_venv, service):
    names = top_level_names(openstack_venv, service)
    assert "servers" in names if service == "nova" else "volumes" in names
    missing = sorted(set(names) - set(DEFAULT_TENANTLESS_COLLECTIONS))
    # A name missing here would be read as a tenant under the default layout.
    assert missing == []
