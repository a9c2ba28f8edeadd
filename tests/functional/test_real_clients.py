"""Unmodified OpenStack clients drive the demo's two real pipelines under gunicorn (2 workers each).

openstacksdk and python-novaclient are the releases pinned in constraints.txt,
used as their users use them, without Keystone: openstacksdk with
``auth_type='none'`` and ``compute_endpoint_override``; python-novaclient's
Python API with a keystoneauth ``noauth`` session and ``endpoint_override``,
and its ``nova`` command line with ``--os-auth-type none`` and
``--os-endpoint-override``.  Where a client has no call for a feature, the
test says so and uses another client's call or plain HTTP.

Both endpoints are examples/api-paste.ini's pipelines, ``main`` (public) and
``admin``, on one SQLite database and one tenant registry.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import uuid

import openstack
import pytest
from keystoneauth1 import noauth, session
from novaclient import client as novaclient_client

from tests.support.demo import serve_demo

# openstacksdk 4.22 warns about its own internals on every connect and call
# (InfluxDB support, its service_type parameter, _compute_attributes): these
# are the SDK calling its own deprecated code, not this suite or the demo.
pytestmark = pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")

#: What the demo advertises and every client must negotiate, on both endpoints.
MAX_MICROVERSION = (2, 53)
HEADERS_JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """``{"public": server, "admin": server}``: the demo's two pipelines, as ``make demo`` serves them."""
    with serve_demo(tmp_path_factory.mktemp("real-clients")) as servers:
        yield servers


def new_tenant(endpoints) -> str:
    """A tenant of its own for a test, created as an operator does: PUT on the admin endpoint."""
    tenant = "t" + uuid.uuid4().hex[:12]
    response = endpoints["admin"].request("PUT", "/v2.1/" + tenant, HEADERS_JSON, b"{}")
    assert response.status == 201, response.body
    return tenant


def sdk(server, tenant: str):
    """openstacksdk as its documentation shows it without Keystone: no clouds.yaml, no OS_* variables."""
    return openstack.connect(
        auth_type="none",
        compute_endpoint_override="%s/v2.1/%s" % (server.url, tenant),
        load_yaml_config=False,
        load_envvars=False,
    )


def nova(server, tenant: str, version: str = "2.53"):
    """python-novaclient's Python API on a keystoneauth session without authentication."""
    return novaclient_client.Client(
        version, session=session.Session(auth=noauth.NoAuth()), endpoint_override="%s/v2.1/%s" % (server.url, tenant)
    )


# Discovery ----------------------------------------------------------------


@pytest.mark.parametrize("role", ["public", "admin"])
def test_sdk_discovers_and_negotiates_2_53_on_both_endpoints(endpoints, role, caplog):
    tenant = new_tenant(endpoints)
    conn = sdk(endpoints[role], tenant)
    with caplog.at_level(logging.DEBUG, logger="keystoneauth.session"):
        data = conn.compute.get_endpoint_data()
    assert (data.min_microversion, data.max_microversion) == ((2, 1), MAX_MICROVERSION)
    assert data.service_url == "%s/v2.1/%s" % (endpoints[role].url, tenant)
    # keystoneauth takes the segment after a version segment for a project id
    # and asks the version's own document, /v2.1: it never reads
    # /v2.1/{project_id}, the tenant resource on the admin endpoint.
    asked = [
        m.group(1) for m in (re.search(r"REQ: curl -g -i -X GET (\S+)", r.getMessage()) for r in caplog.records) if m
    ]
    assert asked == [endpoints[role].url + "/v2.1"]
    # The negotiated version is what the SDK then sends: ids are uuids from 2.53.
    assert all(len(service.id) == 36 for service in conn.compute.services())


