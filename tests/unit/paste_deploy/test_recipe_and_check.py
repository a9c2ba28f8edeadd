"""The recipe and the checker (``tenancy-mw-manage paste add|check``) on nova's and cinder's installed files.

The paste files and policy defaults are the real ones of an installed nova
34.0.0 and cinder 29.0.0: ``installed_paste(service)`` reads
``<venv>/etc/<service>/api-paste.ini`` of the services' virtualenv
(the ``openstack_venv`` fixture, :mod:`tests.support.openstack`).  The checker's other
findings are each shown on a small paste file written here.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import webob
from paste.deploy import loadapp, loadfilter

from tenancy_mw.paste_deploy import add_filters, check
from tenancy_mw.paste_deploy.graph import PasteGraph
from tenancy_mw.paste_deploy.recipe import CINDER_MEMBER_CALLS, RECIPES
from tenancy_mw.tenants.ids import DEFAULT_TENANTLESS_COLLECTIONS
from tests.conftest import require
from tests.support.policy_derived import derivation, with_derived_rules

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
def test_every_section_the_recipe_writes_loads_through_paste(openstack_venv, installed_paste, tmp_path, service):
    # admin_cull's policy_namespace derives in the service's Python; here, its rules stand in for it.
    path = write(tmp_path, with_derived_rules(add_filters(installed_paste(service), service), openstack_venv))
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
        ("tenant_path.version_pattern=.*", "tenant_path: version_pattern = '.*' is refused: it matches an empty"),
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


def nova_with_an_outer_authtoken(original: str, *, direct_path: str | None = None) -> str:
    """nova's file with /v2.1's authtoken moved into an outer pipeline (and, if *direct_path*, a way around it)."""
    text = original.replace("/v2.1/+: openstack_compute_api_v21", "/v2.1/+: authed_v21")
    text = text.replace(
        "osprofiler authtoken keystonecontext osapi_compute_app_v21", "osprofiler keystonecontext osapi_compute_app_v21"
    )
    if direct_path:
        text = text.replace("/v2.1/+: authed_v21", "/v2.1/+: authed_v21\n%s: openstack_compute_api_v21" % direct_path)
    return text + "\n[pipeline:authed_v21]\npipeline = authtoken openstack_compute_api_v21\n"


def fake_nova(environ, start_response):
    """Answers a keypair creation with a new private key, as nova does (a URL project must be the token's)."""
    fake_nova.created += 1
    body = json.dumps({"keypair": {"private_key": "key #%d of %s" % (fake_nova.created, environ["HTTP_X_PROJECT_ID"])}})
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body.encode()]


def test_recipe_keeps_token_trust_where_authtoken_runs_in_an_outer_pipeline(installed_paste, tmp_path):
    text = add_filters(nova_with_an_outer_authtoken(installed_paste("nova")), "nova")
    head = "cors http_proxy_to_wsgi compute_req_id faultwrap request_log sizelimit osprofiler".split()
    assert pipeline(text, "composite:openstack_compute_api_v21", "keystone") == (
        head + ALL_FILTERS + ["keystonecontext", "osapi_compute_app_v21"]
    )
    assert "_noauth" not in text
    assert check(text) == []
    # Through the recipe's own sections: another project's request with the same token is no replay.
    path = write(tmp_path, text)
    fake_nova.created = 0
    app = loadfilter("config:%s" % path, name="tenant_path")(
        loadfilter("config:%s" % path, name="idempotency")(fake_nova)
    )
    other = "0b1e" * 8

    def create(project: str, url_project: str) -> webob.Response:
        request = webob.Request.blank("/%s/os-keypairs" % url_project, method="POST", environ={"SCRIPT_NAME": "/v2.1"})
        request.headers.update({"X-Client-Token": "t1", "X-Identity-Status": "Confirmed", "X-Project-Id": project})
        request.body = b'{"keypair": {"name": "k"}}'
        return request.get_response(app)

    first = create(PROJECT, PROJECT)
    assert first.json == {"keypair": {"private_key": "key #1 of %s" % PROJECT}}
    assert create(other, PROJECT).status_int == 403
    assert create(other, other).json == {"keypair": {"private_key": "key #2 of %s" % other}}


