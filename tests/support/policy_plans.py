"""nova's and cinder's :class:`~tests.support.policy_calls.Plan`: tables, and the resources each run needs.

Read with :mod:`tests.support.policy_calls`, which says what each table is.
Labels are ``"METHOD /shape/{} (action)"`` (placeholders as ``{}``);
values are JSON with ``"{name}"`` strings filled from the caller's world.
"""

from __future__ import annotations

import uuid

from tests.support.policy_calls import (
    ABSENT,
    PEOPLE,
    Plan,
    World,
    made,
    run_script,
    user_ids,
)

# --- nova ---------------------------------------------------------------------------------------

NOVA_PLACEHOLDERS = {
    # by placeholder name
    "tenant_id": "project",
    "hypervisor_id": "node",
    "hypervisor_hostname_pattern": "host",
    # by the segment before it
    "servers": "server",
    "flavors": "flavor",
    "os-extra_specs": "spec_key",
    "os-aggregates": "aggregate",
    "os-keypairs": "keypair",
    "os-server-groups": "server_group",
    "os-services": "service",
    "os-hosts": "host",
    "os-quota-sets": "project",
    "os-simple-tenant-usage": "project",
    "os-quota-class-sets": "quota_class",
    "os-instance-actions": "server.request_id",
    "migrations": "server.migration_id",
    "os-volume_attachments": "server.volume_id",
    "os-interface": "server.port_id",
    "ips": "network_label",
    "metadata": "metadata_key",
    "tags": "tag",
    "shares": "server.share_id",
    "extensions": "extension",
    "os-instance_usage_audit_log": "timestamp",
    # what nova only proxies (neutron, ironic) or hands out (console tokens): no such thing here
    "os-assisted-volume-snapshots": "absent",
    "os-baremetal-nodes": "absent",
    "os-console-auth-tokens": "absent",
    "os-floating-ips": "absent",
    "os-networks": "absent",
    "os-tenant-networks": "absent",
    "os-security-groups": "absent",
    "os-security-group-rules": "absent",
    # nova's volume API proxies cinder's (in the catalog): cinder's volumes and snapshots of the person
    "os-volumes": "cinder_volume",
    "os-snapshots": "cinder_snapshot",
}

#: Server (and flavor, aggregate) actions' minimal bodies; not listed: ``null``.
NOVA_ACTIONS = {
    "os-resetState": {"state": "active"},
    "changePassword": {"adminPass": "truth-Passw0rd"},
    "os-getConsoleOutput": {},
    "createBackup": {"name": "truth", "backup_type": "daily", "rotation": 1},
    "evacuate": {"onSharedStorage": False},
    "rebuild": {"imageRef": ABSENT},
    "addFloatingIp": {"address": "10.0.0.9"},
    "removeFloatingIp": {"address": "10.0.0.9"},
    "os-migrateLive": {"host": None, "block_migration": False, "disk_over_commit": False},
    "addFixedIp": {"networkId": ABSENT},
    "removeFixedIp": {"address": "10.0.0.5"},
    "os-getSerialConsole": {"type": "serial"},
    "os-getSPICEConsole": {"type": "spice-html5"},
    "os-getVNCConsole": {"type": "novnc"},
    "addSecurityGroup": {"name": "default"},
    "removeSecurityGroup": {"name": "default"},
    "reboot": {"type": "SOFT"},
    "resize": {"flavorRef": "{flavor}"},
    "createImage": {"name": "truth"},
    "addTenantAccess": {"tenant": "{project}"},
    "removeTenantAccess": {"tenant": "{project}"},
    "set_metadata": {"metadata": {"k2": "v2"}},
    "add_host": {"host": "{host}"},
    "remove_host": {"host": "{host}"},
}

