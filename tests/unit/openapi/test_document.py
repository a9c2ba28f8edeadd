"""The OpenAPI fragments as documents: valid OpenAPI 3.1, shaped by the filters' options, merged safely, pure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate

from tenancy_mw import migrations
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.idempotency import Idempotency
from tenancy_mw.idempotency.filter import REPLAYED_HEADER
from tenancy_mw.openapi import OPENAPI_VERSION, cull, describe_pipeline, merge
from tenancy_mw.openapi._build import component_schemas
from tenancy_mw.openapi._idempotency import REPLAYED_HEADER as DESCRIBED_REPLAYED_HEADER
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tags.model import InvalidTag, validate_tag
from tenancy_mw.tenants.admin.filter import TenantAdmin
from tenancy_mw.tenants.ids import InvalidTenantId, validate_tenant_id
from tenancy_mw.tenants.path_filter import TenantPath
from tenancy_mw.tenants.removal import TenantRemoval
from tests.conftest import require
from tests.support import policy_service
from tests.support.openapi_checks import body_problems, response_key, template_of
from tests.support.widgets import WidgetMoves, WidgetService
from tests.support.wsgi import call, make_environ


def service(environ, start_response):
    start_response("200 OK", [])
    return [b""]


@pytest.fixture
def registry(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "tenants.sqlite")
    migrations.upgrade(url, ["tenants"])
    return url


@pytest.fixture
def admin(registry):
    """A factory of tenant_admin filters over *registry*, closed when the test ends."""
    made = []

    def build(app, **options):
        made.append(TenantAdmin(app, {"connection": registry, **options}))
        return made[-1]

    yield build
    for filter_ in made:
        filter_.close()


def openapi(fragment: dict) -> dict:
    """*fragment* as a whole document, checked by openapi-spec-validator."""
    document = merge({"openapi": OPENAPI_VERSION, "info": {"title": "service", "version": "1"}}, fragment)
    validate(document)
    return document


def test_a_pipeline_without_tenancy_filters_adds_nothing_but_the_shared_schemas():
    fragment = describe_pipeline(service)
    assert fragment["openapi"] == "3.1.0"
    assert fragment["paths"] == {}
    assert set(fragment["components"]["schemas"]) >= {"TenantId", "Tag", "ApiWgErrors", "NovaFault"}
    openapi(fragment)


def test_the_admin_endpoint_describes_the_tenant_admin_api(admin):
    pipeline = TenantPath(admin(Idempotency(TagQueryFilter(service, {}), {"shared_scope": "x"})), {})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers", "volumes"), prefix="/compute/"))
    tenant = document["paths"]["/compute/{version}/{tenant_id}"]
    assert sorted(tenant) == ["delete", "get", "head", "put"]
    assert sorted(tenant["put"]["responses"]) == ["201", "202", "400", "409", "411", "413", "414", "415", "503"]
    assert "Location" in tenant["put"]["responses"]["201"]["headers"]
    assert "/compute/{version}/{tenant_id}/action/restore" in document["paths"]
    # No move_provider: the move URLs are the service's.
    assert not [path for path in document["paths"] if "move" in path]
    volumes = document["paths"]["/compute/{version}/{tenant_id}/volumes"]
    assert {p["name"] for p in volumes["get"]["parameters"]} >= {"tags", "tags-any", "not-tags", "not-tags-any"}
    assert {p["name"] for p in volumes["post"]["parameters"]} >= {"X-Client-Token", "Idempotency-Key"}
    assert "Idempotent-Replayed" in volumes["post"]["responses"]["default"]["headers"]


def test_the_public_endpoint_has_no_admin_calls_but_the_state_check(admin):
    pipeline = AdminCull(TenantPath(admin(service, admin_api="false"), {}), {"cull_status": "403"})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    assert "/{version}/{tenant_id}" not in document["paths"]
    listing = document["paths"]["/{version}/{tenant_id}/servers"]["get"]
    assert {"404", "410", "503", "301"} <= set(listing["responses"])
    assert "tenancy.tenant-not-found" in listing["responses"]["404"]["description"]
    # A tenant named like an admin segment: the call is culled (cull_status 403).
    assert described_problems(document, pipeline, "GET", "/v2.1/action/servers") == []


def test_options_shape_the_description(admin):
    pipeline = TenantPath(
        admin(WidgetService(), move_provider="tests.support.widgets:WidgetMoves", error_format="nova"),
        {"tenant_id_pattern": "[0-9a-f]+", "microversions": "v2.1 compute 2.1 2.95", "error_format": "nova"},
    )
    document = openapi(describe_pipeline(pipeline, prefix="/v2.1"))
    # The mount ends with the version: no version parameter.
    tenant = document["paths"]["/v2.1/{tenant_id}"]
    (tenant_id,) = [p for p in tenant["get"]["parameters"] if p["name"] == "tenant_id"]
    assert tenant_id["schema"]["allOf"][1] == {"pattern": "^(?:[0-9a-f]+)$"}
    assert "/v2.1/{tenant_id}/{resource_path}/action/move" in document["paths"]
    not_found = tenant["get"]["responses"]["404"]
    assert "OpenStack-API-Version" in not_found["headers"]
    assert not_found["content"]["application/json"]["schema"]["required"] == ["itemNotFound"]
    assert any(p["name"] == "OpenStack-API-Version" for p in tenant["get"]["parameters"])


def test_the_token_headers_and_methods_are_the_idempotency_filters():
    guard = Idempotency(TagQueryFilter(service, {}), {"token_headers": " Idempotency-Key ", "methods": "put"})
    document = openapi(describe_pipeline(TenantPath(guard, {}), tag_collections=("servers",)))
    tags = document["paths"]["/{version}/{tenant_id}/servers/{resource_id}/tags"]
    headers = {p["name"] for p in tags["put"]["parameters"] if p["in"] == "header"}
    assert headers == {"Idempotency-Key"}
    assert "Idempotent-Replayed" in tags["put"]["responses"]["200"]["headers"]
    assert not [p for p in tags["get"].get("parameters", []) if p["name"] == "Idempotency-Key"]
    assert "post" not in document["paths"]["/{version}/{tenant_id}/servers"]  # POST is not guarded


def test_no_tenant_in_the_path_puts_the_collections_under_the_version():
    pipeline = TenantPath(TagQueryFilter(service, {}), {"tenant_in_path": "never", "token_tenant": "true"})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    assert sorted(document["paths"]) == [
        "/{version}/servers",
        "/{version}/servers/{resource_id}/tags",
        "/{version}/servers/{resource_id}/tags/{tag}",
    ]


@pytest.mark.parametrize(
    ("layout", "collection", "forms"),
    [
        ("optional", "servers", ["/{version}/servers", "/{version}/{tenant_id}/servers"]),
        ("optional", "widgets", ["/{version}/{tenant_id}/widgets"]),  # /v2.1/widgets is the tenant widgets
        ("always", "servers", ["/{version}/{tenant_id}/servers"]),
        ("never", "servers", ["/{version}/servers"]),
    ],
)
def test_each_layout_describes_the_forms_it_lets_through(layout, collection, forms):
    pipeline = TenantPath(TagQueryFilter(service, {}), {"tenant_in_path": layout})
    document = openapi(describe_pipeline(pipeline, tag_collections=(collection,)))
    suffixes = ("", "/{resource_id}/tags", "/{resource_id}/tags/{tag}")
    assert sorted(document["paths"]) == sorted(form + suffix for form in forms for suffix in suffixes)
    for form in forms:
        # Each form the filter lets through reaches the service.
        for target in (fill_template(form), fill_template(form + "/{resource_id}/tags/{tag}")):
            status, _, _ = call(pipeline, make_environ("GET", target))
            assert status == 200, target


def fill_template(template: str) -> str:
    """*template* with a value in each parameter."""
    values = {"version": "v2.1", "tenant_id": "acme", "resource_id": "s1", "tag": "red"}
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], template)


def described_problems(document: dict, app, method: str, target: str, headers=()) -> list[str]:
    """Send *app* one request; what *document* does not list of the filter's answer (status, error code, body)."""
    status, _, body = call(app, make_environ(method, target, headers))
    operation = document["paths"][template_of(document, target)][method.lower()]
    key = response_key(operation["responses"], status)
    if key in (None, "default"):
        return ["%s %s -> %d: not listed" % (method, target, status)]
    return body_problems(document, operation["responses"][key], json.loads(body), "%s %s" % (method, target))


