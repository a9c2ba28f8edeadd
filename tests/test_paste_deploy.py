"""The recipe and the checker (``tenancy-mw-manage paste add|check``) on nova's and cinder's installed files.

The paste files and policy defaults are the real ones of an installed nova
34.0.0 and cinder 29.0.0: ``installed_paste(service)`` reads
``<venv>/etc/<service>/api-paste.ini`` of the services' virtualenv
(the ``openstack_venv`` fixture, :mod:`tests.support.openstack`).  The checker's other
findings are each shown on a small paste file written here.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest
import webob
from paste.deploy import loadfilter

from tenancy_mw.paste_deploy import add_filters, check
from tests.support.openstack import ATTRIBUTE_POLICIES, policy_operations

MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")
PROJECT = "6f2c1e0a9b8d4c7e8f1a2b3c4d5e6f70"
NOVA_V21 = "osapi_compute[/v2.1/+] > openstack_compute_api_v21[keystone] > osapi_compute_app_v21"
NOVA_LEGACY = "osapi_compute[/v2/+] > openstack_compute_api_v21_legacy_v2_compatible[keystone] > osapi_compute_app_v21"
ALL_FILTERS = ["admin_cull", "tenant_path", "idempotency", "tag_query"]

# nova's and cinder's mounts: their urlmap puts the version in SCRIPT_NAME.
MOUNTS = {"nova": ("/v2.1", "/v2"), "cinder": ("/v3",)}


@pytest.fixture(scope="module")
def installed_paste(openstack_venv):
    """``installed_paste(service)``: the text of that service's installed api-paste.ini."""

    def read(service: str) -> str:
        return (openstack_venv / "etc" / service / "api-paste.ini").read_text()

    return read


def manage(*args: str) -> subprocess.CompletedProcess:
    """Run the installed console command."""
    return subprocess.run([MANAGE, *args], capture_output=True, text=True, timeout=120)


def pipeline(text: str, section: str, key: str) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser.get(section, key).split()


def write(tmp_path: Path, text: str, name: str = "api-paste.ini") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the recipe ---------------------------------------------------------------------------------