@pytest.mark.parametrize("role", ["public", "admin"])
def test_novaclient_discovers_2_53_at_the_url_it_is_given(endpoints, role):
    """novaclient's ``versions.get_current()`` (every ``nova`` command runs it first) GETs the endpoint it
    is given, ``/v2.1/{project_id}``: the public endpoint's app shows its version document there, as
    nova does; on the admin endpoint that URL is the tenant, whose GET carries the same document under
    ``version`` (tenant_admin's ``version_discovery``), beside the tenant's own representation.
    """
    tenant = new_tenant(endpoints)
    current = nova(endpoints[role], tenant, "2.0").versions.get_current()
    assert (current.min_version, current.version) == ("2.1", "%d.%d" % MAX_MICROVERSION)
    assert current.id == "v2.1"
    if role == "admin":
        # Still the tenant: an operator reading it sees the representation PUT.
        shown = endpoints["admin"].request("GET", "/v2.1/" + tenant).json()
        assert set(shown) == {"version"}  # new_tenant PUT {}
        assert endpoints["admin"].request("HEAD", "/v2.1/" + tenant).status == 204


# Servers and tags through openstacksdk ------------------------------------


def names(servers) -> set[str]:
    return {server.name for server in servers}


def test_sdk_servers_with_tags_and_every_tag_filter(endpoints):
    conn = sdk(endpoints["public"], new_tenant(endpoints))
    created = {
        "both": conn.compute.create_server(name="both", tags=["red", "blue"]),
        "red": conn.compute.create_server(name="red", tags=["red"]),
        "green": conn.compute.create_server(name="green", tags=["green"]),
        "bare": conn.compute.create_server(name="bare"),
    }
    for name, server in created.items():
        assert conn.compute.get_server(server.id).name == name
    assert sorted(conn.compute.get_server(created["both"].id).tags) == ["blue", "red"]

    def listed(**query) -> set[str]:
        return names(conn.compute.servers(details=False, **query))

    assert listed() == {"both", "red", "green", "bare"}
    assert listed(tags="red,blue") == {"both"}
    assert listed(any_tags="red,green") == {"both", "red", "green"}
    # The guideline's not- filters (the demo's not_tags_semantics = guideline):
    # not-tags=red,blue has neither; not-tags-any=red,blue lacks at least one.
    # openstacksdk documents nova's reading, the other way round; it only
    # passes the parameters through, so the server's reading is what counts.
    assert listed(not_tags="red,blue") == {"green", "bare"}
    assert listed(not_any_tags="red,blue") == {"red", "green", "bare"}
    # openstacksdk sends a list as the parameter repeated; the filter merges it.
    assert listed(tags=["red", "blue"]) == {"both"}


def test_sdk_adds_removes_and_reads_tags(endpoints):
    conn = sdk(endpoints["public"], new_tenant(endpoints))
    server = conn.compute.create_server(name="web", tags=["a"])
    conn.compute.add_tag_to_server(server, "b")
    assert sorted(conn.compute.get_server(server.id).fetch_tags(conn.compute).tags) == ["a", "b"]
    conn.compute.remove_tag_from_server(server, "a")
    assert conn.compute.get_server(server.id).fetch_tags(conn.compute).tags == ["b"]
    server.set_tags(conn.compute, ["x", "y"])
    assert sorted(conn.compute.get_server(server.id).tags) == ["x", "y"]
    conn.compute.remove_tags_from_server(server)
    assert conn.compute.get_server(server.id).tags == []
    with pytest.raises(openstack.exceptions.NotFoundException):
        conn.compute.remove_tag_from_server(server, "never-there")


def test_sdk_bad_tag_on_create_is_400_and_creates_nothing(endpoints):
    conn = sdk(endpoints["public"], new_tenant(endpoints))
    with pytest.raises(openstack.exceptions.BadRequestException) as refused:
        conn.compute.create_server(name="web", tags=["a/b"])
    error = refused.value.response.json()["errors"][0]
    assert error["code"] == "demo.invalid-tags"
    assert error["detail"] == "Tag 'a/b' at server.tags[0] contains '/', which no tag may contain."
    assert list(conn.compute.servers(details=False)) == []


def test_tags_on_create_from_2_52_only(endpoints):
    """Plain HTTP: tags in a create are nova's 2.52; below it the key is ignored, as any the demo does not know."""
    public, tenant = endpoints["public"], new_tenant(endpoints)
    body = json.dumps({"server": {"name": "old", "tags": ["red"]}}).encode()
    for version, expected in (("2.51", []), ("2.52", ["red"])):
        headers = dict(HEADERS_JSON, **{"OpenStack-API-Version": "compute " + version})
        created = public.request("POST", "/v2.1/%s/servers" % tenant, headers, body)
        assert created.status == 201, created.body
        server_id = created.json()["server"]["id"]
        shown = public.request(
            "GET", "/v2.1/%s/servers/%s" % (tenant, server_id), {"OpenStack-API-Version": "compute 2.53"}
        )
        assert shown.json()["server"]["tags"] == expected, version


