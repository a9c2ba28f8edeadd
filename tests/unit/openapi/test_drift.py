"""The OpenAPI description of a pipeline against what its filters answer: neither may drift from the other.

A pipeline of every filter that answers or changes calls (``RequestId``,
``tenant_path``, ``tenant_admin`` with a move provider, ``idempotency``,
``tag_query``) over a service that mounts the tag API of its servers
(tests/support/tagged_servers.py) is driven, through real WSGI calls,
into every answer it can give: each operation of the description with
each request that makes a filter refuse, redirect or answer.  Every
answer must be one its operation lists (status, headers, body valid
against the listed schema, error code among the listed ones), every
(path, method, status) listed must be reached, every header listed
for one sent, and every error code a description names answered.  Six pipelines
(:data:`VARIANTS`): the API-WG error shape, with ``version_discovery``;
nova's with microversions and no representations; a public endpoint
(``admin_cull`` in front, no admin API, a tenant id pattern, the token's
project checked, ``422`` for a reused token); nova's urlmap mount
(``/v2.1``) with ``tenant_in_path = always`` and ``strip_tenant``; a
``/compute`` mount with ``tenant_in_path = never`` and ``token_tenant``;
a public endpoint whose ``admin_cull`` culls admin actions by the JSON
body's key (``POST /servers/*/action (os-migrateLive,evacuate)``,
``cull_status = 403``), with the servers' action call described.
With the default ``tenant_in_path = optional`` both forms of the
servers' calls are driven, under a tenant and without one.

Each call's requests run in a world of their own (a fresh SQLite registry
and tag store, seeded through an admin endpoint), so no call's requests
change what another's find.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import time
from datetime import timedelta

import pytest
from openapi_spec_validator import validate
from oslo_middleware.request_id import RequestId

from tenancy_mw import migrations
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.idempotency import Idempotency
from tenancy_mw.idempotency.fingerprint import fingerprint
from tenancy_mw.idempotency.records import Record
from tenancy_mw.openapi import describe_pipeline
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tags.store import TagStore
from tenancy_mw.tenants.admin.filter import TenantAdmin
from tenancy_mw.tenants.path_filter import STRIPPED_KEY, TenantPath
from tenancy_mw.tenants.removal import TenantRemoval
from tests.support.openapi_checks import UNLISTED, body_problems, documented, response_key, template_of
from tests.support.tagged_servers import ServerService
from tests.support.wsgi import call, make_environ

MICROVERSIONS = "v2.1 compute 2.1 2.95 X-OpenStack-Nova-API-Version"
#: The pipelines described and driven: options for every filter ("common") and for each one; with or
#: without admin_cull in front.  "public" is a public endpoint: no admin API, tenants checked harder.
#: "prefix" is the service's mount (SCRIPT_NAME); "action_collections" describe_pipeline's (the servers' action call).
VARIANTS: dict[str, dict] = {
    "api-wg": {"tenant_admin": {"version_discovery": "true"}},
    "nova": {"common": {"error_format": "nova", "microversions": MICROVERSIONS},
             "tenant_admin": {"representations": "false"}},
    "public": {"admin_cull": {}, "tenant_admin": {"admin_api": "false"}, "idempotency": {"mismatch_status": "422"},
               "tenant_path": {"tenant_id_pattern": "[a-z0-9-]+", "check_token_project": "true"}},
    # nova's urlmap: mounted at the version, the tenant stripped; every path names a tenant.
    "always": {"prefix": "/v2.1", "tenant_admin": {"tenant_in_path": "always"},
               "tenant_path": {"tenant_in_path": "always", "strip_tenant": "true"}},
    # No tenant in any path: the token's project is the tenant.
    "never": {"prefix": "/compute", "tenant_admin": {"tenant_in_path": "never"},
              "tenant_path": {"tenant_in_path": "never", "token_tenant": "true"}},
    # Members' actions pass, admins' are culled by the body's key (nova's POST /servers/{id}/action).
    "actions": {"admin_cull": {"rules": "POST /servers/*/action (os-migrateLive,evacuate)", "cull_status": "403"},
                "tenant_admin": {"admin_api": "false"}, "action_collections": ("servers",)},
}  # fmt: skip


class FailingRemoval(TenantRemoval):
    """A service whose purge of a tenant's resources fails: the tenant stays marked purging."""

    def hide_resources(self, tenant_id: str) -> None:
        """Nothing to hide."""

    def restore_resources(self, tenant_id: str) -> None:
        """Nothing to restore."""

    def purge_resources(self, tenant_id: str) -> None:
        """Fail, as a service that cannot reach its database."""
        raise RuntimeError("the service's database is down")