def test_recipe_puts_the_filters_after_authtoken_in_both_nova_composites(installed_paste, tmp_path):
    original = installed_paste("nova")
    source = write(tmp_path, original)
    result = manage("paste", "add", "--service", "nova", str(source), "--output", str(tmp_path / "out.ini"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "out.ini").read_text()
    head = "cors http_proxy_to_wsgi compute_req_id faultwrap request_log sizelimit osprofiler authtoken".split()
    assert pipeline(text, "composite:openstack_compute_api_v21", "keystone") == (
        head + ALL_FILTERS + ["keystonecontext", "osapi_compute_app_v21"]
    )
    assert pipeline(text, "composite:openstack_compute_api_v21_legacy_v2_compatible", "keystone") == (
        head + ALL_FILTERS + ["keystonecontext", "legacy_v2_compatible", "osapi_compute_app_v21"]
    )
    # Every other line of nova's file, comments included, is still there, in order.
    kept = [line for line in original.splitlines() if not line.startswith("keystone = ")]
    out_lines = iter(text.splitlines())
    assert all(any(line == out for out in out_lines) for line in kept)
    assert text.count("\nkeystone = ") == 2


def test_recipe_without_output_prints_and_leaves_the_file_alone(installed_paste, tmp_path):
    source = write(tmp_path, installed_paste("nova"))
    result = manage("paste", "add", "--service", "nova", str(source))
    assert result.returncode == 0, result.stderr
    assert "[filter:admin_cull]" in result.stdout
    assert source.read_text() == installed_paste("nova")


def test_recipe_covers_every_cinder_key_and_keeps_token_trust_off_without_authtoken(installed_paste):
    text = add_filters(installed_paste("cinder"), "cinder")
    head = "request_id cors http_proxy_to_wsgi faultwrap sizelimit osprofiler".split()
    composite = "composite:openstack_volume_api_v3"
    for key in ("keystone", "keystone_nolimit"):
        expected = head + ["authtoken", "admin_cull", "tenant_path", "idempotency", "keystonecontext", "apiv3"]
        assert pipeline(text, composite, key) == expected
    for key in ("noauth", "noauth_include_project_id"):
        expected = head + [key, "admin_cull", "tenant_path_noauth", "idempotency_noauth", "apiv3"]
        assert pipeline(text, composite, key) == expected
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    assert dict(parser["filter:tenant_path_noauth"]) == {
        "use": "tenant_path",
        "token_tenant": "false",
        "check_token_project": "false",
    }
    assert dict(parser["filter:idempotency_noauth"]) == {"use": "idempotency", "keystone_scope": "false"}


def test_noauth_sections_build_on_the_keystone_ones(installed_paste, tmp_path):
    path = write(tmp_path, add_filters(installed_paste("cinder"), "cinder", settings={"idempotency.expiration": "60"}))
    tenant_path = loadfilter("config:%s" % path, name="tenant_path_noauth")(None)
    assert (tenant_path.options.token_tenant, tenant_path.options.tenant_id_pattern) == (False, "[0-9a-f-]+")
    idempotency = loadfilter("config:%s" % path, name="idempotency_noauth")(None)
    assert (idempotency.options.keystone_scope, idempotency.options.expiration) == (False, 60)


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_every_section_the_recipe_writes_loads_through_paste(installed_paste, tmp_path, service):
    path = write(tmp_path, add_filters(installed_paste(service), service))
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    names = [s.split(":", 1)[1] for s in parser.sections() if s.startswith("filter:")]
    ours = [n for n in names if n.startswith(("admin_cull", "tenant_path", "idempotency", "tag_query"))]
    expected = ALL_FILTERS if service == "nova" else ALL_FILTERS[:3] + ["idempotency_noauth", "tenant_path_noauth"]
    assert ours == expected
    for name in ours:
        built = loadfilter("config:%s" % path, name=name)(lambda environ, start_response: [])
        assert built.error_format == "nova", name


def test_nova_tenant_path_and_tag_query_options(installed_paste, tmp_path):
    path = write(tmp_path, add_filters(installed_paste("nova"), "nova"))
    tenant_path = loadfilter("config:%s" % path, name="tenant_path")(None)
    options = tenant_path.options
    assert (options.tenant_in_path, options.tenant_id_pattern) == ("optional", "[0-9a-f-]+")
    assert (options.token_tenant, options.check_token_project) == (True, True)
    assert loadfilter("config:%s" % path, name="tag_query")(None).options.not_tags_semantics == "nova"


def test_admin_endpoint_gets_no_admin_cull(installed_paste, tmp_path):
    text = add_filters(installed_paste("nova"), "nova", endpoint="admin")
    assert "admin_cull" not in text
    assert pipeline(text, "composite:openstack_compute_api_v21", "keystone")[-5:] == [
        "tenant_path",
        "idempotency",
        "tag_query",
        "keystonecontext",
        "osapi_compute_app_v21",
    ]
    assert check(text) == []


def test_set_options_reach_the_filters_verbatim(installed_paste, tmp_path):
    source = write(tmp_path, installed_paste("nova"))
    out = tmp_path / "out.ini"
    result = manage(
        "paste", "add", "--service", "nova", str(source), "--output", str(out),
        "--set", "idempotency.backend=memcached",
        "--set", "idempotency.memcached_servers=127.0.0.1:11211,127.0.0.1:11212",
        "--set", "idempotency.secret=50%-of-a-secret=%(here)s",
        "--set", "tenant_path.check_token_project=false",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    idempotency = loadfilter("config:%s" % out, name="idempotency")(None)
    assert idempotency.options.backend == "memcached"
    assert idempotency.options.memcached_servers == ["127.0.0.1:11211", "127.0.0.1:11212"]
    assert idempotency.options.secret == "50%-of-a-secret=%(here)s"
    assert loadfilter("config:%s" % out, name="tenant_path")(None).options.check_token_project is False
    assert manage("paste", "check", str(out)).returncode == 0


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("idempotency.backnd=memcached", "unknown option backnd; known options are: "),
        ("idempotency.backend=redis", "idempotency.backend: idempotency: backend = 'redis' is refused"),
        ("tenant_path.tenant_in_path=sometimes", "tenant_in_path = 'sometimes' is refused"),
        ("id_resolver.cells=x", "adds no filter 'id_resolver' on the public endpoint"),
        ("backend=memory", "'backend=memory' is not FILTER.OPTION=VALUE"),
    ],
)
def test_a_bad_set_is_a_usage_error_naming_it(installed_paste, tmp_path, setting, message):
    source = write(tmp_path, installed_paste("nova"))
    result = manage("paste", "add", "--service", "nova", str(source), "--set", setting)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_set_for_admin_cull_on_the_admin_endpoint_is_refused(installed_paste, tmp_path):
    source = write(tmp_path, installed_paste("cinder"))
    result = manage(
        "paste", "add", "--service", "cinder", "--endpoint", "admin", str(source), "--set", "admin_cull.x=1"
    )
    assert result.returncode == 2
    assert "adds no filter 'admin_cull' on the admin endpoint; it adds tenant_path, idempotency" in result.stderr