NOVA_BODIES = {
    "POST /flavors": {"flavor": {"name": "{unique}", "ram": 64, "vcpus": 1, "disk": 1}},
    "PUT /flavors/{}": {"flavor": {"description": "changed"}},
    "POST /flavors/{}/os-extra_specs": {"extra_specs": {"k2": "v2"}},
    "PUT /flavors/{}/os-extra_specs/{}": {"k1": "v2"},
    "POST /os-aggregates": {"aggregate": {"name": "{unique}"}},
    "PUT /os-aggregates/{}": {"aggregate": {"name": "{unique}"}},
    "POST /os-aggregates/{}/images": {"cache": [{"id": ABSENT}]},
    "POST /os-assisted-volume-snapshots": {
        "snapshot": {"volume_id": ABSENT, "create_info": {"snapshot_id": ABSENT, "type": "qcow2", "new_file": "f"}}
    },
    "POST /os-floating-ips": {"pool": "public"},
    "PUT /os-hosts/{}": {"status": "enable"},
    "POST /os-keypairs": {"keypair": {"name": "{unique}"}},
    "PUT /os-quota-class-sets/{}": {"quota_class_set": {"instances": 10}},
    "PUT /os-quota-sets/{}": {"quota_set": {"instances": 10}},
    "POST /os-security-groups": {"security_group": {"name": "truth", "description": "truth"}},
    "PUT /os-security-groups/{}": {"security_group": {"name": "truth", "description": "truth"}},
    "POST /os-security-group-rules": {
        "security_group_rule": {"parent_group_id": ABSENT, "ip_protocol": "tcp", "from_port": 22, "to_port": 22}
    },
    "POST /os-server-external-events": {"events": [{"name": "network-changed", "server_uuid": "{server}"}]},
    "POST /os-server-groups": {"server_group": {"name": "{unique}", "policies": ["affinity"]}},
    "PUT /os-services/{}": {"status": "disabled"},
    "POST /os-volumes": {"volume": {"size": 1}},
    "POST /os-snapshots": {"snapshot": {"volume_id": "{cinder_volume}"}},
    "POST /servers": {"server": {"name": "{unique}", "imageRef": ABSENT, "flavorRef": "{flavor}"}},
    "PUT /servers/{}": {"server": {"name": "{unique}"}},
    "POST /servers/{}/metadata": {"metadata": {"k2": "v2"}},
    "PUT /servers/{}/metadata": {"metadata": {"k1": "v2"}},
    "PUT /servers/{}/metadata/{}": {"meta": {"k1": "v2"}},
    "PUT /servers/{}/tags": {"tags": ["t2"]},
    "PUT /servers/{}/tags/{}": None,
    "POST /servers/{}/os-interface": {"interfaceAttachment": {"net_id": ABSENT}},
    "POST /servers/{}/os-volume_attachments": {"volumeAttachment": {"volumeId": "{cinder_volume2}"}},
    # 2.85: the member's update (same volume); another volume would be a swap (service or admin)
    "PUT /servers/{}/os-volume_attachments/{}": {"volumeAttachment": {"volumeId": "{server.volume_id}"}},
    "POST /servers/{}/remote-consoles": {"remote_console": {"protocol": "vnc", "type": "novnc"}},
    "POST /servers/{}/shares": {"share": {"share_id": ABSENT}},
}

#: Quotas the runs would exhaust (each run makes server groups, keypairs; servers are seeded).
NOVA_QUOTAS = ("instances", "cores", "ram", "server_groups", "server_group_members", "key_pairs")

NOVA_MICROVERSIONS = {
    "/servers/{}/tags": "2.26",
    "/servers/{}/topology": "2.78",
    "/servers/{}/shares": "2.97",
    "/servers/{}/migrations": "2.24",
    "/servers/{}/remote-consoles": "2.6",
    "/os-console-auth-tokens": "2.31",
    "/os-aggregates/{}/images": "2.81",
    "/os-services": "2.53",  # services by uuid
    "PUT /flavors/{}": "2.55",
    "PUT /servers/{}/os-volume_attachments/{}": "2.85",
    "(trigger_crash_dump)": "2.17",
}

NOVA_QUERIES = {
    "DELETE /os-assisted-volume-snapshots/{}": "?delete_info=%7B%22volume_id%22%3A%22" + ABSENT + "%22%7D",
}