def seed(registry: str, *requests: tuple[str, str]) -> None:
    """Make tenants through an admin endpoint of *registry*."""
    seeder = TenantAdmin(service, {"connection": registry})
    try:
        for method, target in requests:
            assert call(TenantPath(seeder, {}), make_environ(method, target))[0] < 300, (method, target)
    finally:
        seeder.close()


def test_the_tenant_of_a_token_is_checked_where_the_path_has_none(admin, registry):
    seed(registry, ("PUT", "/v2.1/gone"), ("DELETE", "/v2.1/gone"))
    layout = {"tenant_in_path": "never"}
    pipeline = TenantPath(admin(service, admin_api="false", **layout), {**layout, "token_tenant": "true"})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    listing = document["paths"]["/{version}/servers"]["get"]
    assert {"404", "410", "503"} <= set(listing["responses"])
    assert "301" not in listing["responses"]  # the token's tenant: its moves cannot be told from the URL
    for project in ("gone", "nobody"):
        token = [("X-Identity-Status", "Confirmed"), ("X-Project-Id", project)]
        assert described_problems(document, pipeline, "GET", "/v2.1/servers", token) == []


def test_tenant_admin_alone_describes_its_own_reading_of_the_path(admin, registry):
    pipeline = admin(service, admin_api="false", tenant_id_pattern="[a-z0-9-]+")
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    for target in ("/v2.1/Not_Matching/servers", "/v2.1/a%2541/servers", "/v2.1/%s/servers" % ("x" * 256)):
        assert described_problems(document, pipeline, "GET", target) == []