def test_recipe_refuses_a_pipeline_reached_with_and_without_authtoken(installed_paste, tmp_path):
    path = write(tmp_path, nova_with_an_outer_authtoken(installed_paste("nova"), direct_path="/v2.2/+"))
    result = manage("paste", "add", "--service", "nova", str(path))
    assert result.returncode == 1
    assert result.stderr == (
        "tenancy-mw-manage: %s: [composite:openstack_compute_api_v21] keystone: authtoken runs before the filters' "
        "place on route osapi_compute[/v2.1/+] > authed_v21 > openstack_compute_api_v21[keystone] > "
        "osapi_compute_app_v21 but not on route osapi_compute[/v2.2/+] > openstack_compute_api_v21[keystone] > "
        "osapi_compute_app_v21: they would trust the token on one and not on the other; give the routes pipelines "
        "of their own\n" % path
    )


@pytest.mark.parametrize(
    ("text", "loop"),
    [
        ("[app:a]\nuse = b\n[app:b]\nuse = a\n", "[app:b]: use = a loops: [app:a] > [app:b] > [app:a]"),
        ("[app:a]\nuse = a\n", "[app:a]: use = a loops: [app:a] > [app:a]"),
        ("[filter:f]\nuse = f\n[pipeline:main]\npipeline = f app\n[app:app]\nuse = egg:x\n",
         "[filter:f]: use = f loops: [filter:f] > [filter:f]"),
    ],
)  # fmt: skip
def test_use_loops_are_named_by_both_verbs(tmp_path, text, loop):
    path = write(tmp_path, text)
    checked = manage("paste", "check", str(path))
    assert (checked.returncode, checked.stdout, checked.stderr) == (1, "unresolved %s\n" % loop, "")
    added = manage("paste", "add", "--service", "nova", str(path))
    assert (added.returncode, added.stdout) == (1, "")
    assert added.stderr == "tenancy-mw-manage: %s: %s: paste cannot load that section\n" % (path, loop)


@pytest.mark.parametrize(
    "text",
    [
        "[pipeline:main]\npipeline = authtoken main\n[filter:authtoken]\nuse = egg:x\n",
        "[composite:main]\nuse = egg:Paste#urlmap\n/v1: api\n[pipeline:api]\npipeline = main\n",
    ],
)
def test_sections_that_only_name_each_other(text):
    [finding] = check(text)
    assert str(finding).startswith("unresolved [")
    assert str(finding).endswith(": no section is an entry point (each is named by another): loading any of them loops")


def test_output_over_a_symlink_rewrites_its_target_with_its_mode(installed_paste, tmp_path):
    target = write(tmp_path, installed_paste("nova"), "real-api-paste.ini")
    target.chmod(0o640)
    link = tmp_path / "api-paste.ini"
    link.symlink_to(target.name)
    result = manage("paste", "add", "--service", "nova", str(link), "--output", str(link))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert os.readlink(link) == target.name
    assert "[filter:admin_cull]" in target.read_text()
    assert target.stat().st_mode & 0o7777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tenancy-mw-")] == []


def test_output_over_a_file_keeps_its_owner_and_group(installed_paste, tmp_path):
    require(os.geteuid() == 0, "root (only root gives a file to another user)")
    path = write(tmp_path, installed_paste("nova"))
    os.chown(path, 4321, 8765)
    path.chmod(0o640)
    result = manage("paste", "add", "--service", "nova", str(path), "--output", str(path))
    assert result.returncode == 0, result.stderr
    info = path.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (4321, 8765, 0o640)
    assert "[filter:admin_cull]" in path.read_text()


# --- admin_cull's rules against the services' own policy defaults ------------------------------