_NOVA_SEED = r"""
import json, sys, uuid, warnings
warnings.simplefilter("ignore")
from nova import config, context, objects
from nova.compute import power_state, vm_states
from nova.network import model
objects.register_all()
config.parse_args(["nova", "--config-file", sys.argv[1]])
want = json.loads(sys.stdin.read())
admin = context.get_admin_context()
cell = [c for c in objects.CellMappingList.get_all(admin) if c.name == "cell1"][0]
flavor = objects.Flavor.get_by_flavor_id(admin, want["flavor"])
out = {"hosts": [], "people": []}
with context.target_cell(admin, cell) as cctxt:
    for _ in range(want["hosts"]):
        host = "truth-" + uuid.uuid4().hex[:8]
        # forced down: nova treats the host the same however long the run takes (no heartbeat comes)
        service = objects.Service(cctxt, host=host, binary="nova-compute", topic="compute", report_count=0,
                                  forced_down=True)
        service.create()
        node = objects.ComputeNode(cctxt, host=host, hypervisor_hostname=host, service_id=service.id, vcpus=8,
            memory_mb=8192, local_gb=100, vcpus_used=0, memory_mb_used=0, local_gb_used=0, hypervisor_type="fake",
            hypervisor_version=1, cpu_info="{}", disk_available_least=100, free_ram_mb=8192, free_disk_gb=100,
            current_workload=0, running_vms=0, supported_hv_specs=[], host_ip="127.0.0.1",
            cpu_allocation_ratio=16.0, ram_allocation_ratio=1.5, disk_allocation_ratio=1.0, uuid=str(uuid.uuid4()))
        node.create()
        objects.HostMapping(admin, host=host, cell_mapping=cell).create()
        out["hosts"].append({"host": host, "service": service.uuid, "node": node.id})
    host, node_id = out["hosts"][0]["host"], out["hosts"][0]["node"]
    for person in want["people"]:
        owner = dict(project_id=person["project_id"], user_id=person["user_id"])
        user = context.RequestContext(person["user_id"], person["project_id"])
        servers = []
        for _ in range(person["servers"]):
            port = str(uuid.uuid4())
            vif = {"id": port, "address": "fa:16:3e:00:00:01", "network": {"id": str(uuid.uuid4()),
                   "label": "private", "subnets": [{"cidr": "10.0.0.0/24", "dns": [], "routes": [], "gateway": None,
                   "ips": [{"address": "10.0.0.5", "type": "fixed", "version": 4, "floating_ips": []}]}]}}
            name = "truth-" + uuid.uuid4().hex[:8]
            inst = objects.Instance(cctxt, display_name=name, hostname=name, vm_state=vm_states.ACTIVE,
                power_state=power_state.RUNNING, task_state=None, host=host, node=host, compute_id=node_id,
                launched_on=host, flavor=flavor, instance_type_id=flavor.id, memory_mb=flavor.memory_mb,
                vcpus=flavor.vcpus, root_gb=flavor.root_gb, ephemeral_gb=flavor.ephemeral_gb,
                image_ref=str(uuid.uuid4()), availability_zone="nova", metadata={"k1": "v1"}, system_metadata={},
                info_cache=objects.InstanceInfoCache(network_info=model.NetworkInfo.hydrate([vif])), locked=False,
                **owner)
            inst.create()
            objects.InstanceMapping(admin, instance_uuid=inst.uuid, cell_mapping=cell, queued_for_delete=False,
                                    **owner).create()
            with context.target_cell(user, cell) as ucell:
                action = objects.InstanceAction.action_start(ucell, inst.uuid, "create", want_result=True)
                objects.Tag(ucell, resource_id=inst.uuid, tag="t1").create()
            migration = objects.Migration(cctxt, instance_uuid=inst.uuid, migration_type="live-migration",
                status="running", source_compute=host, dest_compute=host, source_node=host, dest_node=host,
                dest_compute_id=node_id, old_instance_type_id=flavor.id, new_instance_type_id=flavor.id, **owner)
            migration.create()
            bdm = objects.BlockDeviceMapping(cctxt, instance_uuid=inst.uuid, volume_id=person["volumes"].pop(),
                source_type="volume", destination_type="volume", device_name="/dev/vdb", boot_index=None,
                delete_on_termination=False, attachment_id=str(uuid.uuid4()))
            bdm.create()
            if not servers:
                servers.append({"id": inst.uuid, "request_id": action.request_id, "migration_id": migration.id,
                                "volume_id": bdm.volume_id, "port_id": port, "share_id": None})
                continue
            share = objects.ShareMapping(cctxt, uuid=str(uuid.uuid4()), instance_uuid=inst.uuid,
                share_id=str(uuid.uuid4()), status="active", tag="truth", export_location="10.0.0.1:/truth",
                share_proto="NFS")
            share.create()
            servers.append({"id": inst.uuid, "request_id": action.request_id, "migration_id": migration.id,
                            "volume_id": bdm.volume_id, "port_id": port, "share_id": share.share_id})
        out["people"].append(servers)
print(json.dumps(out))
"""


def _nova_headers(cloud, person: str) -> dict:
    return {"X-Auth-Token": cloud.token(person), "Accept": "application/json"}


#: Values every nova world holds for each person, whatever the run.
_NOVA_LITERALS = {
    "absent": ABSENT,
    "spec_key": "k1",
    "metadata_key": "k1",
    "tag": "t1",
    "network_label": "private",
    "quota_class": "default",
    "extension": "os-keypairs",
    "timestamp": "2020-01-01%2000:00:00",
}


def nova_worlds(cloud, endpoint, needs, count: int) -> list[World]:
    """*count* runs' nova resources: flavors, aggregates, keypairs, server groups (through *endpoint*);
    compute hosts and servers (written by nova's own objects), and the cinder volumes nova's calls name."""
    _unlimited(cloud, endpoint, "/v2.1", _nova_headers(cloud, "admin"), NOVA_QUOTAS)
    makers = _nova_makers(cloud, endpoint)
    worlds = [World() for _ in range(count)]
    for world in worlds:
        _make_kinds(world, makers, needs)
        for person in PEOPLE:
            world.shared[person].update(_NOVA_LITERALS, project=cloud.people[person].project_id)
    _seed_nova_servers(cloud, worlds, needs)
    return worlds


def _nova_makers(cloud, endpoint) -> dict:
    """How each kind nova's API makes is made, by kind: ``make(person) -> id``."""

    def create(person: str, path: str, body: dict, key: str, field_name: str = "id"):
        resp = endpoint.request("POST", "/v2.1" + path, _nova_headers(cloud, person), body)
        return made(resp, path)[key][field_name]

    def flavor(person: str) -> str:
        flavor_id = create(
            "admin", "/flavors", {"flavor": {"name": _unique(), "ram": 64, "vcpus": 1, "disk": 1}}, "flavor"
        )
        create("admin", "/flavors/%s/os-extra_specs" % flavor_id, {"extra_specs": {"k1": "v1"}}, "extra_specs", "k1")
        return flavor_id

    return {
        "flavor": flavor,
        "aggregate": lambda person: create("admin", "/os-aggregates", {"aggregate": {"name": _unique()}}, "aggregate"),
        "keypair": lambda person: create(person, "/os-keypairs", {"keypair": {"name": _unique()}}, "keypair", "name"),
        "server_group": lambda person: create(
            person, "/os-server-groups", {"server_group": {"name": _unique(), "policies": ["affinity"]}}, "server_group"
        ),
    }