def test_sdk_retry_with_the_same_client_token_gets_the_same_server(endpoints):
    # openstacksdk's create_server has no client-token argument: the retry
    # goes through the SDK's own session (its compute proxy, a keystoneauth
    # adapter at the negotiated microversion) with the header added.
    conn = sdk(endpoints["public"], new_tenant(endpoints))
    token = "retry-" + uuid.uuid4().hex
    answers = [
        conn.compute.post("/servers", json={"server": {"name": "once"}}, headers={"X-Client-Token": token})
        for _ in range(4)
    ]
    assert [answer.status_code for answer in answers] == [201] * 4
    assert len({answer.json()["server"]["id"] for answer in answers}) == 1
    assert [answer.headers.get("Idempotent-Replayed") for answer in answers[1:]] == ["true"] * 3
    assert names(conn.compute.servers(details=False)) == {"once"}


def test_sdk_services_and_hypervisors_at_2_53(endpoints):
    tenant = new_tenant(endpoints)
    conn, public = sdk(endpoints["admin"], tenant), sdk(endpoints["public"], tenant)
    services = list(conn.compute.services())
    assert services
    assert all(len(service.id) == 36 for service in services)  # uuids at 2.53
    victim = next(service for service in services if service.binary == "nova-compute")
    # nova's admin calls are culled on the public endpoint (tenancy_mw_demo.conf's [admin_cull]).
    with pytest.raises(openstack.exceptions.NotFoundException):
        public.compute.delete_service(victim, ignore_missing=False)
    with pytest.raises(openstack.exceptions.NotFoundException):
        list(public.compute.hypervisors())
    assert victim.id in {service.id for service in public.compute.services()}
    conn.compute.delete_service(victim)
    assert victim.id not in {service.id for service in conn.compute.services()}

    hypervisors = list(conn.compute.hypervisors())
    assert hypervisors
    assert all(len(hypervisor.id) == 36 for hypervisor in hypervisors)
    one = conn.compute.get_hypervisor(hypervisors[0].id)
    assert (one.id, one.name) == (hypervisors[0].id, hypervisors[0].name)
    # nova's 2.53 parameter, as the SDK sends it (?hypervisor_hostname_pattern=).
    pattern = one.name[1:-1]
    found = list(conn.compute.hypervisors(hypervisor_hostname_pattern=pattern))
    assert {h.name for h in found} == {h.name for h in hypervisors if pattern in h.name}
    assert one.name in {h.name for h in found}


# The same through python-novaclient ----------------------------------------


NOVA = os.path.join(os.path.dirname(sys.executable), "nova")


def nova_command(server, tenant: str, *arguments: str, version: str = "2.53") -> subprocess.CompletedProcess:
    """The ``nova`` command line without Keystone: ``--os-auth-type none`` and ``--os-endpoint-override``.

    Before any request it insists on a user, a project and an auth URL (its
    own checks: the ``none`` plugin never sends or contacts them), so they
    are given in its environment variables; nothing else of the caller's
    ``OS_*`` environment is passed.
    """
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OS_")}
    environment.update(OS_USERNAME="demo", OS_PROJECT_ID=tenant, OS_AUTH_URL="http://127.0.0.1:9/not-used")
    url = "%s/v2.1/%s" % (server.url, tenant)
    command = [NOVA, "--os-auth-type", "none", "--os-endpoint-override", url, "--os-compute-api-version", version]
    return subprocess.run(
        command + list(arguments), capture_output=True, text=True, env=environment, check=False, timeout=120
    )


def nova_table(server, tenant: str, *arguments: str, version: str = "2.53") -> list[dict[str, str]]:
    """Run a ``nova`` command that prints a table; its rows as ``{column: cell}``."""
    done = nova_command(server, tenant, *arguments, version=version)
    assert done.returncode == 0, (arguments, done.stdout, done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[1:]]