DEFAULTS = {"version": "v2.1", "tenant_id": "acme", "resource_id": "s1", "tag": "red", "resource_path": "servers/s1"}
PROVIDER = "tests.support.tagged_servers:ServerMoves"
#: Destinations the move provider refuses with the status they name (a status the move answers itself too).
REFUSING = ("refuses-400", "refuses-404", "refuses-410", "refuses-412")
FORM = ("Content-Type", "application/x-www-form-urlencoded")
#: One path segment, 101 once backslashes read as separators (admin_cull's max_segments is 100).
DEEP = "\\".join("a" * 101)


class Seeded:
    """The world every call starts from, made once: tenants (a deleted one, one being purged, one moved away) and a tag.

    Made through an admin endpoint over a fresh registry and tag store in
    *folder*; each :class:`World` copies the two databases and the service's servers.
    """

    def __init__(self, folder, template) -> None:
        self.registry, self.tags = folder / "tenants.sqlite", folder / "tags.sqlite"
        shutil.copy(template, self.registry)
        store = TagStore("sqlite:///%s" % self.tags, max_tags=3, create_tables=True)
        service = ServerService(store)
        seeder = TenantAdmin(service, {"connection": "sqlite:///%s" % self.registry, "move_provider": PROVIDER})
        app = TenantPath(seeder, {})
        try:
            requests = [
                ("PUT", "/v2.1/" + tenant, b"{}")
                for tenant in ("acme", "dest", "gone", "moved", "full", "taken", "boom", *REFUSING)
            ]
            requests += [("PUT", "/v2.1/purging", b"{}"), ("DELETE", "/v2.1/purging", b"")]
            for method, target, body in requests:
                assert call(app, make_environ(method, target, (), body))[0] < 400, (method, target)
            # A purge whose removal fails leaves the tenant marked purging (restore: 409).
            assert "purging" in seeder.registry.purge(timedelta(0), removal=FailingRemoval()).failed
            requests = [("DELETE", "/v2.1/gone", b""), ("POST", "/v2.1/moved/action/move?dest=dest", b"")]
            requests += [("PUT", "/v2.1/acme/servers/s1/tags/red", b"")]
            for method, target, body in requests:
                assert call(app, make_environ(method, target, (), body))[0] < 400, (method, target)
        finally:
            seeder.close()
            store.close()
        self.servers, self.moved_out = dict(service.servers), set(service.moved_out)


class World:
    """One pipeline over a copy of the *seeded* databases: *kind* ``good``, ``broken_registry`` or ``broken_stores``."""

    def __init__(self, folder, seeded: Seeded, variant: str, kind: str) -> None:
        variant_options = VARIANTS[variant]

        def options(name: str) -> dict:
            return {**variant_options.get("common", {}), **variant_options.get(name, {})}

        #: The service's mount (SCRIPT_NAME), before every path of the description.
        self.prefix = variant_options.get("prefix", "")
        self.action_collections = variant_options.get("action_collections", ())
        self.registry = "sqlite:///%s" % (folder / "tenants.sqlite")
        if kind == "broken_registry":
            (folder / "tenants.sqlite").touch()  # no tables: every registry read fails
        else:
            shutil.copy(seeded.registry, folder / "tenants.sqlite")
        if kind != "broken_stores":  # else no tables: every tag store call fails
            shutil.copy(seeded.tags, folder / "tags.sqlite")
        tags = "sqlite:///%s" % (folder / "tags.sqlite")
        self.tag_store = TagStore(tags, max_tags=3, create_tables=False)
        self.tag_error_format = options("tag_query").get("error_format", "api-wg")
        self.service = ServerService(self.tag_store, self.tag_error_format)
        if kind != "broken_registry":
            self.service.servers, self.service.moved_out = dict(seeded.servers), set(seeded.moved_out)
        store = {"backend": "memory"}
        if kind == "broken_stores":
            store = {"backend": "memcached", "memcached_servers": "127.0.0.1:9", "secret": "s", "store_timeout": "0.2"}
        self.idempotency = Idempotency(
            TagQueryFilter(self.service, options("tag_query")),
            {**options("idempotency"), **store, "max_body_bytes": "2000"},
        )
        admin = {"connection": self.registry, "max_body_bytes": "1024", "move_provider": PROVIDER}
        self.admin = TenantAdmin(self.idempotency, {**options("tenant_admin"), **admin})
        app = TenantPath(self.admin, options("tenant_path"))
        #: Whether an admin_cull is in front.
        self.culled = "admin_cull" in variant_options
        if self.culled:
            app = AdminCull(app, options("admin_cull"))
        self.app = RequestId(app)
        self.answers: list[tuple] = []

    def describe(self) -> dict:
        """The description of this world's pipeline."""
        return describe_pipeline(
            self.app,
            tag_collections=("servers",),
            prefix=self.prefix,
            tag_error_format=self.tag_error_format,
            action_collections=self.action_collections,
        )

    def environ(self, method: str, target: str, headers=(), body: bytes = b"", stripped=False, **keys) -> dict:
        """The environ of a request below the mount, with *keys* set (and a tenant segment already *stripped*)."""
        environ = make_environ(method, target, headers, body, script_name=self.prefix)
        if stripped:
            environ[STRIPPED_KEY] = True
        return {**environ, **keys}

    def send(self, method: str, target: str, headers=(), body: bytes = b"", environ=None) -> tuple:
        """Send one request; keep ``(method, target, status, headers, body)``."""
        environ = environ or self.environ(method, target, headers, body)
        status, answer_headers, answer_body = call(self.app, environ)
        self.answers.append((method, target, status, answer_headers, answer_body))
        return status, answer_headers, answer_body

    def close(self) -> None:
        self.admin.close()
        self.tag_store.close()
        self.idempotency.store.close()