def _seed_nova_servers(cloud, worlds: list[World], needs) -> None:
    """Compute hosts, and each person's servers (with an attached cinder volume each), in every world."""
    users = user_ids(cloud)
    volumes = _seed_nova_volumes(cloud, worlds, needs, users)
    payload = {
        "flavor": worlds[0].shared["admin"]["flavor"],
        "hosts": 1 + len(worlds) * sum(needs[(p, "service")] for p in PEOPLE),
        "people": [
            {
                "project_id": cloud.people[p].project_id,
                "user_id": users[p],
                "servers": 1 + needs[(p, "server")],
                "volumes": attached,
            }
            for p, attached in zip(PEOPLE * len(worlds), volumes, strict=True)
        ],
    }
    seeded = run_script(cloud.venv, _NOVA_SEED, cloud.nova_databases() / "nova.conf", payload, cloud.env())
    first, spare_hosts = seeded["hosts"][0], seeded["hosts"][1:]
    servers = iter(seeded["people"])
    for world in worlds:
        for person in PEOPLE:
            mine = next(servers)
            world.shared[person].update(
                server=mine[0], service=first["service"], host=first["host"], node=first["node"]
            )
            world.pools[person]["server"] = mine[1:]
            world.pools[person]["service"] = [spare_hosts.pop()["service"] for _ in range(needs[(person, "service")])]


def _seed_nova_volumes(cloud, worlds: list[World], needs, users: dict) -> list[list]:
    """The cinder volumes and snapshots nova's calls name (cinder is in the catalog: nova asks it).

    Returns, for each world and person in turn, an attached volume for each of their servers' block
    device mapping.
    """
    people = [
        {
            "project_id": cloud.people[p].project_id,
            "user_id": users[p],
            "volume": 2 + needs[(p, "cinder_volume")],
            "snapshot": 1 + needs[(p, "cinder_snapshot")],
            "attached_volume": 1 + needs[(p, "server")],
        }
        for p in PEOPLE * len(worlds)
    ]
    payload = {"group_type": None, "volume_type": None, "absent": ABSENT, "unlimited": CINDER_QUOTAS, "people": people}
    seeded = iter(run_script(cloud.venv, _CINDER_SEED, cloud.cinder_database() / "cinder.conf", payload, cloud.env()))
    attached = []
    for world in worlds:
        for person in PEOPLE:
            found = next(seeded)
            shared, spare, *pool = found["volume"]
            world.shared[person].update(
                cinder_volume=shared, cinder_volume2=spare, cinder_snapshot=found["snapshot"][0]
            )
            world.pools[person].update(cinder_volume=pool, cinder_snapshot=found["snapshot"][1:])
            attached.append(found["attached_volume"])
    return attached


def nova_databases(cloud) -> list:
    """nova's API, cell0 and cell1 databases of *cloud*."""
    folder = cloud.nova_databases()
    return [folder / name for name in ("nova_api.db", "cell0.db", "cell1.db")]


NOVA = Plan(
    service="nova",
    member_layouts=("/v2.1", "/v2.1/{project}"),
    admin_layouts=("/v2.1", "/v2.1/{project}", "/v2/{project}", "/v2"),
    api_name="compute",
    default_microversion="2.1",
    microversions=NOVA_MICROVERSIONS,
    # the list's documented path; nova routes /os-hypervisors/detail (".../details" is a show of "details")
    corrections={"GET /os-hypervisors/details": "GET /os-hypervisors/detail"},
    placeholders=NOVA_PLACEHOLDERS,
    actions=NOVA_ACTIONS,
    bodies=NOVA_BODIES,
    queries=NOVA_QUERIES,
    # nova answers a call on a server in the wrong state 409 after its policy check: only deletes need their own.
    own_kinds={
        "server": "end",
        "flavor": "end",
        "aggregate": "end",
        "keypair": "end",
        "server_group": "end",
        "service": "end",
        "cinder_volume": "end",
        "cinder_snapshot": "end",
    },
    destructive_actions=frozenset({"forceDelete"}),
    # the shared server has no share (rebuild refuses a server with one): a share's show takes a server of its own
    own_labels=frozenset({"GET /servers/{}/shares/{}"}),
    kind_aliases={},
    make_worlds=nova_worlds,
    databases=nova_databases,
)

# --- cinder -------------------------------------------------------------------------------------

CINDER_PLACEHOLDERS = {
    # by placeholder name
    "project_id": "project",
    "project-id": "project",
    "encryption_id": "type.encryption_id",
    "g_snapshot_id": "group_snapshot",
    # by the segment before it
    "attachments": "attachment",
    "messages": "message",
    "clusters": "cluster",
    "snapshots": "snapshot",
    "backups": "backup",
    "groups": "group",
    "group_types": "group_type",
    "group_snapshots": "group_snapshot",
    "qos-specs": "qos",
    "types": "type",
    "volumes": "volume",
    "os-volume-transfer": "transfer",
    "volume-transfers": "transfer",
    "default-types": "project",
    "os-quota-sets": "project",
    "os-quota-class-sets": "quota_class",
    "capabilities": "host",
    "os-hosts": "host",
    "metadata": "metadata_key",
    "extra_specs": "spec_key",
    "group_specs": "spec_key",
    "encryption": "encryption_spec",
}

