"""The demo as a user meets it: examples/api-paste.ini under a real gunicorn with 2 workers.

Requests go over a socket with their targets exactly as written, so
gunicorn's RAW_URI is what tenant_path decides on.  Each test has its own
SQLite file; the last tests run the same flow on PostgreSQL and MariaDB.
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from urllib.parse import urlsplit

import pytest

from tests.functional.conftest import empty_servers_table

# The spec's valid example tenant ids ("Create a tenant"), as sent in the URL
# and as the service must store them.
SPEC_TENANT_IDS = [
    ("12345", "12345"),
    ("Bob's%20Tenant", "Bob's Tenant"),
    ("%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F", "∑∞∆∏"),
    ("resel1:sub2:acct3", "resel1:sub2:acct3"),
    ("resel1\\sub2\\acct3", "resel1\\sub2\\acct3"),
]


def stored_rows(db_path) -> list[tuple[str, str]]:
    """(tenant_id, name) of every server in the demo's SQLite file, read directly."""
    with closing(sqlite3.connect(db_path)) as conn:  # a with block alone does not close it
        return sorted(conn.execute("SELECT tenant_id, name FROM servers").fetchall())


def path_of(url: str) -> str:
    """The still-encoded path of a link, to send it back as it was given."""
    return urlsplit(url).path


def assert_error(response, status: int, *fragments: str) -> dict:
    """*response* is a JSON error of *status* whose detail names each fragment; return the error."""
    assert response.status == status, (response.status, response.body)
    assert response.headers["content-type"] == "application/json"
    (error,) = response.json()["errors"]
    assert error["status"] == status
    for fragment in fragments:
        assert fragment in error["detail"], (fragment, error["detail"])
    # oslo.middleware's request_id ran first: the error names this request.
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    assert error["request_id"].startswith("req-")
    return error


def test_the_readme_curl_flow(demo):
    demo.add_tenants("acme")
    created = demo.create("acme", "web1")
    assert created.status == 201, created.body
    server = created.json()["server"]
    assert server["name"] == "web1"
    assert server["tenant_id"] == "acme"
    assert server["created"].endswith("Z")
    link = "%s/v2.1/acme/servers/%s" % (demo.server.url, server["id"])
    assert created.headers["location"] == link
    assert server["links"] == [{"rel": "self", "href": link}]

    listed = demo.list("acme")
    assert listed.status == 200
    assert listed.json() == {"servers": [server]}

    shown = demo.request("GET", path_of(link))
    assert shown.status == 200
    assert shown.json() == {"server": server}


def test_delete_then_the_server_is_gone(demo):
    demo.add_tenants("acme")
    server = demo.create("acme", "web1").json()["server"]
    deleted = demo.request("DELETE", "/v2.1/acme/servers/" + server["id"])
    assert deleted.status == 204
    assert deleted.body == b""
    assert_error(demo.request("GET", "/v2.1/acme/servers/" + server["id"]), 404, server["id"])
    assert_error(demo.request("DELETE", "/v2.1/acme/servers/" + server["id"]), 404, server["id"])
    assert demo.list("acme").json() == {"servers": []}


def test_a_tenant_cannot_see_or_delete_another_tenants_server(demo, demo_db):
    demo.add_tenants("tenant-a", "tenant-b", "Tenant-B", "tenant-b%20")
    theirs = demo.create("tenant-b", "b-secret").json()["server"]
    mine = demo.create("tenant-a", "a1").json()["server"]
    assert demo.list("tenant-a").json()["servers"] == [mine]
    assert_error(demo.request("GET", "/v2.1/tenant-a/servers/" + theirs["id"]), 404)
    assert_error(demo.request("DELETE", "/v2.1/tenant-a/servers/" + theirs["id"]), 404)
    # Case matters: 'Tenant-B' and 'tenant-b ' are other tenants.
    assert demo.list("Tenant-B").json()["servers"] == []
    assert demo.list("tenant-b%20").json()["servers"] == []
    assert_error(demo.request("DELETE", "/v2.1/Tenant-B/servers/" + theirs["id"]), 404)
    assert demo.list("tenant-b").json()["servers"] == [theirs]
    assert stored_rows(demo_db) == [("tenant-a", "a1"), ("tenant-b", "b-secret")]


def test_a_forged_tenant_header_does_not_change_the_tenant(demo):
    demo.add_tenants("victim", "acme")
    forged = {"X-Tenant-Id": "victim"}
    victims = demo.create("victim", "victim-server").json()["server"]
    created = demo.create("acme", "web1", headers=forged)
    assert created.status == 201
    assert created.json()["server"]["tenant_id"] == "acme"
    assert [s["name"] for s in demo.list("acme", headers=forged).json()["servers"]] == ["web1"]
    assert demo.list("victim").json()["servers"] == [victims]
    assert_error(demo.request("GET", "/v2.1/acme/servers/" + victims["id"], headers=forged), 404)
    assert_error(demo.request("DELETE", "/v2.1/acme/servers/" + victims["id"], headers=forged), 404)
    assert demo.list("victim").json()["servers"] == [victims]