@pytest.mark.parametrize("role", ["public", "admin"])
def test_nova_command_line_negotiates_the_latest_version_on_both_endpoints(endpoints, role):
    tenant = new_tenant(endpoints)
    done = nova_command(endpoints[role], tenant, "--debug", "list", version="2.latest")
    assert done.returncode == 0, done.stderr
    url = "%s/v2.1/%s" % (endpoints[role].url, tenant)
    # Its first request is the endpoint itself (discovery), then the list at the version found there.
    requests = re.findall(r"REQ: curl -g -i -X (\w+) (\S+)", done.stderr)
    assert requests[0] == ("GET", url)
    assert ("GET", url + "/servers/detail") in requests
    assert "X-OpenStack-Nova-API-Version: 2.53" in done.stderr
    assert "OpenStack-API-Version: compute 2.53" in done.stderr


def test_nova_command_line_servers_and_tags(endpoints):
    """``nova list`` with each tag filter, ``show``, the ``server-tag-*`` commands and ``delete``.

    ``nova boot`` cannot run against the demo: before its POST it looks up
    the flavor (``GET /flavors/{id}``) and an image in Glance or a volume,
    and the demo has no flavors, images or volumes.  The servers are made
    with novaclient's own Python API instead, which sends the POST ``boot``
    would (tags included, from 2.52).
    """
    public, tenant = endpoints["public"], new_tenant(endpoints)
    client = nova(public, tenant)
    ids = {
        name: client.servers.create(name, image=None, flavor="any", nics="none", tags=tags).id
        for name, tags in (("both", ["red", "blue"]), ("red", ["red"]), ("green", ["green"]), ("bare", None))
    }

    def listed(*filters: str) -> set[str]:
        return {row["Name"] for row in nova_table(public, tenant, "list", *filters)}

    assert listed() == {"both", "red", "green", "bare"}
    assert listed("--tags", "red,blue") == {"both"}
    assert listed("--tags-any", "red,green") == {"both", "red", "green"}
    # The demo's not_tags_semantics = guideline: not-tags=red,blue has
    # neither, not-tags-any=red,blue lacks at least one.  (novaclient's help
    # describes nova's reading; it passes the parameters through unchanged.)
    assert listed("--not-tags", "red,blue") == {"green", "bare"}
    assert listed("--not-tags-any", "red,blue") == {"red", "green", "bare"}
    # Its rows are nova's: a status, and the tags when asked for (printed as a Python list).
    rows = {row["Name"]: row for row in nova_table(public, tenant, "list", "--fields", "name,status,tags")}
    assert rows["both"]["Status"] == "ACTIVE"
    assert sorted(ast.literal_eval(rows["both"]["Tags"])) == ["blue", "red"]

    # The tag commands, by name (nova looks the name up in the list) and by id.
    added = nova_command(public, tenant, "server-tag-add", "red", "extra", "more")
    assert added.returncode == 0, added.stderr
    assert {row["Tag"] for row in nova_table(public, tenant, "server-tag-list", ids["red"])} == {"red", "extra", "more"}
    assert nova_command(public, tenant, "server-tag-delete", "red", "more").returncode == 0
    assert {row["Tag"] for row in nova_table(public, tenant, "server-tag-list", "red")} == {"red", "extra"}
    assert nova_command(public, tenant, "server-tag-set", "red", "p", "q").returncode == 0
    shown = {row["Property"]: row["Value"] for row in nova_table(public, tenant, "show", "red")}
    assert shown["id"] == ids["red"]
    assert sorted(ast.literal_eval(shown["tags"])) == ["p", "q"]
    assert nova_command(public, tenant, "server-tag-delete-all", ids["red"]).returncode == 0
    assert nova_table(public, tenant, "server-tag-list", ids["red"]) == []

    deleted = nova_command(public, tenant, "delete", "green")
    assert deleted.returncode == 0, deleted.stderr
    assert "Request to delete server green has been accepted." in deleted.stdout
    assert listed() == {"both", "red", "bare"}
    # No X-Client-Token option on the nova command line: the retry is in
    # test_novaclient_servers_tags_and_client_token (novaclient's session).