class PasteStyle:
    """A middleware that keeps the app it wraps as ``app`` (paste's, webob's), and whose other attributes raise."""

    def __init__(self, app) -> None:
        self.app = app

    def __getattr__(self, name: str):
        raise RuntimeError("no attribute %s here" % name)

    def __call__(self, environ, start_response):
        return self.app(environ, start_response)


def test_the_filters_behind_a_middleware_keeping_app_are_described():
    pipeline = TenantPath(PasteStyle(TagQueryFilter(service, {})), {})
    listing = describe_pipeline(pipeline, tag_collections=("servers",))["paths"]["/{version}/{tenant_id}/servers"]
    assert "tags-any" in {parameter["name"] for parameter in listing["get"]["parameters"]}


def test_merge_adds_fragments_and_refuses_a_component_described_twice_differently():
    base = {"openapi": OPENAPI_VERSION, "info": {"title": "s", "version": "1"}, "paths": {"/x": {"get": {}}}}
    fragment = describe_pipeline(TenantPath(TagQueryFilter(service, {}), {}), tag_collections=("servers",))
    merged = merge(base, fragment, fragment)  # the same fragment twice: the same descriptions
    assert "/x" in merged["paths"]
    assert "/{version}/{tenant_id}/servers" in merged["paths"]
    assert merged["paths"]["/{version}/{tenant_id}/servers"] == fragment["paths"]["/{version}/{tenant_id}/servers"]
    assert base["paths"] == {"/x": {"get": {}}}  # not changed
    clashing = {"components": {"schemas": {"Tag": {"type": "integer"}}}}
    with pytest.raises(ValueError, match="components/schemas/Tag is described differently"):
        merge(merged, clashing)
    with pytest.raises(ValueError, match="the document is OpenAPI 3.0.3"):
        merge(dict(base, openapi="3.0.3"), fragment)