#: Documented paths no route serves, and the routes cinder serves for those calls.
CINDER_CORRECTIONS = {
    "PUT /types": "PUT /types/{type_id}",
    "DELETE /types": "DELETE /types/{type_id}",
    "PUT /volumes": "PUT /volumes/{volume_id}",
    "GET /volume_transfers": "GET /volume-transfers",
    "POST /volume_transfers": "POST /volume-transfers",
    "POST /backups/{}/import_record": "POST /backups/import_record",
    "POST /backups/{}/export_record": "GET /backups/{backup_id}/export_record",
    "PUT /os-services/{}": "PUT /os-services/enable",
    "PUT /clusters/{}": "PUT /clusters/enable",
    "PUT /default-types": "PUT /default-types/{project-id}",
    "GET /os-quota-sets/{}/default": "GET /os-quota-sets/{project_id}/defaults",
    "POST /snapshots/{}/action (update_snapshot_status)": "POST /snapshots/{snapshot_id}/action "
    "(os-update_snapshot_status)",
}

CINDER_ACTIONS = {
    "os-complete": {},
    "os-reset_status": {"status": "available"},
    "reset_status": {"status": "available"},
    "os-update_snapshot_status": {"status": "error"},
    "os-force_delete": {},
    "os-unmanage": {},
    "delete": {"delete-volumes": False},
    "enable_replication": {},
    "disable_replication": {},
    "failover_replication": {},
    "list_replication_targets": {},
    "addProjectAccess": {"project": "{project}"},
    "removeProjectAccess": {"project": "{project}"},
    "os-extend": {"new_size": 2},
    "os-extend_volume_completion": {"error": False},
    "revert": {"snapshot_id": "{volume.snapshot_id}"},
    "os-retype": {"new_type": "{type}"},
    "os-update_readonly_flag": {"readonly": False},
    "os-volume_upload_image": {"image_name": "truth"},
    "os-force_detach": {},
    "os-migrate_volume": {"host": "truth-host@truth#truth"},
    "os-migrate_volume_completion": {"new_volume": ABSENT},
    "os-initialize_connection": {"connector": {"initiator": "iqn.truth"}},
    "os-terminate_connection": {"connector": {"initiator": "iqn.truth"}},
    "os-roll_detaching": {},
    "os-reserve": {},
    "os-unreserve": {},
    "os-begin_detaching": {},
    "os-attach": {"instance_uuid": ABSENT, "mountpoint": "/dev/vdb"},
    "os-detach": {},
    "os-reimage": {"image_id": ABSENT},
    "os-show_image_metadata": {},
    "os-set_image_metadata": {"metadata": {"k2": "v2"}},
    "os-unset_image_metadata": {"key": "k2"},
    "os-set_bootable": {"bootable": False},
}

_HOST = {"host": "truth-host"}
CINDER_BODIES = {
    "POST /attachments": {"attachment": {"volume_uuid": "{volume2}", "instance_uuid": ABSENT}},
    "PUT /attachments/{}": {"attachment": {"connector": {"initiator": "iqn.truth", "host": "truth"}}},
    "PUT /clusters/enable": {"name": "truth", "binary": "cinder-volume"},
    "POST /snapshots": {"snapshot": {"volume_id": "{volume}"}},
    "PUT /snapshots/{}": {"snapshot": {"name": "changed"}},
    "POST /snapshots/{}/metadata": {"metadata": {"k2": "v2"}},
    "PUT /snapshots/{}/metadata/{}": {"meta": {"k1": "v2"}},
    "POST /manageable_snapshots": {"snapshot": {"volume_id": "{volume}", "ref": {"source-name": "truth"}}},
    "POST /backups": {"backup": {"volume_id": "{volume}"}},
    "PUT /backups/{}": {"backup": {"name": "changed"}},
    # onto a volume: without one, cinder makes a volume and waits for it to be available (forever, here)
    "POST /backups/{}/restore": {"restore": {"volume_id": "{volume5}"}},
    "POST /backups/import_record": {
        "backup-record": {"backup_service": "cinder.backup.drivers.nfs", "backup_url": "e30="}
    },
    "POST /groups": {"group": {"group_type": "{group_type}", "volume_types": ["{type}"]}},
    "PUT /groups/{}": {"group": {"name": "changed"}},
    "POST /group_types": {"group_type": {"name": "{unique}"}},
    "PUT /group_types/{}": {"group_type": {"description": "changed"}},
    "POST /group_types/{}/group_specs": {"group_specs": {"k2": "v2"}},
    "PUT /group_types/{}/group_specs/{}": {"k1": "v2"},
    "POST /group_snapshots": {"group_snapshot": {"group_id": "{group}"}},
    "PUT /group_snapshots/{}": {"group_snapshot": {"name": "changed"}},
    "POST /qos-specs": {"qos_specs": {"name": "{unique}", "read_iops_sec": "100"}},
    "PUT /qos-specs/{}": {"qos_specs": {"read_iops_sec": "200"}},
    "PUT /qos-specs/{}/delete_keys": {"keys": ["read_iops_sec"]},
    "PUT /os-quota-class-sets/{}": {"quota_class_set": {"volumes": 10}},
    "PUT /os-quota-sets/{}": {"quota_set": {"volumes": 10}},
    "PUT /os-services/enable": {"host": "truth-host", "binary": "cinder-volume"},
    "PUT /os-services/freeze": _HOST,
    "PUT /os-services/thaw": _HOST,
    "PUT /os-services/failover_host": _HOST,
    "PUT /os-hosts/{}": {"status": "enable"},
    "POST /manageable_volumes": {"volume": {"host": "truth-host@truth#truth", "ref": {"source-name": "truth"}}},
    "POST /types": {"volume_type": {"name": "{unique}"}},
    "PUT /types/{}": {"volume_type": {"description": "changed"}},
    "POST /types/{}/encryption": {"encryption": {"provider": "luks", "control_location": "front-end"}},
    "PUT /types/{}/encryption/{}": {"encryption": {"control_location": "back-end"}},
    "POST /types/{}/extra_specs": {"extra_specs": {"k2": "v2"}},
    "PUT /types/{}/extra_specs/{}": {"k1": "v2"},
    "POST /volumes": {"volume": {"size": 1}},
    "PUT /volumes/{}": {"volume": {"name": "changed"}},
    "POST /volumes/{}/metadata": {"metadata": {"k2": "v2"}},
    "PUT /volumes/{}/metadata": {"metadata": {"k1": "v2"}},
    "PUT /volumes/{}/metadata/{}": {"meta": {"k1": "v2"}},
    "POST /volume-transfers": {"transfer": {"volume_id": "{volume3}"}},
    "POST /os-volume-transfer": {"transfer": {"volume_id": "{volume4}"}},
    "POST /volume-transfers/{}/accept": {"accept": {"auth_key": "{transfer.auth_key}"}},
    "POST /os-volume-transfer/{}/accept": {"accept": {"auth_key": "{transfer.auth_key}"}},
    "PUT /default-types/{}": {"default_type": {"volume_type": "{type}"}},
}