def fill(template: str, **values: str) -> str:
    """*template* with its parameters given *values* (else :data:`DEFAULTS`)."""
    return re.sub(r"{(\w+)}", lambda m: values.get(m.group(1), DEFAULTS[m.group(1)]), template)


# --- the requests: each takes a world and a template ------------------------------------------------


def generic(world: World, template: str, method: str) -> None:
    """What any call is sent.

    As is; under unknown, deleted, moved, invalid and too deep tenants (or,
    without a tenant in the path, resources named like admin segments and
    the tenants of confirmed tokens); with a tenant segment already
    stripped; with paths with no canonical form and an environ that is not
    PEP 3333's; with another project's token, a target too long, too many
    versions in Accept, an empty tag query.
    """
    data = b'{"tags": ["a"]}' if method in ("PUT", "POST") else b""
    world.send(method, fill(template), body=data)
    if "{tenant_id}" in template:
        for tenant in ("nobody", "gone", "purging", "moved", "x" * 256, "a%00b", "Not_Matching", "action"):
            world.send(method, fill(template, tenant_id=tenant, resource_path="servers/s9"), body=data)
        world.send(method, fill(template, tenant_id=DEEP), body=data)
        # A tenant_path that strips finds the tenant segment already stripped (a second one, behind a urlmap).
        world.send(method, fill(template), environ=world.environ(method, fill(template), body=data, stripped=True))
    else:  # a tenant-less call: a resource named like an admin segment, the tenants of tokens
        if "{resource_id}" in template:
            for resource in ("action", DEEP):
                world.send(method, fill(template, resource_id=resource), body=data)
        for project in ("nobody", "gone", "a\x01b"):
            token = [("X-Identity-Status", "Confirmed"), ("X-Project-Id", project)]
            world.send(method, fill(template), token, data)
    # Paths with no canonical form, environs that are not PEP 3333's.
    for raw in ("%s\u0100" % fill(template), 5):
        world.send(method, fill(template), environ=world.environ(method, fill(template), body=data, RAW_URI=raw))
    world.send(method, fill(template), [("X-Identity-Status", "Confirmed"), ("X-Project-Id", "other")], data)
    world.send(method, fill(template) + "?pad=" + "a" * 9000, body=data)
    versions = ", ".join("application/json;version=2.%d" % n for n in range(10))
    world.send(method, fill(template), [("Accept", versions)], data)
    if method in ("GET", "HEAD"):
        world.send(method, fill(template) + "?tags=")


def scope(template: str) -> list[tuple[str, str]]:
    """The headers that give a client token its scope: none under a tenant, else a confirmed token's project."""
    return [] if "{tenant_id}" in template else [("X-Identity-Status", "Confirmed"), ("X-Project-Id", "acme")]