def test_nova_command_line_services_and_hypervisors_at_2_53(endpoints):
    # nova's admin calls go to the admin endpoint; the public one culls them.
    public, admin, tenant = endpoints["public"], endpoints["admin"], new_tenant(endpoints)
    services = nova_table(public, tenant, "service-list")
    assert services
    assert all(len(row["Id"]) == 36 for row in services)
    # A conductor: the other tests of this module each delete a compute
    # service (and with it its hypervisor) on the same demo.
    victim = next(row for row in services if row["Binary"] == "nova-conductor")
    # (In the demo's default API-WG error shape, which the nova command cannot read: the nova-shaped
    # 404 is in test_nova_command_line_shows_errors_in_novas_shape.)
    for refused in (("service-delete", victim["Id"]), ("hypervisor-list",)):
        culled = nova_command(public, tenant, *refused)
        assert culled.returncode == 1, (refused, culled.stdout)
    assert victim["Id"] in {row["Id"] for row in nova_table(public, tenant, "service-list")}
    done = nova_command(admin, tenant, "service-delete", victim["Id"])
    assert done.returncode == 0, done.stderr
    assert victim["Id"] not in {row["Id"] for row in nova_table(public, tenant, "service-list")}

    hypervisors = nova_table(admin, tenant, "hypervisor-list")
    assert hypervisors
    assert all(len(row["ID"]) == 36 for row in hypervisors)
    first = hypervisors[0]
    shown = {row["Property"]: row["Value"] for row in nova_table(admin, tenant, "hypervisor-show", first["ID"])}
    assert shown["hypervisor_hostname"] == first["Hypervisor hostname"]
    # --matching at 2.53 sends nova's ?hypervisor_hostname_pattern= (a substring).
    pattern = first["Hypervisor hostname"].split(".")[0]
    found = nova_table(admin, tenant, "hypervisor-list", "--matching", pattern)
    expected = {row["Hypervisor hostname"] for row in hypervisors if pattern in row["Hypervisor hostname"]}
    assert {row["Hypervisor hostname"] for row in found} == expected


def test_novaclient_servers_tags_and_client_token(endpoints):
    client = nova(endpoints["public"], new_tenant(endpoints))
    # novaclient's servers.create() sends imageRef and flavorRef (the demo has
    # neither images, flavors nor networks and ignores them) and, at 2.52+, the tags.
    created = {
        name: client.servers.create(name, image=None, flavor="any", nics="none", tags=tags).id
        for name, tags in (("both", ["red", "blue"]), ("red", ["red"]), ("green", ["green"]))
    }
    assert sorted(client.servers.get(created["both"]).tags) == ["blue", "red"]
    # servers.create() takes no client token: the retry goes through its session.
    token = "nova-" + uuid.uuid4().hex
    first = client.client.post("/servers", body={"server": {"name": "once"}}, headers={"X-Client-Token": token})
    again = client.client.post("/servers", body={"server": {"name": "once"}}, headers={"X-Client-Token": token})
    assert first[1]["server"]["id"] == again[1]["server"]["id"]
    assert again[0].headers["Idempotent-Replayed"] == "true"

    def listed(**search_opts) -> set[str]:
        return {server.name for server in client.servers.list(detailed=False, search_opts=search_opts)}

    assert listed() == {"both", "red", "green", "once"}
    # novaclient passes search_opts through as query parameters.
    assert listed(tags="red,blue") == {"both"}
    assert listed(**{"tags-any": "blue,green"}) == {"both", "green"}
    assert listed(**{"not-tags": "red,blue"}) == {"green", "once"}
    assert listed(**{"not-tags-any": "red,blue"}) == {"red", "green", "once"}

    server = client.servers.get(created["red"])
    client.servers.add_tag(server, "extra")
    assert sorted(client.servers.tag_list(server)) == ["extra", "red"]
    client.servers.delete_tag(server, "red")
    assert client.servers.tag_list(server) == ["extra"]
    client.servers.set_tags(server, ["p", "q"])
    assert sorted(client.servers.tag_list(server)) == ["p", "q"]
    client.servers.delete_all_tags(server)
    assert client.servers.tag_list(server) == []