CINDER_QUOTAS = ("volumes", "snapshots", "gigabytes", "backups", "backup_gigabytes", "groups")

_ON_HOST = "?host=truth-host@truth"
CINDER_QUERIES = {
    "GET /qos-specs/{}/associate": "?vol_type_id={type}",
    "GET /qos-specs/{}/disassociate": "?vol_type_id={type}",
    "GET /manageable_volumes": _ON_HOST,
    "GET /manageable_volumes/detail": _ON_HOST,
    "GET /manageable_snapshots": _ON_HOST,
    "GET /manageable_snapshots/detail": _ON_HOST,
    "GET /clusters/{}": "?binary=cinder-volume",
}

_CINDER_SEED = r"""
import datetime, json, sys, warnings
warnings.simplefilter("ignore")
from oslo_config import cfg
from cinder.common import config  # noqa: F401
from cinder import context, exception, objects
from cinder.db import api as db
from cinder.message import api as message_api, message_field
from cinder.volume import volume_types
objects.register_all()
cfg.CONF(["--config-file", sys.argv[1]], project="cinder")
want = json.loads(sys.stdin.read())
HOST = "truth-host@truth#truth"
admin = context.get_admin_context()
default_type = volume_types.get_default_volume_type(admin)["id"]
# a volume and a backup service that cinder takes for up all along (their heartbeat is in the future)
for host, binary in (("truth-host@truth", "cinder-volume"), ("truth-host", "cinder-backup")):
    if not objects.ServiceList.get_all(admin, {"host": host, "binary": binary}):
        objects.Service(admin, host=host, binary=binary, topic=binary, availability_zone="nova", report_count=1,
                        updated_at=datetime.datetime(2100, 1, 1)).create()
out = []
for person in want["people"]:
    ctx = context.RequestContext(person["user_id"], person["project_id"])
    owner = dict(user_id=person["user_id"], project_id=person["project_id"])
    # no quota: a refusal for a quota is no policy's (and nova's calls make volumes too)
    for resource in want["unlimited"]:
        try:
            db.quota_update(admin, person["project_id"], resource, -1)
        except exception.ProjectQuotaNotFound:
            db.quota_create(admin, person["project_id"], resource, -1)
    made = {}
    def volume(**extra):
        found = objects.Volume(ctx, size=1, status="available", attach_status="detached", display_name="truth",
            availability_zone="nova", host=HOST, volume_type_id=default_type, metadata={"k1": "v1"}, **owner)
        found.update(extra)
        found.create()
        db.volume_glance_metadata_create(ctx, found.id, "k2", "v2")
        return found
    def snapshot(volume_id, status="available"):
        found = objects.Snapshot(ctx, volume_id=volume_id, status=status, volume_size=1, progress="100%",
            display_name="truth", volume_type_id=default_type, metadata={"k1": "v1"}, **owner)
        found.create()
        return found.id
    made["volume"] = [volume().id for _ in range(person["volume"])]
    first = made["volume"][0]
    made["snapshot"] = [snapshot(first) for _ in range(person.get("snapshot", 0))]
    made["creating_snapshot"] = [snapshot(first, "creating") for _ in range(person.get("creating_snapshot", 0))]
    made["snapshotted_volume"] = []
    for _ in range(person.get("snapshotted_volume", 0)):
        found = volume()
        made["snapshotted_volume"].append({"id": found.id, "snapshot_id": snapshot(found.id)})
    made["attached_volume"] = []
    for _ in range(person.get("attached_volume", 0)):
        found = volume(status="in-use", attach_status="attached")
        objects.VolumeAttachment(ctx, volume_id=found.id, instance_uuid=want["absent"], attach_status="attached",
                                 mountpoint="/dev/vdb", attach_mode="rw").create()
        made["attached_volume"].append(found.id)
    def backup():
        found = objects.Backup(ctx, volume_id=first, status="available", size=1, display_name="truth",
            availability_zone="nova", host="truth-host", container="truth", service="cinder.backup.drivers.nfs",
            **owner)
        found.create()
        return found.id
    made["backup"] = [backup() for _ in range(person.get("backup", 0))]
    def group():
        found = objects.Group(ctx, group_type_id=want["group_type"], volume_type_ids=[want["volume_type"]],
            status="available", replication_status="enabled", name="truth", availability_zone="nova", host=HOST,
            **owner)
        found.create()
        return found.id
    made["group"] = [group() for _ in range(person.get("group", 0))]
    if made["group"]:  # a group snapshot needs a group with a volume in it
        volume(group_id=made["group"][0], volume_type_id=want["volume_type"])
    def group_snapshot():
        found = objects.GroupSnapshot(ctx, group_id=made["group"][0], group_type_id=want["group_type"],
            status="available", name="truth", **owner)
        found.create()
        return found.id
    made["group_snapshot"] = [group_snapshot() for _ in range(person.get("group_snapshot", 0))]
    before = {m["id"] for m in message_api.API().get_all(ctx)}
    for _ in range(person.get("message", 0)):
        message_api.API().create(ctx, message_field.Action.SCHEDULE_ALLOCATE_VOLUME, resource_uuid=first)
    made["message"] = [m["id"] for m in message_api.API().get_all(ctx) if m["id"] not in before]
    out.append(made)
print(json.dumps(out))
"""