def classify(decisions: list[dict]) -> tuple[set, set]:
    """``(calls admin_cull culls, calls it keeps)`` of a derivation, as ``(METHOD, path)`` with ``*`` as a value.

    An action call is left out: its path is shared with the members' actions (the body decides,
    tests/unit/cull/test_actions.py and tests/openstack/test_policy_truth.py).
    """
    culled, kept = set(), set()
    for decision in decisions:
        if decision["action"]:
            continue
        call = (decision["method"], decision["path"].replace("*", "0b1e"))
        (culled if decision["culled"] else kept).add(call)
    return culled, kept


def status_through_admin_cull(cull, mount: str, method: str, path: str) -> int:
    request = webob.Request.blank(path, method=method, environ={"SCRIPT_NAME": mount})
    return request.get_response(cull).status_int


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_admin_cull_culls_every_admin_only_call_of_the_policy_defaults(
    openstack_venv, installed_paste, tmp_path, service
):
    # The recipe's declared members' calls (cinder's, which its policy documents under an admin-only rule alone).
    declared = CINDER_MEMBER_CALLS if service == "cinder" else ()
    member_calls = [arg for call in declared for arg in ("--member-call", call)]
    admin_only, member = classify(derivation(openstack_venv, service, *member_calls)["decisions"])
    assert len(admin_only) > 40, admin_only
    assert len(member) > 60, member
    if service == "nova":
        assert {("POST", "/flavors"), ("DELETE", "/flavors/0b1e"), ("PUT", "/os-services/0b1e")} <= admin_only
        assert {("GET", "/os-hypervisors"), ("PUT", "/os-quota-sets/0b1e"), ("GET", "/os-aggregates")} <= admin_only
        assert {("GET", "/servers"), ("GET", "/servers/0b1e"), ("POST", "/servers")} <= member
    path = write(tmp_path, with_derived_rules(add_filters(installed_paste(service), service), openstack_venv))

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


def test_cinder_admin_calls_under_their_contrib_names_are_culled(openstack_venv, installed_paste, tmp_path):
    """cinder still routes /os-volume-manage and /os-snapshot-manage (its policies document /manageable_*)."""
    contrib = next(openstack_venv.glob("lib/python3*/site-packages/cinder/api/contrib"))
    names = [
        re.search(r"alias = '([^']+)'", (contrib / module).read_text()).group(1)
        for module in ("volume_manage.py", "snapshot_manage.py")
    ]
    assert names == ["os-volume-manage", "os-snapshot-manage"]
    text = with_derived_rules(add_filters(installed_paste("cinder"), "cinder"), openstack_venv)
    cull = loadfilter("config:%s" % write(tmp_path, text), name="admin_cull")(lambda environ, start_response: [])
    for prefix in ("", "/" + PROJECT):
        for name in names:
            for method, call in (("POST", ""), ("GET", ""), ("GET", "/detail")):
                path = "%s/%s%s" % (prefix, name, call)
                assert status_through_admin_cull(cull, "/v3", method, path) == 404, (method, path)


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


def test_admin_cull_attached_with_filter_with_to_the_v21_composite_only(installed_paste):
    text = installed_paste("nova").replace(
        "[composite:openstack_compute_api_v21]\n", "[composite:openstack_compute_api_v21]\nfilter-with = admin_cull\n"
    )
    findings = check(text + "\n[filter:admin_cull]\nuse = egg:tenancy_mw#admin_cull\n")
    assert [str(f) for f in findings] == [
        "skipped-filter %s: runs no admin_cull, which osapi_compute[/v2.1/+] > openstack_compute_api_v21[keystone] "
        "> osapi_compute_app_v21 runs" % NOVA_LEGACY
    ]