def test_novaclient_services_and_hypervisors_at_2_53(endpoints):
    tenant = new_tenant(endpoints)
    client, public = nova(endpoints["admin"], tenant), nova(endpoints["public"], tenant)
    services = public.services.list()
    assert services
    assert all(len(service.id) == 36 for service in services)
    victim = next(service for service in services if service.binary == "nova-compute")
    # nova's admin calls are culled on the public endpoint, as for a resource that does not exist
    # (asked in plain HTTP: novaclient reads only nova's error shape, not the demo's default API-WG one).
    for method, target in (("DELETE", "/os-services/" + victim.id), ("GET", "/os-hypervisors")):
        culled = endpoints["public"].request(
            method, "/v2.1/%s%s" % (tenant, target), {"X-OpenStack-Nova-API-Version": "2.53"}
        )
        assert (culled.status, culled.json()["errors"][0]["code"]) == (404, "tenancy.not-found"), culled.body
    client.services.delete(victim.id)
    assert victim.id not in {service.id for service in client.services.list()}

    hypervisors = client.hypervisors.list(detailed=False)
    assert hypervisors
    assert all(len(hypervisor.id) == 36 for hypervisor in hypervisors)
    one = client.hypervisors.get(hypervisors[0].id)
    assert one.hypervisor_hostname == hypervisors[0].hypervisor_hostname
    # At 2.53 novaclient's search sends ?hypervisor_hostname_pattern=.
    pattern = one.hypervisor_hostname[1:-1]
    found = client.hypervisors.search(pattern)
    expected = {h.hypervisor_hostname for h in hypervisors if pattern in h.hypervisor_hostname}
    assert {h.hypervisor_hostname for h in found} == expected


#: The demo's option groups: the app's and each filter's (examples/tenancy_mw_demo.conf).
DEMO_GROUPS = ("DEMO_COMPUTE", "ADMIN_CULL", "TENANT_PATH", "TENANT_ADMIN", "IDEMPOTENCY", "TAG_QUERY", "ID_RESOLVER")


@pytest.fixture(scope="module")
def nova_shaped(tmp_path_factory):
    """The demo's two pipelines with ``error_format = nova`` in every group, as examples/README.rst shows."""
    environment = {"OS_%s__ERROR_FORMAT" % group: "nova" for group in DEMO_GROUPS}
    with serve_demo(tmp_path_factory.mktemp("nova-errors"), environment=environment) as servers:
        yield servers


def test_nova_command_line_shows_errors_in_novas_shape(endpoints, nova_shaped):
    """python-novaclient reads only nova's error shape: the demo's default API-WG errors reach the
    ``nova`` user as an AttributeError; with ``error_format = nova`` as the sentence the demo wrote.
    """
    unread = nova_command(endpoints["public"], new_tenant(endpoints), "list", "--tags", "a/b")
    assert unread.returncode == 1
    assert "ERROR (AttributeError): 'list' object has no attribute 'get'" in unread.stderr

    tenant = new_tenant(nova_shaped)
    public = nova_shaped["public"]
    # tag_query's 400.
    refused = nova_command(public, tenant, "list", "--tags", "a/b")
    assert refused.returncode == 1
    assert "ERROR (BadRequest): Tag 'a/b' in parameter tags contains '/', which no tag may contain." in refused.stderr
    # tenant_admin's 404: discovery at /v2.1/nobody fails too, and novaclient,
    # reading that 404, falls back to /v2.1/ as it does against nova.
    unknown = nova_command(public, "nobody", "list")
    assert unknown.returncode == 1
    assert "ERROR (NotFound): Tenant 'nobody' does not exist. (HTTP 404)" in unknown.stderr
    # admin_cull's 404 on the public endpoint, and id_resolver's 400 at 2.53 on the admin one.
    culled = nova_command(public, tenant, "hypervisor-show", "12")
    assert culled.returncode == 1
    # (the command reads the 404 as "no such id" and looks for a hypervisor of that name)
    assert "ERROR (CommandError): No hypervisor with a name or ID of '12' exists." in culled.stderr
    bad_id = nova_command(nova_shaped["admin"], tenant, "hypervisor-show", "12")
    assert bad_id.returncode == 1
    assert "ERROR (BadRequest): Invalid uuid '12'" in bad_id.stderr
    # The app's tag API (its 404), printed by the command before its own summary.
    server = nova(public, tenant).servers.create("web", image=None, flavor="any", nics="none").id
    no_tag = nova_command(public, tenant, "server-tag-delete", server, "nosuch")
    assert no_tag.returncode == 1
    assert "Server '%s' has no tag 'nosuch'. (HTTP 404)" % server in no_tag.stdout + no_tag.stderr
    # And the app's own 404, in nova's body.
    missing = public.request("GET", "/v2.1/%s/flavors" % tenant)
    assert (missing.status, missing.json()) == (
        404,
        {"itemNotFound": {"code": 404, "message": "Nothing is at '/v2.1/%s/flavors'." % tenant}},
    )