#: Extra shared volumes, for the creates that take a volume in their body and change its status.
_SPARE_VOLUMES = ("volume2", "volume3", "volume4", "volume5")
_SEEDED = (
    "volume",
    "snapshot",
    "backup",
    "group",
    "group_snapshot",
    "message",
    "snapshotted_volume",
    "attached_volume",
    "creating_snapshot",
)
#: What cinder reads as replication enabled, on a volume type and on a group type.
_REPLICATED = {"replication_enabled": "<is> True"}
_GROUP_REPLICATED = {"group_replication_enabled": "<is> True"}


def _cinder_headers(cloud, person: str) -> dict:
    return {"X-Auth-Token": cloud.token(person), "Accept": "application/json", "OpenStack-API-Version": "volume 3.71"}


#: Values every cinder world holds for each person, whatever the run.
_CINDER_LITERALS = {
    "absent": ABSENT,
    "quota_class": "default",
    "host": "truth-host",
    "cluster": "truth",
    "metadata_key": "k1",
    "spec_key": "k1",
    "encryption_spec": "cipher",
}


def cinder_worlds(cloud, endpoint, needs, count: int) -> list[World]:
    """*count* runs' cinder resources: types, qos specs, group types, attachments, transfers (through
    *endpoint*); volumes, snapshots, backups, groups and messages (written by cinder's own objects)."""

    def create(person: str, path: str, body: dict) -> dict:
        resp = endpoint.request("POST", "/v3" + path, _cinder_headers(cloud, person), body)
        return made(resp, path)

    worlds = [World() for _ in range(count)]
    for world in worlds:
        _make_kinds(world, _cinder_makers(create), needs)
    _seed_cinder(cloud, worlds, needs)
    for world in worlds:
        for person in PEOPLE:
            world.shared[person].update(_CINDER_LITERALS, project=cloud.people[person].project_id)
            for kind, make in (("attachment", _attachment), ("transfer", _transfer)):
                volumes = world.pools[person].pop("volume-for-" + kind)
                world.shared[person][kind] = make(create, person, volumes.pop())
                world.pools[person][kind] = [make(create, person, v) for v in volumes]
    return worlds


def _cinder_makers(create) -> dict:
    """How each kind cinder's API makes is made, by kind: ``make(person) -> id``; *create* POSTs as a person."""

    def volume_type(person: str) -> dict:
        specs = {"k1": "v1", **_REPLICATED}
        type_id = create("admin", "/types", {"volume_type": {"name": _unique(), "extra_specs": specs}})
        type_id = type_id["volume_type"]["id"]
        encryption = {"encryption": {"provider": "luks", "control_location": "front-end", "cipher": "aes"}}
        made_encryption = create("admin", "/types/%s/encryption" % type_id, encryption)["encryption"]
        return {"id": type_id, "encryption_id": made_encryption["encryption_id"]}

    def qos(person: str) -> str:
        body = {"qos_specs": {"name": _unique(), "read_iops_sec": "100"}}
        return create("admin", "/qos-specs", body)["qos_specs"]["id"]

    def group_type(person: str) -> str:
        body = {"group_type": {"name": _unique(), "group_specs": {"k1": "v1", **_GROUP_REPLICATED}}}
        return create("admin", "/group_types", body)["group_type"]["id"]

    return {"type": volume_type, "qos": qos, "group_type": group_type}


