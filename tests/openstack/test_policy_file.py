"""The deployment's own policy file counts: nova 34.0.0 with a policy.yaml, admin_cull derived inside nova.

The recipe's public endpoint (``policy_namespace = nova``), served by a nova
whose ``nova.conf`` names a policy file that opens the hypervisor list to
members and closes the keypair list to admins: ``admin_cull`` reads the file
through nova's own configuration when nova loads its paste file, follows it,
and says so in nova's log.
"""

from __future__ import annotations

import pytest

from tests.support.openstack import apply_recipe

CULLED = {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
POLICY = """\
"os_compute_api:os-hypervisors:list": "role:member"
"os_compute_api:os-keypairs:index": "rule:context_is_admin"
"""


@pytest.fixture(scope="module")
def nova_with_policy_file(cloud, openstack_memcached, nova_endpoints):
    paste = apply_recipe(
        "nova",
        "public",
        cloud.installed_paste("nova"),
        cloud.workdir,
        {
            "idempotency.backend": "memcached",
            "idempotency.memcached_servers": openstack_memcached.address,
            "idempotency.secret": "policy-file-test",
        },
    )
    folder = cloud.workdir / "nova-policy-file"
    folder.mkdir(exist_ok=True)
    (folder / "policy.yaml").write_text(POLICY)
    service = cloud.nova("policy-file", paste, workers=1, extra_conf="[oslo_policy]\npolicy_file = policy.yaml\n")
    yield service
    service.stop()


def _get(service, cloud, who: str, target: str):
    resp = service.request("GET", target, {"X-Auth-Token": cloud.token(who), "Accept": "application/json"})
    return resp.status, resp.json() if resp.body else None


@pytest.mark.parametrize("layout", ["/v2.1", "/v2.1/{project}"])
def test_a_call_the_policy_file_opens_to_members_is_not_culled(cloud, nova_with_policy_file, nova_public, layout):
    prefix = layout.replace("{project}", cloud.people["alice"].project_id)
    # The recipe's public endpoint with nova's defaults culls it ...
    assert _get(nova_public, cloud, "alice", prefix + "/os-hypervisors") == (404, CULLED)
    # ... and with the file, nova serves it to a member through the filter.
    status, body = _get(nova_with_policy_file, cloud, "alice", prefix + "/os-hypervisors")
    assert status == 200, body
    assert "hypervisors" in body


@pytest.mark.parametrize("layout", ["/v2.1", "/v2.1/{project}"])
def test_a_call_the_policy_file_closes_to_admins_is_culled(cloud, nova_with_policy_file, nova_public, layout):
    prefix = layout.replace("{project}", cloud.people["alice"].project_id)
    assert _get(nova_public, cloud, "alice", prefix + "/os-keypairs")[0] == 200
    assert _get(nova_with_policy_file, cloud, "alice", prefix + "/os-keypairs") == (404, CULLED)
    admin_prefix = layout.replace("{project}", cloud.people["admin"].project_id)
    assert _get(nova_with_policy_file, cloud, "admin", admin_prefix + "/os-keypairs") == (404, CULLED)


def test_the_filter_logs_what_the_policy_file_changed_when_nova_loads_it(nova_with_policy_file):
    log = nova_with_policy_file.log()
    assert "admin_cull: the policy file opens GET /os-hypervisors to members (cull by default): not culled" in log
    assert "admin_cull: the policy file closes GET /os-keypairs to members (keep by default): culled" in log
    assert "rules derived from nova's policy" in log