def test_recipe_refuses_a_file_that_has_the_filters_or_no_api(installed_paste, tmp_path):
    done = write(tmp_path, add_filters(installed_paste("nova"), "nova"))
    again = manage("paste", "add", "--service", "nova", str(done))
    assert again.returncode == 1
    assert "already has [filter:admin_cull]" in again.stderr
    wrong_service = manage(
        "paste", "add", "--service", "cinder", str(write(tmp_path, installed_paste("nova"), "n.ini"))
    )
    assert wrong_service.returncode == 1
    assert "no pipeline that ends in cinder's API app (paste.app_factory = cinder.api.v3.router:APIRouter" in (
        wrong_service.stderr
    )
    missing = manage("paste", "add", "--service", "nova", str(tmp_path / "missing.ini"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr


# --- admin_cull's rules against the services' own policy defaults ------------------------------


def classify(operations: list[dict], service: str) -> tuple[set, set]:
    """``(admin-only calls, calls members may make)``, as ``(METHOD, path)`` with ``{x}`` as a value."""
    admin, member = set(), set()
    for operation in operations:
        if operation["name"] in ATTRIBUTE_POLICIES[service] or operation["check_str"] == "!":
            continue
        path = operation["path"].split(" (")[0].split("?")[0].rstrip("/")
        segments = ["0b1e" if s.startswith("{") else s for s in path.split("/")]
        (admin if operation["admin"] else member).add((operation["method"].upper(), "/".join(segments)))
    return admin - member, member


def status_through_admin_cull(cull, mount: str, method: str, path: str) -> int:
    request = webob.Request.blank(path, method=method, environ={"SCRIPT_NAME": mount})
    return request.get_response(cull).status_int


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_admin_cull_culls_every_admin_only_call_of_the_policy_defaults(
    openstack_venv, installed_paste, tmp_path, service
):
    admin_only, member = classify(policy_operations(openstack_venv, service), service)
    assert len(admin_only) > 40, admin_only
    assert len(member) > 60, member
    if service == "nova":
        assert {("POST", "/flavors"), ("DELETE", "/flavors/0b1e"), ("PUT", "/os-services/0b1e")} <= admin_only
        assert {("GET", "/os-hypervisors"), ("PUT", "/os-quota-sets/0b1e"), ("GET", "/os-aggregates")} <= admin_only
    path = write(tmp_path, add_filters(installed_paste(service), service))

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"reached the service"]

    cull = loadfilter("config:%s" % path, name="admin_cull")(app)
    missed, broken = [], []
    for mount in MOUNTS[service]:
        for prefix in ("", "/" + PROJECT):
            for method, call in sorted(admin_only):
                if status_through_admin_cull(cull, mount, method, prefix + call) != 404:
                    missed.append((method, mount + prefix + call))
            for method, call in sorted(member):
                if not prefix and method in ("PUT", "DELETE") and call.count("/") == 1:
                    # The tenants spec's tenant create and delete, culled by admin_cull's defaults; no real
                    # call of either service (cinder's policies list PUT /volumes, routed as /volumes/{id}).
                    continue
                if status_through_admin_cull(cull, mount, method, prefix + call) != 200:
                    broken.append((method, mount + prefix + call))
    assert missed == [], "admin-only calls that reach %s: %s" % (service, missed)
    assert broken == [], "members' calls culled: %s" % broken


# --- the checker on the installed files ---------------------------------------------------------


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_installed_files_without_the_filters_are_clean(installed_paste, tmp_path, service):
    result = manage("paste", "check", str(write(tmp_path, installed_paste(service))))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize(("service", "strategies"), [("nova", ["keystone"]), ("cinder", ["keystone", "all"])])
def test_after_the_recipe_the_checker_is_clean(installed_paste, tmp_path, service, strategies):
    path = write(tmp_path, add_filters(installed_paste(service), service))
    for strategy in strategies:
        result = manage("paste", "check", "--auth-strategy", strategy, str(path))
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), strategy