def _attachment(create, person: str, volume: str) -> str:
    body = {"attachment": {"volume_uuid": volume, "instance_uuid": ABSENT}}
    return create(person, "/attachments", body)["attachment"]["id"]


def _transfer(create, person: str, volume: str) -> dict:
    transfer = create(person, "/volume-transfers", {"transfer": {"volume_id": volume}})["transfer"]
    return {"id": transfer["id"], "auth_key": transfer["auth_key"]}


def _seed_cinder(cloud, worlds: list[World], needs) -> None:
    """Volumes (with a pool for each attachment and transfer), snapshots, backups, groups, messages."""
    users = user_ids(cloud)
    people = []
    for person in PEOPLE * len(worlds):
        counts = {kind: 1 + needs[(person, kind)] for kind in _SEEDED}
        counts["volume"] += len(_SPARE_VOLUMES) + sum(1 + needs[(person, k)] for k in ("attachment", "transfer"))
        people.append(dict(counts, project_id=cloud.people[person].project_id, user_id=users[person]))
    first = worlds[0].shared["admin"]
    payload = {
        "group_type": first["group_type"],
        "volume_type": first["type"]["id"],
        "absent": ABSENT,
        "unlimited": CINDER_QUOTAS,
        "people": people,
    }
    seeded = iter(run_script(cloud.venv, _CINDER_SEED, cloud.cinder_database() / "cinder.conf", payload, cloud.env()))
    for world in worlds:
        for person in PEOPLE:
            found = next(seeded)
            for kind in _SEEDED:
                world.shared[person][kind] = found[kind][0]
                world.pools[person][kind] = found[kind][1:]
            # volumes: the shared one, its pool, then the spares, then one per attachment and transfer
            volumes = world.pools[person]["volume"]
            world.pools[person]["volume"] = volumes[: needs[(person, "volume")]]
            rest = volumes[needs[(person, "volume")] :]
            for name in _SPARE_VOLUMES:
                world.shared[person][name] = rest.pop()
            for kind in ("attachment", "transfer"):
                world.pools[person]["volume-for-" + kind] = [rest.pop() for _ in range(1 + needs[(person, kind)])]


def cinder_databases(cloud) -> list:
    """cinder's database of *cloud*."""
    return [cloud.cinder_database() / "cinder.db"]


CINDER = Plan(
    service="cinder",
    member_layouts=("/v3/{project}", "/v3"),
    admin_layouts=("/v3/{project}", "/v3"),
    api_name="volume",
    default_microversion="3.71",  # the highest; from 3.67 every route is served without the project id too
    microversions={},
    corrections=CINDER_CORRECTIONS,
    placeholders=CINDER_PLACEHOLDERS,
    actions=CINDER_ACTIONS,
    bodies=CINDER_BODIES,
    queries=CINDER_QUERIES,
    # cinder answers a call on a volume in the wrong status 400: every change gets a fresh one.
    own_kinds={
        "volume": "change",
        "snapshot": "change",
        "backup": "change",
        "group": "change",
        "group_snapshot": "change",
        "attachment": "change",
        "transfer": "change",
        "type": "end",
        "qos": "end",
        "group_type": "end",
        "message": "end",
    },
    destructive_actions=frozenset({"os-force_delete", "delete", "os-unmanage"}),
    own_labels=frozenset(
        {"GET /qos-specs/{}/associate", "GET /qos-specs/{}/disassociate", "GET /qos-specs/{}/disassociate_all"}
    ),
    # a revert needs the volume's latest snapshot; a detach, a volume in use
    # (and a snapshot's status is only updated while it is being made)
    kind_aliases={
        "POST /volumes/{}/action (revert)": {"volume": "snapshotted_volume"},
        "POST /volumes/{}/action (os-begin_detaching)": {"volume": "attached_volume"},
        "POST /snapshots/{}/action (os-update_snapshot_status)": {"snapshot": "creating_snapshot"},
    },
    make_worlds=cinder_worlds,
    databases=cinder_databases,
)

PLANS = {"nova": NOVA, "cinder": CINDER}


# --- shared -------------------------------------------------------------------------------------


def _unlimited(cloud, endpoint, prefix: str, headers: dict, quotas: tuple[str, ...]) -> None:
    """No quota on *quotas* for the member's and the admin's projects: a refusal for a quota is no policy's."""
    for person in PEOPLE:
        body = {"quota_set": dict.fromkeys(quotas, -1)}
        made(
            endpoint.request("PUT", "%s/os-quota-sets/%s" % (prefix, cloud.people[person].project_id), headers, body),
            "unlimited quotas",
        )


def _unique() -> str:
    return "truth-" + uuid.uuid4().hex[:10]


def _make_kinds(world: World, makers: dict, needs) -> None:
    """A shared instance of each kind for each person, and the fresh ones *needs* asks for."""
    for person in PEOPLE:
        for kind, make in makers.items():
            world.shared[person][kind] = make(person)
            world.pools[person][kind] = [make(person) for _ in range(needs[(person, kind)])]
