"""openstacksdk and the ``openstack`` command line, unchanged, through the filtered pipelines.

Both authenticate with passwords against the test Keystone and find nova
(and cinder) in its catalog: region ``RegionOne`` publishes the URLs
without the project id, ``RegionTwo`` with it; the public interface is
the endpoint with ``admin_cull``, the admin interface the one without.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import uuid

import pytest

from tests.support.openstack import OTHER_REGION, PASSWORD, REGION

REGIONS = [REGION, OTHER_REGION]


def client_env(cloud, who: str, region: str, interface: str = "public") -> dict:
    person = cloud.people[who]
    return cloud.env(
        OS_AUTH_URL=cloud.keystone.url + "/v3",
        OS_IDENTITY_API_VERSION="3",
        OS_USERNAME=person.name,
        OS_PASSWORD=PASSWORD,
        OS_PROJECT_NAME=person.project,
        OS_USER_DOMAIN_ID="default",
        OS_PROJECT_DOMAIN_ID="default",
        OS_REGION_NAME=region,
        OS_INTERFACE=interface,
    )


def openstack(cloud, who: str, region: str, *args: str, interface: str = "public", output: bool = True):
    """Run the ``openstack`` command line; its JSON output (*output*: the command has any)."""
    done = subprocess.run(
        [str(cloud.venv / "bin" / "openstack"), *args, *(["-f", "json"] if output else [])],
        env=client_env(cloud, who, region, interface),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, "openstack %s: %s" % (" ".join(args), done.stderr[-3000:])
    return json.loads(done.stdout) if done.stdout.strip() else None


SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys, openstack
    conn = openstack.connect()
    compute = conn.compute
    out = {}
    out["version"] = compute.get_endpoint_data().api_version
    out["flavors"] = [f.name for f in compute.flavors()]
    key = compute.create_keypair(name=sys.argv[1])
    out["keypair"] = key.name
    out["keypairs"] = [k.name for k in compute.keypairs()]
    compute.delete_keypair(key)
    group = compute.create_server_group(name=sys.argv[1], policies=["affinity"])
    out["group_listed"] = group.id in [g.id for g in compute.server_groups()]
    compute.delete_server_group(group)
    out["servers"] = [s.id for s in compute.servers()]
    out["limits"] = compute.get_limits().absolute.instances
    out["quota_cores"] = conn.get_compute_quotas(conn.current_project_id)["cores"]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("region", REGIONS)
def test_openstacksdk_drives_nova_through_the_filtered_public_endpoint(cloud, nova_endpoints, region):
    name = "sdk-" + uuid.uuid4().hex[:8]
    done = subprocess.run(
        [str(cloud.venv / "bin" / "python"), "-c", SDK_SCRIPT, name],
        env=client_env(cloud, "alice", region),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["version"][0] == 2
    assert out["keypair"] == name
    assert name in out["keypairs"]
    assert out["group_listed"] is True
    assert out["servers"] == []
    assert out["limits"] == 10
    assert out["quota_cores"] == 20


@pytest.mark.parametrize("region", REGIONS)
def test_the_openstack_command_line_as_a_member(cloud, nova_endpoints, region, tmp_path):
    name = "cli-" + uuid.uuid4().hex[:8]
    assert isinstance(openstack(cloud, "alice", region, "flavor", "list"), list)
    key_file = tmp_path / "key.pem"
    created = openstack(cloud, "alice", region, "keypair", "create", "--private-key", str(key_file), name)
    assert created["name"] == name
    assert "PRIVATE KEY" in key_file.read_text()
    assert name in {k["Name"] for k in openstack(cloud, "alice", region, "keypair", "list")}
    openstack(cloud, "alice", region, "keypair", "delete", name, output=False)
    group = openstack(cloud, "alice", region, "server", "group", "create", "--policy", "affinity", name)
    assert group["name"] == name
    assert openstack(cloud, "alice", region, "server", "list") == []
    limits = openstack(cloud, "alice", region, "limits", "show", "--absolute")
    assert {"Name": "instances", "Value": 10} in limits, limits
    quota = openstack(cloud, "alice", region, "quota", "show", "--compute")
    assert quota


@pytest.mark.parametrize("region", REGIONS)
def test_the_openstack_command_line_as_an_admin_on_both_endpoints(cloud, nova_endpoints, region):
    # Admin calls are culled on the public interface and served on the admin one.
    for command in (("compute", "service", "list"), ("hypervisor", "list")):
        assert openstack(cloud, "admin", region, *command, interface="admin") == []
        done = subprocess.run(
            [str(cloud.venv / "bin" / "openstack"), *command, "-f", "json"],
            env=client_env(cloud, "admin", region),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode != 0
        assert "could not be found" in done.stderr
    name = "cli-flavor-" + uuid.uuid4().hex[:8]
    flavor = openstack(
        cloud, "admin", region, "flavor", "create", "--ram", "64", "--disk", "1", name, interface="admin"
    )
    assert flavor["name"] == name
    openstack(cloud, "admin", region, "flavor", "delete", name, interface="admin", output=False)