def test_filters_added_to_v21_only_leave_the_legacy_route_reported(installed_paste, tmp_path):
    """The issue's case: the filters by hand in /v2.1's composite only; /v2 is a way around them."""
    original = installed_paste("nova")
    legacy = next(line for line in original.splitlines() if "legacy_v2_compatible osapi_compute_app_v21" in line)
    added = add_filters(original, "nova")
    by_hand = "\n".join(legacy if "legacy_v2_compatible osapi_compute_app_v21" in line else line
                        for line in added.splitlines())  # fmt: skip
    result = manage("paste", "check", str(write(tmp_path, by_hand)))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "skipped-filter %s: runs no %s, which %s runs" % (NOVA_LEGACY, kind, NOVA_V21) for kind in sorted(ALL_FILTERS)
    ]


def test_cinder_filters_on_the_keystone_key_only_leave_the_nolimit_route_reported(installed_paste):
    added = add_filters(installed_paste("cinder"), "cinder")
    original_nolimit = next(
        line for line in installed_paste("cinder").splitlines() if line.startswith("keystone_nolimit")
    )
    by_hand = "\n".join(
        original_nolimit if line.startswith("keystone_nolimit") else line for line in added.splitlines()
    )
    findings = check(by_hand)
    route = "osapi_volume[/v3] > openstack_volume_api_v3[keystone_nolimit] > apiv3"
    assert [(f.kind, f.route) for f in findings] == [("skipped-filter", route)] * 3
    assert [f.message.split(",")[0] for f in findings] == [
        "runs no admin_cull",
        "runs no idempotency",
        "runs no tenant_path",
    ]


# --- each other finding, on a small paste file --------------------------------------------------

HEAD = """
[composite:main]
use = egg:Paste#urlmap
/v2.1: api

[app:nova]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[app:other]
paste.app_factory = other.api:App.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory

[filter:tenant_path]
use = egg:tenancy_mw#tenant_path

[filter:strip]
use = egg:tenancy_mw#tenant_path
strip_tenant = true

[filter:token_tenant]
paste.filter_factory = tenancy_mw.tenant_path:TenantPath.factory
token_tenant = true

[filter:admin_cull]
use = egg:tenancy_mw#admin_cull

[filter:idempotency]
use = egg:tenancy_mw#idempotency
backend = memory
"""


def findings_of(pipeline_line: str, extra: str = "") -> list[str]:
    return [str(f) for f in check(HEAD + "\n[pipeline:api]\npipeline = %s\n" % pipeline_line + extra)]


def test_a_clean_pipeline_has_no_finding():
    assert findings_of("authtoken admin_cull strip idempotency nova") == []
    # admin_cull judges the path the app routes on, whichever side of a stripping tenant_path it is.
    assert findings_of("authtoken strip admin_cull idempotency other") == []


def test_a_second_tenant_path_with_strip_tenant():
    assert findings_of("authtoken strip tenant_path other") == [
        "second-strip main[/v2.1] > api > other: runs tenant_path 2 times (strip, tenant_path) and one strips "
        "the tenant: the next takes a collection for it"
    ]


def test_token_trusting_options_before_authtoken_or_without_it():
    assert findings_of("token_tenant authtoken other") == [
        "order main[/v2.1] > api > other: token_tenant (tenant_path) runs before authtoken, yet token_tenant "
        "trusts keystonemiddleware's identity headers"
    ]
    # idempotency's keystone_scope is on by default.
    assert findings_of("tenant_path idempotency other") == [
        "order main[/v2.1] > api > other: idempotency (idempotency) runs with no authtoken on this route, yet "
        "keystone_scope trusts keystonemiddleware's identity headers"
    ]
    extra = "[filter:cull_roles]\nuse = egg:tenancy_mw#admin_cull\nadmin_roles = admin\n"
    assert findings_of("cull_roles authtoken other", extra) == [
        "order main[/v2.1] > api > other: cull_roles (admin_cull) runs before authtoken, yet admin_roles "
        "trusts keystonemiddleware's identity headers"
    ]


def test_filters_that_use_tenant_paths_decision_before_it():
    assert findings_of("authtoken idempotency tenant_path other") == [
        "order main[/v2.1] > api > other: idempotency (idempotency) runs before tenant_path (tenant_path), "
        "whose tenant it uses"
    ]


def test_tenant_in_path_always_in_front_of_nova():
    extra = "[filter:always]\nuse = egg:tenancy_mw#tenant_path\ntenant_in_path = always\n"
    assert findings_of("authtoken always nova", extra) == [
        "tenant-layout main[/v2.1] > api > nova: always has tenant_in_path = always, but nova serves routes "
        "without the project id too (the first segment would be taken for a tenant): use optional"
    ]
    assert findings_of("authtoken always other", extra) == []  # the tenants spec's own layout