def test_token_tenant_attached_with_filter_with_runs_before_authtoken(installed_paste):
    tenant_path = "\n[filter:tenant_path]\nuse = egg:tenancy_mw#tenant_path\ntoken_tenant = true\n"
    original = installed_paste("nova")
    on_composites = original.replace(
        "use = call:nova.api.auth:pipeline_factory_v21\n",
        "use = call:nova.api.auth:pipeline_factory_v21\nfilter-with = tenant_path\n",
    )
    # On a filter of the pipeline (cors, before authtoken), inherited through use.
    on_a_filter = original.replace("[filter:cors]\n", "[filter:cors_base]\nfilter-with = tenant_path\n") + (
        "\n[filter:cors]\nuse = cors_base\n"
    )
    message = (
        "tenant_path (tenant_path) runs before authtoken, yet token_tenant trusts keystonemiddleware's identity headers"
    )
    for text in (on_composites, on_a_filter):
        findings = [str(f) for f in check(text + tenant_path) if "api_v21" in f.route]
        assert findings == ["order %s: %s" % (route, message) for route in (NOVA_LEGACY, NOVA_V21)]


def test_filters_ignoring_the_token_behind_authtoken(installed_paste):
    """Sections meant for pipelines without authtoken, in one reached after an outer pipeline's authtoken."""
    text = nova_with_an_outer_authtoken(installed_paste("nova")).replace(
        "osprofiler keystonecontext osapi_compute_app_v21",
        "osprofiler keystonecontext tenant_path_noauth idempotency_noauth osapi_compute_app_v21",
    )
    text += (
        "\n[filter:tenant_path_noauth]\nuse = egg:tenancy_mw#tenant_path\ntoken_tenant = false\n"
        "check_token_project = false\n"
        "[filter:idempotency_noauth]\nuse = egg:tenancy_mw#idempotency\nkeystone_scope = false\n"
    )
    route = "osapi_compute[/v2.1/+] > authed_v21 > openstack_compute_api_v21[keystone] > osapi_compute_app_v21"
    assert [str(f) for f in check(text) if f.kind == "token-ignored"] == [
        "token-ignored %s: tenant_path_noauth (tenant_path) runs after authtoken with token_tenant and "
        "check_token_project off: a path without a project id gets no tenant, and a path's project id is not "
        "checked against the token's; turn them on" % route,
        "token-ignored %s: idempotency_noauth (idempotency) runs after authtoken with keystone_scope off: tokens "
        "are scoped by the path's tenant, so another project's request with the same idempotency token can replay "
        "this one's answer; turn keystone_scope on" % route,
    ]


