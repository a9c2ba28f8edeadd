"""The demo's server list pages as nova's does, under real gunicorn, on SQLite, PostgreSQL and MariaDB.

One demo per backend (examples/api-paste.ini's two pipelines, 2 workers
each, ``[demo_compute] max_limit`` set to 4 through the environment), for
the whole module:

- nova's conventions over plain HTTP: ``limit`` (capped at ``max_limit``,
  which is also the page without one; ``0`` an empty page), ``marker``,
  ``servers_links`` only on a full page, its ``href`` the request's URL
  with the tag filters (a repeated one too) and ``marker`` the last id,
  the malformed and unknown values refused (``400`` naming them);
- openstacksdk, unmodified, walking every page of a tag-filtered list
  (``limit=3``: it follows the next links itself) while another thread
  keeps creating servers of the same tenant, tagged and untagged: each
  matching server that was there before the walk is listed exactly once,
  none twice, none that does not match.
"""

from __future__ import annotations

import json
import threading
import uuid
from urllib.parse import parse_qsl, urlsplit

import openstack
import pytest

from tests.functional.conftest import BACKENDS
from tests.support.demo import serve_demo

# openstacksdk warns about its own deprecated internals on every call (test_real_clients.py).
pytestmark = pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")

#: The demo's max_limit here: small, so its cap and its full pages are cheap to reach.
MAX_LIMIT = 4
V253 = {"OpenStack-API-Version": "compute 2.53"}
JSON_V253 = dict(V253, **{"Content-Type": "application/json"})


@pytest.fixture(scope="module", params=BACKENDS)
def demo(request, tmp_path_factory):
    """Both endpoints of the demo on one backend's database, ``max_limit = 4``."""
    url = None if request.param == "sqlite" else request.getfixturevalue(request.param + "_url")
    state_dir = tmp_path_factory.mktemp("paging-" + request.param)
    environment = {"OS_DEMO_COMPUTE__MAX_LIMIT": str(MAX_LIMIT)}
    with serve_demo(state_dir, environment=environment, database_url=url) as servers:
        yield servers


def new_tenant(demo) -> str:
    """A tenant of the test's own (the server databases are the session's, shared)."""
    tenant = "page-" + uuid.uuid4().hex[:10]
    made = demo.admin.request("PUT", "/v2.1/" + tenant, {"Content-Type": "application/json"}, b"{}")
    assert made.status == 201, made.body
    return tenant


def create(demo, tenant: str, tags: list[str]) -> str:
    """A server of *tenant* with *tags* (tags on create: 2.52); its id."""
    body = json.dumps({"server": {"name": "s", "tags": tags}}).encode()
    made = demo.public.request("POST", "/v2.1/%s/servers" % tenant, JSON_V253, body)
    assert made.status == 201, made.body
    return made.json()["server"]["id"]


def get(demo, target: str, headers: dict | None = V253, status: int = 200):
    """The JSON of a GET on the public endpoint (*target* a path and query, or a link's absolute URL)."""
    parts = urlsplit(target)
    if parts.netloc:
        assert "%s://%s" % (parts.scheme, parts.netloc) == demo.public.url, target
        target = parts.path + ("?" + parts.query if parts.query else "")
    answer = demo.public.request("GET", target, headers)
    assert answer.status == status, (target, answer.status, answer.body)
    return answer.json()


def ids_of(document: dict) -> list[str]:
    return [server["id"] for server in document["servers"]]


def next_href(document: dict) -> str | None:
    """The next link of a list answer, ``None`` when it has none (nova leaves the key out then)."""
    links = document.get("servers_links")
    if links is None:
        return None
    ((link,),) = [links]
    assert link["rel"] == "next"
    return link["href"]