def test_merge_adds_the_filters_parameters_and_answers_to_the_services_own_call():
    """The service describes its list; the fragment adds the tag query and the filters' answers to it."""
    path = "/{version}/{tenant_id}/servers"
    own_bad_request = {
        "description": "The service's own refusal.",
        "content": {"application/json": {"schema": {"type": "object", "required": ["badRequest"]}}},
    }
    own_listing = {
        "operationId": "listServers",
        "parameters": [
            {"name": "limit", "in": "query", "schema": {"type": "integer"}},
            {"name": "tags", "in": "query", "schema": {"maxLength": 1000}},
        ],
        "responses": {
            "200": {"description": "The servers."},
            "400": own_bad_request,
            "default": {"description": "The service's errors."},
        },
    }
    own = {"openapi": OPENAPI_VERSION, "info": {"title": "s", "version": "1"}, "paths": {path: {"get": own_listing}}}
    fragment = describe_pipeline(TenantPath(TagQueryFilter(service, {}), {}), tag_collections=("servers",))
    document = merge(own, fragment)
    validate(document)
    listing = document["paths"][path]["get"]
    assert listing["operationId"] == "listServers"  # the service's own
    assert listing["responses"]["200"] == own_listing["responses"]["200"]
    assert listing["responses"]["default"] == own_listing["responses"]["default"]
    # A bad tag query (tag_query's answer) or the service's own refusal: either body.
    either = listing["responses"]["400"]["content"]["application/json"]["schema"]["anyOf"]
    theirs = fragment["paths"][path]["get"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert either == [own_bad_request["content"]["application/json"]["schema"], theirs]
    names = [parameter["name"] for parameter in listing["parameters"]]
    assert names[:2] == ["limit", "tags"]
    assert {"tags-any", "not-tags", "not-tags-any"} <= set(names)
    assert len(names) == len(set(names))  # nothing listed twice
    # tags: both describe it, so a value must satisfy both (tag_query checks it before the service).
    (tags,) = [parameter for parameter in listing["parameters"] if parameter["name"] == "tags"]
    (their_tags,) = [p for p in fragment["paths"][path]["get"]["parameters"] if p["name"] == "tags"]
    assert tags["schema"] == {"allOf": [{"maxLength": 1000}, their_tags["schema"]]}
    # The fragment's default stands for the service's answers: with no service description, it stays.
    assert "default" in merge({"openapi": OPENAPI_VERSION}, fragment)["paths"][path]["get"]["responses"]
    without_default = dict(own_listing, responses={"200": {"description": "The servers."}})
    only_own = merge(dict(own, paths={path: {"get": without_default}}), fragment)
    assert "default" not in only_own["paths"][path]["get"]["responses"]


def test_cull_leaves_out_what_the_public_admin_cull_refuses_and_the_links_to_it():
    rules = "DELETE /{version}/os-services/*"
    public = TenantPath(AdminCull(service, {"rules": rules}), {})
    get = {"operationId": "showService", "responses": {"200": {"description": "A service."}}}
    delete = {"operationId": "deleteService", "responses": {"204": {"description": "Deleted."}}}
    get["responses"]["200"]["links"] = {
        "delete": {"operationId": "deleteService"},
        "show": {"operationId": "showService"},
    }
    document = {"openapi": OPENAPI_VERSION, "paths": {"/{version}/os-services/{id}": {"get": get, "delete": delete}}}
    kept = cull(document, public)["paths"]["/{version}/os-services/{id}"]
    assert sorted(kept) == ["get"]
    assert kept["get"]["responses"]["200"]["links"] == {"show": {"operationId": "showService"}}
    assert cull(document, TenantPath(service, {})) == document  # no admin_cull: nothing culled


def test_cull_reads_the_version_segment_as_the_cullers_version_pattern_does():
    # With version_pattern = v2(.N): {version} judged as v1 is no version, and the rule never matched.
    public = AdminCull(service, {"rules": "DELETE /{version}/os-services/*", "version_pattern": r"v2(\.[0-9]+)?"})
    assert public.judge(make_environ("DELETE", "/v2.1/os-services/7")) is not None  # the filter refuses it
    assert public.judge(make_environ("GET", "/v2.1/os-services/7")) is None
    document = {
        "openapi": OPENAPI_VERSION,
        "paths": {
            "/compute/{version}/os-services/{id}": {
                "get": {"responses": {"200": {"description": "A service."}}},
                "delete": {"responses": {"204": {"description": "Deleted."}}},
            }
        },
    }
    assert sorted(cull(document, public)["paths"]["/compute/{version}/os-services/{id}"]) == ["get"]


SAMPLE_IDS = ["acme", "Bob's Tenant", "∑∞", "∑" * 255, "x" * 255, "100%", "a.b", "...", "",
              "x" * 256, "a/b", ".", "..", "a%2Fb", "a%u0041", "tab\there", "del\x7f", "acme\n",
              "\u2028%41", "a\u2029"]  # fmt: skip
# Characters the rules single out, and ones regular expression dialects read differently.
RULE_CHARACTERS = st.sampled_from(list("a.%/,0Fu\n\r\x00\x7f\u2028\u2029∑") + ["\U0001f600"])


def valid(check, refusal, value) -> bool:
    """Whether *check* (validate_tenant_id, validate_tag) takes *value*."""
    try:
        check(value)
    except refusal:
        return False
    return True


@pytest.mark.parametrize("value", SAMPLE_IDS)
def test_the_tenant_id_schema_is_the_rules_of_validate_tenant_id(value):
    schema = component_schemas()["TenantId"]
    assert jsonschema.Draft202012Validator(schema).is_valid(value) is valid(validate_tenant_id, InvalidTenantId, value)


@pytest.mark.parametrize(
    "value", ["red", "Red ", "x" * 60, "x" * 61, "a,b", "a/b", ".", "..", "%41", "", "c\x01", "red\n", "\u2028%41"]
)
def test_the_tag_schema_is_the_rules_of_validate_tag(value):
    schema = component_schemas()["Tag"]
    assert jsonschema.Draft202012Validator(schema).is_valid(value) is valid(validate_tag, InvalidTag, value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(RULE_CHARACTERS, max_size=8), st.text(max_size=70)))
def test_the_schemas_agree_with_the_validators_on_any_text(value):
    schemas = component_schemas()
    tenant_schema = jsonschema.Draft202012Validator(schemas["TenantId"])
    assert tenant_schema.is_valid(value) is valid(validate_tenant_id, InvalidTenantId, value)
    tag_schema = jsonschema.Draft202012Validator(schemas["Tag"])
    if valid(validate_tag, InvalidTag, value):
        assert tag_schema.is_valid(value)
    elif len(value.encode("utf-8", "surrogatepass")) <= 60:
        # JSON Schema counts characters: the 60 bytes of UTF-8 are the description's, not maxLength's.
        assert not tag_schema.is_valid(value)


LAYOUT_SEGMENTS = ["acme", "flavors", "flavors.json", "flavors.", "flavors.x.json", "Flavors", "os-hosts", "os-hostsx",
                   "default-types.xml", "servers"]  # fmt: skip


def tenant_id_schema(document: dict, path: str) -> dict:
    """The schema of *path*'s tenant_id parameter, with the components it refers to."""
    (parameter,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "tenant_id"]
    return {**parameter["schema"], "components": document["components"]}


@pytest.mark.parametrize("segment", LAYOUT_SEGMENTS)
def test_the_tenant_id_parameter_excludes_what_the_layout_reads_as_a_collection(segment):
    pipeline = TenantPath(TagQueryFilter(service, {}), {"extra_tenantless_collections": "os-hosts"})
    document = describe_pipeline(pipeline, tag_collections=("servers",))
    schema = tenant_id_schema(document, "/{version}/{tenant_id}/servers")
    tenant = not pipeline.layout.is_collection(segment)
    assert jsonschema.Draft202012Validator(schema).is_valid(segment) is tenant
    always = TenantPath(TagQueryFilter(service, {}), {"tenant_in_path": "always"})
    schema = tenant_id_schema(describe_pipeline(always, tag_collections=("servers",)), "/{version}/{tenant_id}/servers")
    assert jsonschema.Draft202012Validator(schema).is_valid(segment)