def test_an_admin_cull_with_other_rules_on_the_legacy_route(installed_paste):
    text = add_filters(installed_paste("nova"), "nova").replace(
        "authtoken admin_cull tenant_path idempotency tag_query keystonecontext legacy_v2_compatible",
        "authtoken weak_cull tenant_path idempotency tag_query keystonecontext legacy_v2_compatible",
    )
    findings = check(text + "\n[filter:weak_cull]\nuse = admin_cull\nrules = POST /flavors\n")
    assert [str(f) for f in findings] == [
        "differs %s: weak_cull (admin_cull) differs in rules from admin_cull on %s" % (NOVA_LEGACY, NOVA_V21)
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
token_tenant = true
check_token_project = true

[filter:token_tenant]
paste.filter_factory = tenancy_mw.tenants.path_filter:TenantPath.factory
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
    extra = "[filter:always]\nuse = egg:tenancy_mw#tenant_path\ntenant_in_path = always\ntoken_tenant = true\n"
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


FILTER_WITH = """
[composite:main]
use = egg:Paste#urlmap
filter-with = outer
/v1: pipe

[pipeline:pipe]
pipeline = inherits app

[filter:outer]
use = egg:tenancy_mw#tenant_path

[filter:base]
use = egg:tenancy_mw#idempotency
keystone_scope = false
filter-with = cull

[filter:inherits]
use = base

[filter:cull]
use = egg:tenancy_mw#admin_cull

[app:app]
paste.app_factory = tests.support.apps:recorder_factory
record_file = %(here)s/records
filter-with = last

[filter:last]
use = egg:tenancy_mw#tag_query
"""


def test_filter_with_runs_where_paste_puts_it(tmp_path):
    """On a composite, on a filter (inherited through use), on an app: the checker's order is paste's."""
    path = write(tmp_path, FILTER_WITH)
    built, classes = loadapp("config:%s" % path), []
    while not isinstance(built, type(fake_nova)):
        classes.append(type(built).__name__)
        built = getattr(built, "application", None) or built.applications[0][1]  # a filter, or paste's urlmap
    assert classes == ["TenantPath", "URLMap", "AdminCull", "Idempotency", "TagQueryFilter"]
    [route] = PasteGraph(FILTER_WITH).routes()[0]
    assert [f.name for f in route.filters] == ["outer", "cull", "inherits", "last"]
    assert check(FILTER_WITH) == []


def test_filter_with_on_a_pipeline_is_reported_as_paste_builds_no_app(tmp_path):
    text = FILTER_WITH.replace("[pipeline:pipe]\n", "[pipeline:pipe]\nfilter-with = cull\n")
    with pytest.raises(TypeError, match="composed"):
        webob.Request.blank("/v1/servers").get_response(loadapp("config:%s" % write(tmp_path, text)))
    assert [str(f) for f in check(text)] == [
        "unresolved [pipeline:pipe]: has filter-with = cull, which paste applies as an app's filter only to an app "
        "or a composite (not to a pipeline, a filter-app, nor over the filter-with of the section its use names): "
        "it builds a filter there, and every request through it fails"
    ]


@pytest.mark.parametrize(
    "factory",
    [
        "paste.filter_factory = tenancy_mw.idempotency:Idempotency.factory",
        "paste.filter_factory = tenancy_mw.idempotency.filter : Idempotency.factory",
        "use = call:tenancy_mw.idempotency:Idempotency.factory",
    ],
)
def test_a_filter_named_by_its_class_is_known(factory):
    extra = "[filter:by_class]\n%s\nreplay = sometimes\n" % factory
    assert [f.split(" is refused")[0] for f in findings_of("authtoken tenant_path by_class other", extra)] == [
        "bad-option [filter:by_class]: idempotency: replay = 'sometimes'"
    ]


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        ("version_pattern = .*", "version_pattern = '.*' is refused: it matches an empty segment"),
        ("tenantless_collections = servers, a/b", "tenantless_collections = 'a/b' is refused: not a path segment: "),
        ("tenant_header = bad header", "tenant_header = 'bad header' is refused: not an HTTP header name"),
        ("tenant_id_pattern = [0-9", "tenant_id_pattern = '[0-9' is refused: unterminated character set"),
    ],
)
def test_values_tenant_path_refuses_when_it_loads(option, refusal):
    found = findings_of("authtoken tenant_path other", "[filter:bad]\nuse = egg:tenancy_mw#tenant_path\n%s\n" % option)
    assert len(found) == 1
    assert found[0].startswith("bad-option [filter:bad]: tenant_path: " + refusal)


def test_options_of_filters_with_stores_are_checked_without_opening_them(tmp_path):
    registry, tokens = tmp_path / "registry.db", tmp_path / "tokens.db"
    extra = (
        "[filter:tenant_admin]\nuse = egg:tenancy_mw#tenant_admin\nconnection = sqlite:///%s\n"
        "tenantless_collections = servers, a/b\n"
        "[filter:idempotency_sql]\nuse = egg:tenancy_mw#idempotency\nbackend = sql\nconnection = sqlite:///%s\n"
        "secret = s\ntoken_headers = ,\n"
        "[filter:idempotency_memcached]\nuse = egg:tenancy_mw#idempotency\nbackend = memcached\nsecret = s\n"
        "memcached_servers = 192.0.2.1:11211\n"
    ) % (registry, tokens)
    found = findings_of("authtoken tenant_path tenant_admin idempotency_sql other", extra)
    assert [f.split(" is refused")[0] for f in found] == [
        "bad-option [filter:tenant_admin]: tenant_admin: tenantless_collections = 'a/b'",
        "bad-option [filter:idempotency_sql]: idempotency: token_headers = []",
    ]
    assert not registry.exists()
    assert not tokens.exists()