def test_the_specs_example_tenant_ids_work_end_to_end(demo, demo_db):
    demo.add_tenants(*(raw for raw, _ in SPEC_TENANT_IDS))
    made = {}
    for raw, tenant_id in SPEC_TENANT_IDS:
        created = demo.create(raw, "server of " + tenant_id)
        assert created.status == 201, (raw, created.body)
        server = created.json()["server"]
        assert server["tenant_id"] == tenant_id
        made[tenant_id] = server
        # The link quotes the tenant again; following it finds the server.
        shown = demo.request("GET", path_of(created.headers["location"]))
        assert shown.status == 200, (raw, created.headers["location"], shown.body)
        assert shown.json()["server"] == server
    for raw, tenant_id in SPEC_TENANT_IDS:
        assert demo.list(raw).json()["servers"] == [made[tenant_id]], raw
    # What the database holds is the decoded tenant id, not the URL's spelling.
    assert stored_rows(demo_db) == sorted((tenant_id, "server of " + tenant_id) for _, tenant_id in SPEC_TENANT_IDS)


def test_the_spec_invalid_examples_are_refused(demo, demo_db):
    demo.add_tenants("resel1")
    # resel1/sub2/acct3 is not a tenant id: the tenant is 'resel1' and the
    # rest does not name a resource.
    assert_error(demo.request("POST", "/v2.1/resel1/sub2/acct3/servers", {"server": {"name": "x"}}), 404)
    # An empty tenant.
    assert_error(demo.request("POST", "/v2.1//servers", {"server": {"name": "x"}}), 400, "empty")
    assert_error(demo.request("GET", "/v2.1//servers"), 400, "empty")
    assert stored_rows(demo_db) == []


def test_an_encoded_slash_in_the_tenant_is_a_400_naming_it(demo, demo_db):
    demo.add_tenants("a")
    # gunicorn decodes a%2Fb to a/b in PATH_INFO; only RAW_URI still shows
    # the %2F, so this answer proves tenant_path reads the raw target.
    for method, body in (("GET", None), ("POST", {"server": {"name": "x"}})):
        error = assert_error(demo.request(method, "/v2.1/a%2Fb/servers", body), 400, "a%2Fb")
        assert error["code"] == "tenancy.bad-path.encoded-slash"
    assert demo.list("a").json()["servers"] == []
    assert stored_rows(demo_db) == []


@pytest.mark.parametrize("char", ["a", "%E2%88%91"], ids=["ascii", "utf8"])
def test_a_255_character_tenant_works_and_256_is_a_400(demo, demo_db, char):
    demo.add_tenants(char * 255)
    raw = char * 255
    created = demo.create(raw, "long")
    assert created.status == 201, created.body
    tenant_id = created.json()["server"]["tenant_id"]
    assert len(tenant_id) == 255
    assert demo.list(raw).json()["servers"] == [created.json()["server"]]
    assert stored_rows(demo_db) == [(tenant_id, "long")]

    error = assert_error(demo.create(char * 256, "too long"), 400, "256 characters")
    assert error["code"] == "tenancy.invalid-tenant-id.too-long"
    assert stored_rows(demo_db) == [(tenant_id, "long")]


@pytest.mark.parametrize("target", ["/v2.1", "/v2.1/"])
def test_the_version_document(demo, target):
    answer = demo.request("GET", target)
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    version = answer.json()["version"]
    assert version["id"] == "v2.1"
    assert version["status"] == "CURRENT"
    assert version["links"] == [{"rel": "self", "href": demo.server.url + "/v2.1/"}]


def test_the_versions_document(demo):
    answer = demo.request("GET", "/")
    assert answer.status == 200
    (version,) = answer.json()["versions"]
    assert version["id"] == "v2.1"
    assert version["status"] == "CURRENT"


# (what, body, status, fragments the error's detail must hold)
BAD_CREATE_BODIES = [
    ("empty", b"", 400, ["empty"]),
    ("bad JSON", b"{bad", 400, ["{bad", "not valid JSON"]),
    ("not UTF-8", b"\xff\xfe\xfa", 400, ["not valid JSON"]),
    ("nested too deep", b"[" * 60000, 400, ["not valid JSON"]),
    ("not an object", b"[1, 2]", 400, ["[1, 2]"]),
    ("server not an object", b'{"server": "web1"}', 400, ["web1"]),
    ("no server", b'{"name": "web1"}', 400, ["web1"]),
    ("no name", b'{"server": {}}', 400, ["no name"]),
    ("empty name", b'{"server": {"name": ""}}', 400, ["''", "empty"]),
    ("blank name", b'{"server": {"name": "   "}}', 400, ["'   '", "empty"]),
    ("null name", b'{"server": {"name": null}}', 400, ["None", "not a string"]),
    ("number name", b'{"server": {"name": 42}}', 400, ["42", "not a string"]),
    ("256-character name", json.dumps({"server": {"name": "n" * 256}}).encode(), 400, ["nnnn", "256 characters"]),
    ("NUL in name", b'{"server": {"name": "a\\u0000b"}}', 400, ["control character"]),
    ("lone surrogate", b'{"server": {"name": "\\ud800"}}', 400, ["not valid Unicode"]),
    ("over 64 KiB", b'{"server": {"name": "x"}, "pad": "' + b"p" * 70000 + b'"}', 413, ["65536 bytes"]),
]