def test_the_schema_patterns_read_the_same_in_ecma_262():
    """JSON Schema's patterns are ECMA-262 regular expressions: a JavaScript client reads them as jsonschema does."""
    require(shutil.which("node") is not None, "node (Debian package nodejs; make test installs it)")
    schemas = component_schemas()
    values = SAMPLE_IDS + ["red\n", "\u2028%41", "x\u2029%u0041", "\u2028"]
    script = (
        "const [patterns, values] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(values.map(v => patterns.map(p => new RegExp(p, 'u').test(v)))));"
    )
    document = describe_pipeline(TenantPath(service, {}), tag_collections=("servers",))
    layout = tenant_id_schema(document, "/{version}/{tenant_id}/servers")["allOf"][1]["not"]["pattern"]
    values += LAYOUT_SEGMENTS
    patterns = [schemas["TenantId"]["pattern"], schemas["Tag"]["pattern"], layout]
    result = subprocess.run(
        ["node", "-e", script], input=json.dumps([patterns, values]), capture_output=True, text=True, check=True
    )
    python = [[re.search(pattern, value) is not None for pattern in patterns] for value in values]
    assert json.loads(result.stdout) == python
    assert python[values.index("\u2028%41")][:2] == [False, False]


def test_every_filter_has_a_describer():
    from tenancy_mw import opts
    from tenancy_mw.openapi import _DESCRIBERS

    assert {cls.opt_group for cls in opts.FILTERS} == set(_DESCRIBERS)


def test_the_replay_header_is_the_filters():
    assert DESCRIBED_REPLAYED_HEADER == REPLAYED_HEADER


def test_the_package_imports_without_webob_and_sqlalchemy():
    code = (
        "import sys\n"
        "for name in ('webob', 'sqlalchemy', 'oslo_middleware', 'paste'):\n"
        "    sys.modules[name] = None  # an import of it fails\n"
        "import tenancy_mw.openapi as o\n"
        "print(o.describe_pipeline(object())['openapi'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3.1.0"


def test_the_tag_apis_errors_are_described_in_the_format_the_service_gives_it():
    """The tag API is the service's component, not a filter of the chain: its error_format is given."""
    pipeline = TenantPath(TagQueryFilter(service, {}), {})
    tag_path = "/{version}/{tenant_id}/servers/{resource_id}/tags"
    for error_format, shape in (("api-wg", "ApiWgErrors"), ("nova", "itemNotFound")):
        document = describe_pipeline(pipeline, tag_collections=("servers",), tag_error_format=error_format)
        answer = json.dumps(document["paths"][tag_path]["get"]["responses"]["404"])
        assert shape in answer, (error_format, answer)
    with pytest.raises(ValueError, match="tag_error_format 'xml' is none of api-wg, nova"):
        describe_pipeline(pipeline, tag_collections=("servers",), tag_error_format="xml")


def test_merge_reads_a_referenced_parameter():
    """A service's ``$ref`` to its own parameter and the fragment's inline one of the same name are one
    parameter (listed twice, the document would be invalid OpenAPI)."""
    path = "/{version}/{tenant_id}/servers"
    tenant = {"name": "tenant_id", "in": "path", "required": True, "schema": {"enum": ["acme", "fuzz"]}}
    own = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "s", "version": "1"},
        "paths": {
            path: {
                "get": {
                    "parameters": [{"$ref": "#/components/parameters/Tenant"}],
                    "responses": {"200": {"description": "The servers."}},
                }
            }
        },
        "components": {"parameters": {"Tenant": tenant}},
    }
    fragment = describe_pipeline(TenantPath(TagQueryFilter(service, {}), {}), tag_collections=("servers",))
    document = merge(own, fragment)
    validate(document)
    parameters = document["paths"][path]["get"]["parameters"]
    (tenant_id,) = [p for p in parameters if p.get("name") == "tenant_id" or "$ref" in p]
    assert {"enum": ["acme", "fuzz"]} in tenant_id["schema"]["allOf"]  # the service's values, within the filter's


def test_merge_an_answer_header_both_describe_takes_either_value():
    """The service's ``Retry-After`` is seconds, the filter's a date: one status both describe has either."""
    seconds, date = {"type": "integer"}, {"type": "string", "format": "date-time"}

    def answer(name, schema):
        return {"paths": {"/a": {"get": {"responses": {"503": {"description": "Later.", "headers": {
            name: {"required": True, "schema": schema}}}}}}}}  # fmt: skip

    merged = merge(dict(answer("Retry-After", seconds), openapi=OPENAPI_VERSION), answer("retry-after", date))
    header = merged["paths"]["/a"]["get"]["responses"]["503"]["headers"]["Retry-After"]
    assert header == {"required": True, "schema": {"anyOf": [seconds, date]}}