def test_the_list_pages_as_novas_does(demo):
    tenant = new_tenant(demo)
    # red on servers 0, 2, 4, 6; blue on 1 and 2.
    made = [create(demo, tenant, tags) for tags in (["red"], ["blue"], ["red", "blue"], [], ["red"], [], ["red"])]
    ids = sorted(made)
    servers = "/v2.1/%s/servers" % tenant
    base = demo.public.url + servers

    # By id, a page of limit; a full one links to the next, the last (short) one does not.
    first = get(demo, servers + "?limit=3")
    assert ids_of(first) == ids[:3]
    assert next_href(first) == base + "?limit=3&marker=" + ids[2]
    second = get(demo, next_href(first))
    assert ids_of(second) == ids[3:6]
    third = get(demo, next_href(second))
    assert ids_of(third) == ids[6:]
    assert next_href(third) is None
    # No limit, or one above max_limit: pages of max_limit, and a link (nova's rules).
    capped = get(demo, servers + "?limit=1000")
    assert ids_of(capped) == ids[:MAX_LIMIT]
    assert next_href(capped) == base + "?limit=1000&marker=" + ids[MAX_LIMIT - 1]
    assert ids_of(get(demo, next_href(capped))) == ids[MAX_LIMIT:]
    unbounded = get(demo, servers)
    assert next_href(unbounded) == base + "?marker=" + ids[MAX_LIMIT - 1]
    # A full last page links to an empty page, which has no link.
    last = get(demo, servers + "?limit=1&marker=" + ids[-2])
    assert ids_of(last) == ids[-1:]
    assert get(demo, next_href(last)) == {"servers": []}
    # limit=0: an empty page, no link; the marker is still checked.
    assert get(demo, servers + "?limit=0") == {"servers": []}
    assert get(demo, servers + "?limit=0&marker=" + ids[0]) == {"servers": []}
    # The detailed list links to itself; below 2.26 (no tags) the list pages too, as nova's.
    detail = get(demo, servers + "/detail?limit=2", headers=None)
    assert "tags" not in detail["servers"][0]
    assert next_href(detail) == base + "/detail?limit=2&marker=" + ids[1]

    # With tag filters: the link keeps them as sent (a repeated one, and its order), the pages match.
    reds = sorted(made[n] for n in (0, 2, 4, 6))
    query = "not-tags=green&tags-any=red&limit=2&tags-any=nothing"
    page = get(demo, servers + "?" + query)
    assert ids_of(page) == reds[:2]
    href = next_href(page)
    assert href == base + "?" + query + "&marker=" + reds[1]
    page = get(demo, href)
    assert ids_of(page) == reds[2:]
    assert all("red" in server["tags"] for server in page["servers"])
    # A marker that does not match the filter is still a marker: the servers after it.
    after_blue = get(demo, servers + "?tags=red&marker=" + made[1])
    assert ids_of(after_blue) == [i for i in reds if i > made[1]]
    # The marker replaced where the client put it.
    moved = get(demo, servers + "?marker=%s&limit=1&tags=red" % reds[0])
    assert next_href(moved) == base + "?marker=%s&limit=1&tags=red" % reds[1]


#: Malformed paging parameters: (query, error code, what the detail names).
MALFORMED = [
    ("limit=-1", "demo.invalid-page.limit-not-a-number", "'-1'"),
    ("limit=ten", "demo.invalid-page.limit-not-a-number", "'ten'"),
    ("limit=", "demo.invalid-page.limit-not-a-number", "''"),
    ("limit=99999999999999999999", "demo.invalid-page.limit-too-large", "'99999999999999999999'"),
    ("limit=1&limit=2", "demo.invalid-page.limit-repeated", "('1', '2')"),
    ("marker=", "demo.invalid-page.marker-empty", "marker is empty"),
    ("marker=" + "m" * 256, "demo.invalid-page.marker-too-long", "256 characters"),
    ("marker=a%00", "demo.invalid-page.marker-control-character", "'a\\x00'"),
    ("marker=a&marker=b", "demo.invalid-page.marker-repeated", "('a', 'b')"),
]


def test_a_malformed_limit_or_marker_is_400_naming_it(demo):
    servers = "/v2.1/%s/servers" % new_tenant(demo)
    for query, code, named in MALFORMED:
        for target in (servers + "?" + query, servers + "/detail?tags=red&" + query):
            (error,) = get(demo, target, status=400)["errors"]
            assert error["code"] == code, (query, error)
            assert named in error["detail"], (query, error)