def broken(world: World, template: str, method: str) -> None:
    """A call while a database or store is down (with a client token for a POST)."""
    world.send(method, fill(template, tag="new"), [("X-Client-Token", "t1"), *scope(template)], b'{"tags": ["a"]}')


def tenant_calls(world: World, template: str, method: str) -> None:
    """PUT, DELETE, restore: created, updated, refused bodies, deleted tenants, restored ones."""
    if method == "PUT":
        world.send("PUT", fill(template, tenant_id="newone"), body=b'{"a": 1}')
        world.send("PUT", fill(template), body=b'{"a": 2}')
        world.send("PUT", fill(template), [("Content-Type", "text/plain")], b"x")
        world.send("PUT", fill(template), body=b"[1]")
        world.send("PUT", fill(template), body=b"x" * 2000)
        world.send("PUT", fill(template), [("Transfer-Encoding", "chunked")])
        world.send("PUT", fill(template), [("Content-Length", "two")], b"{}")
        world.send("PUT", fill(template), environ=world.environ("PUT", fill(template), body=b"{}", CONTENT_LENGTH="9"))
    if template.endswith("restore"):
        world.send("POST", fill(template))  # active: 409
        world.send("DELETE", fill(template.rsplit("/action", 1)[0]))
        world.send("POST", fill(template))


def move_calls(world: World, template: str, method: str) -> None:
    """Moves: every destination and resource the provider and the registry tell apart, and If-Match."""
    base = fill(template)
    if method == "POST":
        world.send(method, base + "?dest=dest", [("If-Match", '"stale"')])  # 412 with the current ETag
    for dest in ("nobody", "gone", "boom", "full", "taken", *REFUSING, "acme", "dest"):  # "dest" last: it moves
        world.send(method, base + "?dest=" + dest)
    world.send(method, base)
    if "{resource_path}" in template:
        for resource in ("servers/nope", "servers/sdel"):
            world.send(method, fill(template, resource_path=resource) + "?dest=dest")
        world.send(method, fill(template, tenant_id="moved", resource_path="servers/s9") + "?dest=acme")
    if method == "POST":
        world.send(method, base + "?dest=dest", [("If-Match", '"stale"')])
        world.send(method, base + "?dest=dest", [("If-Match", "garbage")])


def tag_calls(world: World, template: str, method: str) -> None:
    """The tag API: bodies, limits, tags there and not, other servers."""
    if template.endswith("{tag}"):
        for tag in ("red", "absent", "x" * 61):
            world.send(method, fill(template, tag=tag))
        if method == "PUT":
            for tag in ("b", "c", "d"):
                world.send(method, fill(template, tag=tag))
    elif method == "PUT":
        for body in (b'{"tags": ["a", "a"]}', b'{"tags": ["a", "b", "c", "d"]}', b"[", b"x" * 70000, b""):
            world.send(method, fill(template), body=body)
        world.send(method, fill(template), [("Transfer-Encoding", "chunked")])
    world.send(method, fill(template, resource_id="nope"), body=b'{"tags": []}')


def token_calls(world: World, template: str, method: str) -> None:
    """A guarded POST: replayed, reused, in flight, malformed, too large, chunked."""
    url, scoped = fill(template), scope(template)
    world.send(method, url, [("X-Client-Token", "t1"), *scoped], b"{}")
    world.send(method, url, [("X-Client-Token", "t1"), *scoped], b"{}")  # replayed
    world.send(method, url, [("X-Client-Token", "t1"), *scoped], b'{"other": 1}')  # reused
    world.send(method, url, [("X-Client-Token", '"unterminated'), *scoped], b"{}")
    world.send(method, url, [("X-Client-Token", "t2"), *scoped], b'{"pad": "%s"}' % (b"x" * 3000))
    world.send(method, url, [("X-Client-Token", "t3"), ("Transfer-Encoding", "chunked"), *scoped])
    if scoped:
        world.send(method, url, [("X-Client-Token", "t4")], b"{}")  # no tenant to scope it to
    idempotency = world.idempotency
    key = idempotency.codec.store_key("acme", "busy", False)
    lease = Record.lease("another", fingerprint(method, url, "", b"{}", None), time.time())
    idempotency.store.claim(key, idempotency.codec.encode(key, lease), 60)
    world.send(method, url, [("X-Client-Token", "busy"), *scoped], b"{}")