def test_merge_refuses_a_path_both_spell_with_other_parameter_names():
    """``/{version}/{project_id}/servers`` and the fragment's ``/{version}/{tenant_id}/servers`` are one
    path: both in the document is invalid OpenAPI, and the service's list would not gain the tag query."""
    listing = {"get": {"responses": {"200": {"description": "The servers."}}}}
    own = {"openapi": OPENAPI_VERSION, "paths": {"/{version}/{project_id}/servers": listing}}
    fragment = describe_pipeline(TenantPath(TagQueryFilter(service, {}), {}), tag_collections=("servers",))
    with pytest.raises(ValueError, match=r"/\{version\}/\{tenant_id\}/servers is described as .*project_id"):
        merge(own, fragment)


class RemovingWidgetMoves(WidgetMoves, TenantRemoval):
    """A move provider that also hides, restores and purges a tenant's widgets (a TenantRemoval)."""

    def hide_resources(self, tenant_id: str) -> None:
        """Nothing to hide."""

    def restore_resources(self, tenant_id: str) -> None:
        """Nothing to restore."""

    def purge_resources(self, tenant_id: str) -> None:
        """Nothing to purge."""


def codes_of(answer: dict) -> list[str]:
    """The error codes an answer's description names."""
    return re.findall(r"``([a-z0-9.*-]+)``", answer["description"])


def test_only_the_codes_the_options_make_possible_are_named(admin):
    plain = openapi(describe_pipeline(TenantPath(admin(WidgetService()), {}), tag_collections=("servers",)))
    removing = admin(WidgetService(), move_provider="tests.unit.openapi.test_document:RemovingWidgetMoves")
    removal = openapi(describe_pipeline(TenantPath(removing, {}), tag_collections=("servers",)))
    shared = admin(service, admin_api="false", state_memcached_servers="127.0.0.1:9", state_store_timeout="0.1")
    states = openapi(describe_pipeline(TenantPath(shared, {}), tag_collections=("servers",)))
    tenant, listing = "/{version}/{tenant_id}", "/{version}/{tenant_id}/servers"
    # removal-failed: only a TenantRemoval hides and restores a tenant's resources.
    assert "tenancy.removal-failed" not in codes_of(plain["paths"][tenant]["delete"]["responses"]["503"])
    assert "tenancy.removal-failed" in codes_of(removal["paths"][tenant]["delete"]["responses"]["503"])
    # state-store-unavailable: only with state_memcached_servers (fail_closed).
    assert "tenancy.state-store-unavailable" not in codes_of(plain["paths"][listing]["get"]["responses"]["503"])
    assert "tenancy.state-store-unavailable" in codes_of(states["paths"][listing]["get"]["responses"]["503"])
    # method-override-refused: only with method_override = refuse.
    for options, named in (({}, False), ({"method_override": "refuse"}, True)):
        culled = openapi(describe_pipeline(AdminCull(TenantPath(service, {}), options), tag_collections=("servers",)))
        codes = codes_of(culled["paths"][listing]["get"]["responses"]["400"])
        assert ("tenancy.method-override-refused" in codes) == named
        # It reads a form for a _method field only when it judges overrides (not when it refuses them).
        assert ("tenancy.unreadable-form" in codes) != named
        assert ("413" in culled["paths"][listing]["get"]["responses"]) != named
    # A long mount makes every path deeper than max_segments.
    culler = AdminCull(TenantPath(service, {}), {"max_segments": "8"})
    for prefix, deep in (("/a/b/c/d/e", False), ("/a/b/c/d/e/f", True)):
        mounted = openapi(describe_pipeline(culler, tag_collections=("servers",), prefix=prefix))
        codes = codes_of(mounted["paths"][prefix + "/{version}/servers"]["get"]["responses"]["400"])
        assert ("tenancy.path-too-deep" in codes) == deep
        target = prefix + "/v2.1/servers"
        status, _, body = call(culler, make_environ("GET", target, [("Accept", "application/json;version=2.1")]))
        assert (status == 400 and json.loads(body)["errors"][0]["code"] == "tenancy.path-too-deep") == deep


def test_admin_culls_form_answers_are_named_where_it_reads_forms_under_its_own_version_pattern():
    """With ``version_pattern = v2(.N)`` the filter still reads a form on a tenant "v2.1"'s servers list (a
    ``_method`` could make it an admin call): asked with ``v1`` for ``{version}``, it read no version there."""
    options = {"version_pattern": r"v2(\.[0-9]+)?"}
    public = AdminCull(TenantPath(TagQueryFilter(service, {}), dict(options)), dict(options))
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    status, _, body = call(
        public, make_environ("GET", "/v2.1/v2.1/servers", form, b"_method=PUT&x=" + b"a" * (1 << 20))
    )
    assert status == 413, body
    fragment = describe_pipeline(public, tag_collections=("servers",))
    listing = fragment["paths"]["/{version}/{tenant_id}/servers"]["get"]
    assert "tenancy.form-too-large" in listing["responses"]["413"]["description"]