def test_a_marker_that_is_none_of_the_tenants_servers_is_400(demo):
    tenant, other = new_tenant(demo), new_tenant(demo)
    mine, theirs = create(demo, tenant, []), create(demo, other, [])
    servers = "/v2.1/%s/servers" % tenant
    assert ids_of(get(demo, servers + "?marker=" + mine)) == []
    for marker in (theirs, str(uuid.uuid4()), mine.upper(), "nothing"):
        for query in ("marker=" + marker, "limit=0&marker=" + marker, "tags=red&marker=" + marker):
            (error,) = get(demo, servers + "?" + query, status=400)["errors"]
            assert error["code"] == "demo.marker-not-found", query
            assert error["detail"].startswith("marker [%s] not found" % marker), error["detail"]


def test_openstacksdk_walks_every_page_while_servers_are_created(demo):
    """``conn.compute.servers(..., limit=3)`` with tag filters, pages fetched while a writer creates servers."""
    tenant = new_tenant(demo)
    wanted = {"any_tags": "red,green", "not_tags": "blue"}

    def matches(tags) -> bool:
        return bool({"red", "green"} & set(tags)) and "blue" not in tags

    kinds = (["red"], ["green", "x"], ["red", "blue"], [], ["blue"], ["red", "green"])
    tags_of = {}
    for number in range(18):
        tags = kinds[number % len(kinds)]
        tags_of[create(demo, tenant, tags)] = tags
    before = {server_id for server_id, tags in tags_of.items() if matches(tags)}
    assert len(before) == 9

    # The writer: servers of the same tenant, matching and not, as fast as it goes, until told to stop.
    stop, created = threading.Event(), threading.Semaphore(0)
    writes: list[tuple[str, list[str]]] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            number = 0
            while not stop.is_set() and number < 200:
                tags = kinds[number % len(kinds)]
                writes.append((create(demo, tenant, tags), tags))
                created.release()
                number += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
            created.release()

    conn = openstack.connect(
        auth_type="none",
        compute_endpoint_override="%s/v2.1/%s" % (demo.public.url, tenant),
        load_yaml_config=False,
        load_envvars=False,
    )
    # Every list page the SDK asks, as it sends it (requests' own response hook).
    asked: list[str] = []
    conn.session.session.hooks["response"].append(
        lambda response, **_: asked.append(response.url) if "/servers/detail" in response.url else None
    )
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    listed = []
    try:
        for server in conn.compute.servers(details=True, limit=3, **wanted):
            listed.append((server.id, list(server.tags)))
            # At least one more server made before the SDK asks its next page (while the writer runs).
            assert created.acquire(timeout=10) or not thread.is_alive(), "the writer stalled"
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures
    tags_of.update(writes)
    listed_ids = [server_id for server_id, _ in listed]

    assert len(writes) >= len(listed)  # the writer kept going through the walk
    assert len(listed_ids) == len(set(listed_ids)), "listed twice: %s" % sorted(
        i for i in listed_ids if listed_ids.count(i) > 1
    )
    assert listed_ids == sorted(listed_ids)  # by id, as the pages are
    assert before <= set(listed_ids), "skipped: %s" % sorted(before - set(listed_ids))
    for server_id, tags in listed:
        assert matches(tags), (server_id, tags)
        assert sorted(tags_of[server_id]) == tags
    # The SDK paged: every page after the first asked after the previous one's last id,
    # with the filters, at the limit it was given.
    pages = [dict(parse_qsl(urlsplit(url).query)) for url in asked]
    assert len(pages) >= 4, asked
    assert all(p["tags-any"] == "red,green" and p["not-tags"] == "blue" and p["limit"] == "3" for p in pages)
    assert "marker" not in pages[0]
    assert all("marker" in p and p["marker"] in listed_ids for p in pages[1:])