def test_tenantless_collections_without_default_names_in_front_of_nova():
    extra = (
        "[filter:short]\nuse = egg:tenancy_mw#tenant_path\ntoken_tenant = true\ncheck_token_project = true\n"
        "tenantless_collections = servers, flavors, os-keypairs\n"
        "[filter:more]\nuse = short\ntenantless_collections = %s, os-widgets\n"
    ) % ", ".join(DEFAULT_TENANTLESS_COLLECTIONS)
    missing = sorted(set(DEFAULT_TENANTLESS_COLLECTIONS) - {"servers", "flavors", "os-keypairs"})
    assert findings_of("authtoken short nova", extra) == [
        "tenant-layout main[/v2.1] > api > nova: short (tenant_path) has a tenantless_collections without %d of the "
        "default names (%s, ...): nova serves them without the project id, and they would be taken for tenants"
        % (len(missing), ", ".join(missing[:5]))
    ]
    assert findings_of("authtoken short other", extra) == []  # another service's own names
    assert findings_of("authtoken more nova", extra) == []


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
    # A filter whose module needs SQLAlchemy: the checker says it cannot load here, and why.
    nova = write(tmp_path, add_filters(installed_paste("nova"), "nova"), "nova.ini")
    checked = run_without_sql("paste", "check", str(nova))
    needing_sql = filters_needing_sql(RECIPES["nova"].filters("public"))
    assert checked.returncode == (1 if needing_sql else 0), checked.stdout
    for name in needing_sql:
        assert "unloadable [filter:%s]: %s cannot be loaded here: " % (name, name) in checked.stdout
    if needing_sql:
        assert "pip install 'tenancy_mw[sql]'" in checked.stdout


def filters_needing_sql(names: list[str]) -> list[str]:
    """Those of the filters *names* whose module does not import without SQLAlchemy (as the checker sees them)."""
    code = (
        "import sys; sys.modules.update(sqlalchemy=None, alembic=None)\n"
        "from importlib.metadata import entry_points\n"
        "for ep in entry_points(group='paste.filter_factory'):\n"
        "    if ep.name in %r:\n"
        "        try: ep.load()\n"
        "        except ImportError: print(ep.name)\n" % (names,)
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.split()


def test_db_verbs_without_the_sql_extra_name_it():
    result = run_without_sql("db", "components")
    assert result.returncode == 1
    assert result.stderr.startswith("tenancy-mw-manage: ")
    assert "pip install 'tenancy_mw[sql]'" in result.stderr
    assert result.stderr.count("\n") == 1
    result = run_without_sql("tenants", "purge")
    assert result.returncode == 2
    assert "unknown group 'tenants'; some groups need an extra: " in result.stderr


def test_cinder_calls_its_policy_documents_otherwise_are_judged_as_routed(openstack_venv, installed_paste, tmp_path):
    """cinder 29 documents backup export as POST (routed GET), and group type show under an admin-only rule alone.

    ``group:access_group_types_specs`` only decides whether the answer shows the group specs
    (cinder/api/v3/views/group_types.py, ``fatal=False``): members show group types.
    """
    views = next(openstack_venv.glob("lib/python3*/site-packages/cinder/api/v3/views/group_types.py")).read_text()
    assert "SHOW_ACCESS_POLICY, fatal=False" in views
    backups = next(openstack_venv.glob("lib/python3*/site-packages/cinder/api/contrib/backups.py")).read_text()
    assert "'export_record': 'GET'" in backups
    text = with_derived_rules(add_filters(installed_paste("cinder"), "cinder"), openstack_venv)
    cull = loadfilter("config:%s" % write(tmp_path, text), name="admin_cull")(
        lambda environ, start_response: start_response("200 OK", []) or []
    )
    for prefix in ("", "/" + PROJECT):
        assert status_through_admin_cull(cull, "/v3", "GET", prefix + "/group_types/0b1e") == 200
        assert status_through_admin_cull(cull, "/v3", "GET", prefix + "/group_types/0b1e/group_specs") == 404
        assert status_through_admin_cull(cull, "/v3", "GET", prefix + "/backups/0b1e/export_record") == 404