def test_admin_culls_form_answers_are_named_where_it_reads_forms():
    pipeline = AdminCull(TenantPath(Idempotency(TagQueryFilter(service, {}), {"backend": "memory"}), {}), {})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    form = {
        (method, path)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if "tenancy.form-too-large" in codes_of(operation["responses"].get("413", {"description": ""}))
    }
    # /v2.1/servers reads as a tenant call, PUT/DELETE of tenant servers; a tenant named like a version does the same.
    assert {
        ("get", "/{version}/servers"),
        ("post", "/{version}/servers"),
        ("post", "/{version}/{tenant_id}/servers"),
    } <= form
    # A tag named action ends the path in .../action, which GET of the action namespace culls.
    assert ("put", "/{version}/{tenant_id}/servers/{resource_id}/tags/{tag}") in form
    # DELETE of the tags of a resource: never admin for another method (a resource named v1 is culled itself).
    assert ("delete", "/{version}/{tenant_id}/servers/{resource_id}/tags") not in form
    for method, path in form:
        assert "tenancy.unreadable-form" in codes_of(document["paths"][path][method]["responses"]["400"])
    body = b"a=1" * 400000
    for target in ("/v2.1/servers", "/v2.1/v1/servers"):
        environ = make_environ("POST", target, [("Content-Type", "application/x-www-form-urlencoded")], body)
        status, _, answer = call(pipeline, environ)
        assert (status, json.loads(answer)["errors"][0]["code"]) == (413, "tenancy.form-too-large")


def test_a_token_with_no_scope_is_only_refused():
    guard = Idempotency(TagQueryFilter(service, {}), {"backend": "memory", "keystone_scope": "false"})
    pipeline = TenantPath(guard, {})
    document = openapi(describe_pipeline(pipeline, tag_collections=("servers",)))
    tenantless, under_tenant = (
        document["paths"][p]["post"] for p in ("/{version}/servers", "/{version}/{tenant_id}/servers")
    )
    # Without a tenant (and no shared_scope, no keystone_scope) every token is refused before the body is read.
    assert sorted(tenantless["responses"]) == ["400", "414", "default"]
    assert "Idempotent-Replayed" not in tenantless["responses"]["default"].get("headers", {})
    assert {"409", "413", "Idempotent-Replayed"} <= set(under_tenant["responses"]) | set(
        under_tenant["responses"]["default"]["headers"]
    )
    token = [("X-Client-Token", "t1"), ("Content-Type", "application/json")]
    assert described_problems(document, pipeline, "POST", "/v2.1/servers", token) == []


ACTION = "/{version}/{tenant_id}/servers/{resource_id}/action"
KEYED = "POST /servers/*/action (os-migrateLive, evacuate)"


def sent(app, target: str, body: bytes, headers=()) -> tuple[int, str | None]:
    """The status and error code (API-WG shape) of *app*'s answer to a POST of *body* to *target*."""
    status, _, answer = call(app, make_environ("POST", target, headers, body))
    errors = json.loads(answer).get("errors") if answer.startswith(b"{") else None
    return status, errors[0]["code"] if errors else None


@pytest.mark.parametrize("cull_status", ["404", "403"])
def test_admin_culls_body_answers_are_named_on_the_calls_its_keyed_rules_match(cull_status):
    culler = AdminCull(TenantPath(service, {}), {"rules": KEYED, "cull_status": cull_status})
    fragment = describe_pipeline(culler, tag_collections=("servers",), action_collections=("servers", "volumes"))
    document = openapi(fragment)
    responses = document["paths"][ACTION]["post"]["responses"]
    culled = "tenancy.not-found" if cull_status == "404" else "tenancy.admin-call"
    # The cull of an admin action names the rules' keys as they are written.
    (by_key,) = [d for d in responses[cull_status]["description"].split("\n\n") if "action as a top-level key" in d]
    assert "os-migrateLive, evacuate" in by_key
    assert culled in by_key
    assert "tenancy.unreadable-body" in codes_of(responses["400"])
    assert codes_of(responses["411"]) == ["tenancy.unreadable-body"]
    assert codes_of(responses["413"]) == ["tenancy.body-too-large"]  # the JSON body is read before any form
    # What the filter answers there is what the description lists, status and code.
    target = "/v2.1/acme/servers/7/action"
    answers = {
        b'{"evacuate": {}}': (int(cull_status), culled),
        b'{"reboot": 1, "OS-MIGRATELIVE": {}, "reboot": 2}': (int(cull_status), culled),
        b'{"reboot": {}}': (200, None),
        b"reboot": (400, "tenancy.unreadable-body"),
        b"{}" * 2**19 + b" ": (413, "tenancy.body-too-large"),
    }
    for body, expected in answers.items():
        assert sent(culler, target, body) == expected, body
        if expected[0] != 200:
            assert expected[1] in codes_of(responses[str(expected[0])])
    assert sent(culler, target, b"", [("Transfer-Encoding", "chunked")]) == (411, "tenancy.unreadable-body")
    # No keyed rule matches the volumes' action, nor any other call: nothing of the body is said there.
    keyed = {(path, "post") for path in (ACTION, "/{version}/servers/{resource_id}/action")}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            named = str(operation["responses"])
            assert ("tenancy.unreadable-body" in named) == ((path, method) in keyed), (method, path)
            assert ("action as a top-level key" in named) == ((path, method) in keyed), (method, path)
            assert "tenancy.body-too-large``" not in named or (path, method) in keyed, (method, path)
    assert sent(culler, "/v2.1/acme/volumes/7/action", b'{"evacuate": {}}') == (200, None)