def test_bad_create_bodies_are_4xx_json_never_500(demo, demo_db):
    demo.add_tenants("acme")
    # One server for all the cases: a gunicorn start per case would double
    # the run time of this module.
    wrong = []
    for what, body, status, fragments in BAD_CREATE_BODIES:
        answer = demo.request("POST", "/v2.1/acme/servers", body, {"Content-Type": "application/json"})
        try:
            assert_error(answer, status, *fragments)
        except AssertionError as exc:
            wrong.append((what, answer.status, answer.body[:300], str(exc)[:300]))
    assert wrong == []
    assert stored_rows(demo_db) == []
    assert "Traceback" not in demo.log()


def test_wrong_methods_are_405_with_allow(demo):
    demo.add_tenants("acme")
    server = demo.create("acme", "web1").json()["server"]
    for method, target, allow in (
        ("PUT", "/v2.1/acme/servers", "GET, HEAD, POST"),
        ("DELETE", "/v2.1/acme/servers", "GET, HEAD, POST"),
        ("POST", "/v2.1/acme/servers/" + server["id"], "DELETE, GET, HEAD"),
        ("PATCH", "/v2.1/acme/servers/" + server["id"], "DELETE, GET, HEAD"),
        ("POST", "/v2.1", "GET, HEAD"),
        ("DELETE", "/", "GET, HEAD"),
    ):
        answer = demo.request(method, target)
        assert_error(answer, 405, method)
        assert answer.headers["allow"] == allow
    assert demo.list("acme").json()["servers"] == [server]


def test_unknown_things_are_404_json(demo):
    demo.add_tenants("acme")
    for target, fragment in (
        ("/v2.1/acme/servers/00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000000"),
        ("/v2.1/acme/servers/not-a-uuid", "not-a-uuid"),
        ("/v2.1/acme/flavors", "/v2.1/acme/flavors"),
        ("/v3/acme/servers", "v3"),
        ("/healthcheck", "/healthcheck"),
    ):
        assert_error(demo.request("GET", target), 404, fragment)
    # The tenant's own URL is the version document, as nova's (novaclient discovers versions there).
    assert demo.request("GET", "/v2.1/acme").json()["version"]["version"] == "2.53"
    assert "Traceback" not in demo.log()


def test_two_workers_take_concurrent_creates_on_one_sqlite_file(demo, demo_db):
    demo.add_tenants("acme")
    def create(index: int) -> int:
        return demo.create("acme", "web%02d" % index).status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(create, range(40)))
    assert statuses == [201] * 40, demo.log()[-3000:]
    names = sorted(s["name"] for s in demo.list("acme").json()["servers"])
    assert names == ["web%02d" % i for i in range(40)]
    assert len(stored_rows(demo_db)) == 40


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_the_demo_runs_on_a_database_server(request, start_demo, backend):
    url = request.getfixturevalue(backend + "_url")
    empty_servers_table(url)
    demo = start_demo(url)
    sigma = "%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F"
    demo.add_tenants("Acme", "acme", sigma, "ACME", "acme%20")
    upper = demo.create("Acme", "upper").json()["server"]
    lower = demo.create("acme", "lower").json()["server"]
    utf8 = demo.create(sigma, "∑ server").json()["server"]
    assert utf8["tenant_id"] == "∑∞∆∏"
    assert demo.list("Acme").json()["servers"] == [upper]
    assert demo.list("acme").json()["servers"] == [lower]
    assert demo.list("ACME").json()["servers"] == []
    assert demo.list("acme%20").json()["servers"] == []
    assert demo.list(sigma).json()["servers"] == [utf8]
    assert_error(demo.request("GET", "/v2.1/acme/servers/" + upper["id"]), 404)
    assert_error(demo.request("DELETE", "/v2.1/acme/servers/" + upper["id"]), 404)
    assert demo.request("DELETE", "/v2.1/Acme/servers/" + upper["id"]).status == 204
    assert demo.list("Acme").json()["servers"] == []
    assert demo.list("acme").json()["servers"] == [lower]
    assert "Traceback" not in demo.log()