def test_options_a_filter_would_refuse():
    extra = (
        "[filter:typo]\nuse = egg:tenancy_mw#tenant_path\nstrip_tenant = sometimes\ntenant_headr = X\n"
        "[filter:bad_rule]\nuse = egg:tenancy_mw#admin_cull\nrules = PUT os-services\n"
        "[filter:bad_pattern]\nuse = egg:tenancy_mw#tenant_path\ntenant_id_pattern = [a-\n"
        "[filter:percent]\nuse = egg:tenancy_mw#idempotency\nsecret = 100%\n"
    )
    found = findings_of("authtoken tenant_path other", extra)
    assert found[0] == "bad-option [filter:percent]: '%' must be followed by '%' or '(', found: '%'"
    assert found[1].startswith("bad-option [filter:typo]: tenant_path: strip_tenant = 'sometimes' is refused: ")
    assert found[2].startswith("bad-option [filter:typo]: tenant_path: unknown option tenant_headr; known options")
    assert found[3].startswith("bad-option [filter:bad_rule]: admin_cull: rules = 'PUT os-services' is refused: ")
    assert found[4].startswith("bad-option [filter:bad_pattern]: tenant_path: tenant_id_pattern = '[a-' is refused")
    assert len(found) == 5


def test_a_route_that_cannot_be_followed():
    assert findings_of("authtoken tenant_pth other") == [
        "unresolved main[/v2.1] > api: names a filter 'tenant_pth', which has no section"
    ]
    strategies = "[composite:api]\nuse = call:nova.api.auth:pipeline_factory_v21\nnoauth2 = tenant_path nova\n"
    assert [str(f) for f in check(HEAD + strategies)] == [
        "unresolved api: has no 'keystone' pipeline (its keys: noauth2)"
    ]
    assert [str(f) for f in check(HEAD + strategies, auth_strategy="all")] == []


def test_check_exit_status_on_findings_and_on_an_unreadable_file(tmp_path):
    bad = write(tmp_path, HEAD + "\n[pipeline:api]\npipeline = authtoken strip tenant_path other\n")
    result = manage("paste", "check", str(bad))
    assert result.returncode == 1
    assert result.stdout.startswith("second-strip ")
    broken = write(tmp_path, "[app:main]\n[app:main]\n", "broken.ini")
    result = manage("paste", "check", str(broken))
    assert result.returncode == 2
    assert result.stderr == (
        "tenancy-mw-manage: While reading from '%s' [line 2]: section 'app:main' already exists\n" % broken
    )
    assert manage("paste", "check", str(tmp_path)).returncode == 2


# --- without the sql extra ----------------------------------------------------------------------

WITHOUT_SQL = "import sys; sys.modules.update(sqlalchemy=None, alembic=None)\nfrom tenancy_mw.manage import main\n"


def run_without_sql(*argv: str) -> subprocess.CompletedProcess:
    code = WITHOUT_SQL + "sys.exit(main(%r))" % (list(argv),)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_paste_verbs_run_without_the_sql_extra(installed_paste, tmp_path):
    source = write(tmp_path, installed_paste("cinder"))
    out = tmp_path / "out.ini"
    added = run_without_sql("paste", "add", "--service", "cinder", str(source), "--output", str(out))
    assert added.returncode == 0, added.stderr
    checked = run_without_sql("paste", "check", str(out))
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
    # tag_query needs SQLAlchemy: the checker says it cannot load here, and why.
    nova = write(tmp_path, add_filters(installed_paste("nova"), "nova"), "nova.ini")
    checked = run_without_sql("paste", "check", str(nova))
    assert checked.returncode == 1
    assert checked.stdout.startswith("unloadable [filter:tag_query]: tag_query cannot be loaded here: ")
    assert "pip install 'tenancy_mw[sql]'" in checked.stdout


def test_db_verbs_without_the_sql_extra_name_it():
    result = run_without_sql("db", "components")
    assert result.returncode == 1
    assert result.stderr.startswith("tenancy-mw-manage: ")
    assert "pip install 'tenancy_mw[sql]'" in result.stderr
    assert result.stderr.count("\n") == 1
    result = run_without_sql("tenants", "purge")
    assert result.returncode == 2
    assert "unknown group 'tenants'; some groups need an extra: " in result.stderr