def test_keyed_answers_are_found_in_nova_shape_and_for_the_methods_an_override_names():
    """The nova shape names no error code: a body that is no JSON is refused 400 only where it is read.  A call of
    another method is read as the keyed rule's method when an override names it."""
    rules = "POST /servers/*/tags/* (evacuate)"
    culler = AdminCull(TenantPath(service, {}), {"rules": rules, "error_format": "nova"})
    document = openapi(describe_pipeline(culler, tag_collections=("servers",)))
    put = document["paths"]["/{version}/{tenant_id}/servers/{resource_id}/tags/{tag}"]["put"]["responses"]
    assert "evacuate" in put["404"]["description"]
    assert "411" in put
    override = [("X-HTTP-Method-Override", "POST"), ("Content-Type", "application/json")]
    status, _, body = call(culler, make_environ("PUT", "/v2.1/acme/servers/7/tags/red", override, b"[]"))
    assert (status, list(json.loads(body))) == (400, ["badRequest"])
    # Under method_override = refuse the override is refused, never judged as POST: no body is read for it.
    refusing = AdminCull(TenantPath(service, {}), {"rules": rules, "method_override": "refuse"})
    put = openapi(describe_pipeline(refusing, tag_collections=("servers",)))["paths"][
        "/{version}/{tenant_id}/servers/{resource_id}/tags/{tag}"
    ]["put"]["responses"]
    assert "411" not in put
    assert "evacuate" not in put["404"]["description"]


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """The test service's policy defaults registered as an ``oslo.policy.policies`` entry point."""
    policy_service.install(tmp_path_factory.mktemp("site"))
    return policy_service.NAMESPACE


def test_the_keys_of_rules_derived_from_policy_are_named(registered):
    culler = AdminCull(TenantPath(service, {}), {"policy_namespace": registered})
    document = openapi(describe_pipeline(culler, action_collections=("things",)))
    action = document["paths"]["/{version}/{tenant_id}/things/{resource_id}/action"]["post"]["responses"]
    (by_key,) = [d for d in action["404"]["description"].split("\n\n") if "action as a top-level key" in d]
    assert "purge, reset-state" in by_key
    assert "start" not in by_key
    assert sent(culler, "/v2.1/acme/things/7/action", b'{"reset-state": {}}') == (404, "tenancy.not-found")
    assert sent(culler, "/v2.1/acme/things/7/action", b'{"start": null}') == (200, None)


def test_a_keyed_admin_cull_in_front_answers_the_411_of_the_filters_after_it_unless_admins_pass():
    for admin_roles, idempotency_411 in (("", False), ("admin", True)):
        guard = Idempotency(TagQueryFilter(service, {}), {"backend": "memory"})
        culler = AdminCull(TenantPath(guard, {}), {"rules": KEYED, "admin_roles": admin_roles})
        responses = openapi(describe_pipeline(culler, action_collections=("servers",)))["paths"][ACTION]["post"][
            "responses"
        ]
        assert ("idempotency.length-required" in codes_of(responses["411"])) == idempotency_411
        # A confirmed admin's body is not read for its keys: a form over 1 MiB is read for _method first.
        assert ("tenancy.form-too-large" in codes_of(responses["413"])) == idempotency_411
        chunked = [("Transfer-Encoding", "chunked"), ("X-Client-Token", "t1")]
        admin = [("X-Identity-Status", "Confirmed"), ("X-Roles", "admin")] if admin_roles else []
        status, code = sent(culler, "/v2.1/acme/servers/7/action", b"", chunked + admin)
        assert status == 411
        assert code in codes_of(responses["411"])
        assert (code == "idempotency.length-required") == idempotency_411


def test_cull_keeps_a_call_a_keyed_rule_culls_only_for_some_bodies():
    path = "/{version}/servers/{server_id}/action"
    document = {"openapi": OPENAPI_VERSION, "paths": {path: {"post": {"responses": {"202": {"description": "Done."}}}}}}
    keyed = AdminCull(service, {"rules": KEYED})
    assert cull(document, keyed) == document
    assert sent(keyed, "/v2.1/servers/7/action", b'{"reboot": {}}') == (200, None)  # a member's action passes
    unkeyed = AdminCull(service, {"rules": "POST /servers/*/action"})
    assert cull(document, unkeyed)["paths"] == {}