def form_calls(world: World, template: str, method: str) -> None:
    """Form bodies (over 1 MiB, cut short) where admin_cull reads them: a path admin for another method.

    The path parameters take ordinary values, ones read as a version (the
    segment after it as a tenant: ``POST /v2.1/v1/servers``) and the admin
    segment ``action``, until one such path is found.
    """
    names = [name for name in re.findall(r"{(\w+)}", template) if name != "version"]
    for chosen in itertools.product(("x1", "v1", "action"), repeat=len(names)):
        url = fill(template, **dict(zip(names, chosen, strict=True)))
        large = world.environ(method, url, [FORM], b"a=1", CONTENT_LENGTH=str(2**20 + 1))
        status, _, body = world.send(method, url, environ=large)
        if status == 413 and b"tenancy.form-too-large" in body:
            world.send(method, url, environ=world.environ(method, url, [FORM], b"a=1", CONTENT_LENGTH="9"))
            return


def action_calls(world: World, template: str, method: str) -> None:
    """A server's action: a member's, an admin's (also spelt otherwise, or among duplicate keys), bodies
    admin_cull cannot read for the action (not one JSON object, over 1 MiB, a bad or short length, chunked), and a
    form it reads for ``_method`` after the action keys."""
    url = fill(template)
    admin = (
        b'{"os-migrateLive": {"host": null}}',
        b'{"EVACUATE": {}}',
        b'{"reboot": 1, "os-migrateLive": {}, "reboot": 2}',
    )
    json_body = [("Content-Type", "application/json")]
    assert "X-Served-By" in world.send(method, url, json_body, b'{"reboot": {"type": "SOFT"}}')[1]  # a member's
    for body in admin:
        assert world.send(method, url, json_body, body)[0] in (403, 404), body  # culled (cull_status)
    for body in (b"reboot", b'[{"evacuate": {}}]', b"{}" * 2**19 + b" "):
        world.send(method, url, json_body, body)
    for length in ("two", "9"):
        world.send(method, url, environ=world.environ(method, url, body=b"{}", CONTENT_LENGTH=length))
    world.send(method, url, [("Transfer-Encoding", "chunked")])
    # One JSON object (no action key), and a form naming _method more often than admin_cull checks.
    world.send(method, url, [FORM], b'{"note": "%s"}' % (b"_method " * 65))


def exercise(world: World, template: str, method: str, kind: str) -> None:
    """Send *world* every request for the call *method* *template* (a world of *kind*)."""
    method = method.upper()
    if kind != "good":
        return broken(world, template, method)
    generic(world, template, method)
    if world.culled:
        form_calls(world, template, method)
    if "/action/move" in template:
        move_calls(world, template, method)
    elif "/tags" in template:
        tag_calls(world, template, method)
    elif template.endswith("/servers") and method == "POST":
        token_calls(world, template, method)
    elif template.endswith("/action"):  # a server's action (action_collections)
        token_calls(world, template, method)
        action_calls(world, template, method)
    else:
        tenant_calls(world, template, method)


# --- the checks ----------------------------------------------------------------------------------


def problems(document: dict, answer: tuple) -> tuple[tuple | None, list[str]]:
    """``((template, method, key), [what the description does not list])`` of one answer."""
    method, target, status, headers, body = answer
    template = template_of(document, target)
    operation = document["paths"][template].get(method.lower())
    where = "%s %s -> %d" % (method, target[:80], status)
    if operation is None:
        return None, ["%s: %s is not described on %s" % (where, method, template)]
    key = response_key(operation["responses"], status)
    if key is None:
        return None, ["%s: status not listed for %s %s" % (where, method, template)]
    response, found = operation["responses"][key], []
    if key == "default" and "X-Served-By" not in headers:
        # "default" is the service's own answer: a filter's must be listed by its status.
        return None, ["%s: a filter's answer that %s %s does not list" % (where, method, template)]
    listed = {name.lower() for name in response.get("headers", {})}
    others = {name.lower() for name in headers} - UNLISTED - listed
    if key == "default":
        others &= {"idempotent-replayed"}  # the rest are the service's own
    if others:
        found.append("%s: headers %s not listed" % (where, sorted(others)))
    if body and method != "HEAD" and key != "default":
        found += body_problems(document, response, json.loads(body), where)
    return (template, method.lower(), key), found


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Seeded:
    folder = tmp_path_factory.mktemp("seeded")
    migrations.upgrade("sqlite:///%s" % (folder / "template.sqlite"), ["tenants"])
    return Seeded(folder, folder / "template.sqlite")


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def driven(request, seeded, tmp_path_factory):
    """The variant's description, and every answer its pipeline gave to every call of it."""
    variant = request.param
    folder = tmp_path_factory.mktemp(variant)
    (folder / "describe").mkdir()
    first = World(folder / "describe", seeded, variant, "good")
    document = first.describe()
    validate({**document, "info": {"title": variant, "version": "1"}})
    first.close()
    answers: list[tuple] = []
    count, described = 0, set()
    for path, item in document["paths"].items():
        for method in item:
            for kind in ("good", "broken_registry", "broken_stores"):
                count += 1
                (folder / str(count)).mkdir()
                world = World(folder / str(count), seeded, variant, kind)
                try:
                    if kind not in described:  # the description is the chain's, not its stores'
                        assert world.describe() == document
                        described.add(kind)
                    exercise(world, path, method, kind)
                finally:
                    world.close()
                answers += world.answers
    return variant, document, answers