# The public endpoint refuses the tenant admin API --------------------------

#: Every call of the tenant admin API (tenancy_mw.tenants.admin_filter), with the
#: status the admin endpoint answers it.  {t}: an active tenant with a server
#: {s}; {d}: another active tenant, the destination of moves.
ADMIN_CALLS = [
    ("GET", "/v2.1/{t}", None, 200),
    ("HEAD", "/v2.1/{t}", None, 204),
    ("PUT", "/v2.1/{t}", {"tier": "gold"}, 202),
    ("PUT", "/v2.1/{new}", {}, 201),
    ("GET", "/v2.1/{t}/servers/{s}/action/move?dest={d}", None, 200),
    ("HEAD", "/v2.1/{t}/servers/{s}/action/move?dest={d}", None, 200),
    ("GET", "/v2.1/{t}/action/move?dest={d}", None, 200),
    ("HEAD", "/v2.1/{t}/action/move?dest={d}", None, 200),
    ("POST", "/v2.1/{t}/servers/{s}/action/move?dest={d}", None, 303),
    ("DELETE", "/v2.1/{t}", None, 204),
    ("POST", "/v2.1/{t}/action/restore", None, 200),
    ("POST", "/v2.1/{t}/action/move?dest={d}", None, 303),
]


def test_public_endpoint_refuses_every_admin_call_the_admin_endpoint_serves(endpoints):
    public, admin = endpoints["public"], endpoints["admin"]
    names = {"t": new_tenant(endpoints), "d": new_tenant(endpoints), "new": "n" + uuid.uuid4().hex[:12]}
    created = public.request("POST", "/v2.1/%s/servers" % names["t"], HEADERS_JSON, b'{"server": {"name": "m"}}')
    names["s"] = created.json()["server"]["id"]
    for method, template, body, served in ADMIN_CALLS:
        target = template.format(**names)
        data = None if body is None else json.dumps(body).encode()
        headers = HEADERS_JSON if data is not None else {}
        refused = public.request(method, target, headers, data)
        # None reveals or changes the tenant: no tenant headers, no representation.
        assert "x-tenant-state" not in refused.headers, (method, target)
        assert "etag" not in refused.headers, (method, target)
        if target == "/v2.1/" + names["t"] and method in ("GET", "HEAD"):
            # Not an admin call for admin_cull: GET and HEAD pass to the
            # service, which has nothing there (nova would show its version
            # document at /v2.1/{project_id}: never the tenant either).
            assert refused.status in (200, 404), (method, target, refused.status)
            if method == "GET":
                body = refused.json()
                assert "tier" not in json.dumps(body)
                assert "version" in body if refused.status == 200 else body["errors"][0]["status"] == 404
        else:
            # admin_cull answers itself, as for a resource that does not exist.
            assert refused.status == 404, (method, target, refused.status, refused.body)
            if method != "HEAD":
                assert refused.json()["errors"][0]["code"] == "tenancy.not-found", (method, target, refused.body)
        served_answer = admin.request(method, target, headers, data)
        assert served_answer.status == served, (method, target, served_answer.status, served_answer.body)
        if served == 303 and "/servers/" in target:
            # The server moved to {d}: move it back for the calls after this one.
            back = "/v2.1/{d}/servers/{s}/action/move?dest={t}".format(**names)
            assert admin.request("POST", back).status == 303