def test_every_answer_is_one_the_description_lists(driven):
    _, document, answers = driven
    found = [problem for answer in answers for problem in problems(document, answer)[1]]
    assert not found, "%d answers the description does not list:\n%s" % (len(found), "\n".join(found[:40]))


def test_every_answer_the_description_lists_is_reached(driven):
    _, document, answers = driven
    reached = {problems(document, answer)[0] for answer in answers} - {None}
    missing = sorted(documented(document) - reached)
    assert not missing, "described but never answered:\n%s" % "\n".join(map(str, missing))
    assert len(reached) > 40  # the set is not empty by accident


def test_every_header_the_description_lists_is_sent(driven):
    _, document, answers = driven
    sent = set()
    for answer in answers:
        key = problems(document, answer)[0]
        if key is not None:
            sent |= {(*key, name.lower()) for name in answer[3]}
    listed = {
        (path, method, status, name.lower())
        for path, item in document["paths"].items()
        for method, operation in item.items()
        for status, response in operation["responses"].items()
        for name in response.get("headers", {})
    }
    missing = sorted(listed - sent)
    assert not missing, "headers described but never sent:\n%s" % "\n".join(map(str, missing))


def test_other_methods_are_refused_with_the_described_methods_allowed(driven, seeded, tmp_path):
    variant, document, _ = driven
    world = World(tmp_path, seeded, variant, "good")
    try:
        for path, item in document["paths"].items():
            if path.endswith("/servers"):
                continue  # the service's own calls
            target = fill(path) + ("?dest=dest" if "/action/move" in path else "")
            status, headers, body = world.send("PATCH", target)
            assert status == 405, (path, status, body)
            assert headers["Allow"] == ", ".join(sorted(method.upper() for method in item)), path
    finally:
        world.close()


def named_codes(document: dict) -> set[tuple[str, str, str, str]]:
    """Every (path, method, status, error code) the description's answers name (a family ends in ``*``)."""
    return {
        (path, method, status, code)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        for status, response in operation["responses"].items()
        for code in re.findall(r"``([a-z0-9.*-]+)``", response["description"])
    }


# nova's fault body names no error code: the variants whose answers carry one.
CODED_VARIANTS = sorted(v for v in VARIANTS if VARIANTS[v].get("common", {}).get("error_format") != "nova")


@pytest.mark.parametrize("driven", CODED_VARIANTS, indirect=True)
def test_every_error_code_the_description_names_is_answered(driven):
    """Each call's answers of each status give every error code that status names (HEAD's have no body)."""
    variant, document, answers = driven
    answered = set()
    for method, target, status, _, body in answers:
        if body and status >= 400:
            errors = json.loads(body).get("errors")
            if errors:
                answered.add((template_of(document, target), method.lower(), status, errors[0]["code"]))

    def reached(path: str, method: str, status: str, code: str) -> bool:
        statuses = {int(status)} if status.isdigit() else set(range(400, 500))
        family = code[:-1] if code.endswith("*") else None
        return any(
            (p, m) == (path, method) and s in statuses and (c == code or (family and c.startswith(family)))
            for p, m, s, c in answered
        )

    missing = sorted(named for named in named_codes(document) if named[1] != "head" and not reached(*named))
    assert not missing, "error codes described but never answered:\n%s" % "\n".join(map(str, missing))
