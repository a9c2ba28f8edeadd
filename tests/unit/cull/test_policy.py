"""admin_cull's rules derived from a service's policy defaults, asked of oslo.policy itself."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from webtest import TestApp

from tenancy_mw.core.base import ConfigError
from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.cull.policy import Personas, PolicyError, derive, parse_operation, parse_operation_line
from tenancy_mw.manage import main
from tests.support import policy_service


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """The test service's defaults registered as an ``oslo.policy.policies`` entry point."""
    policy_service.install(tmp_path_factory.mktemp("site"))
    return policy_service.NAMESPACE


def _outcomes(derivation) -> dict[str, str]:
    return {d.operation.text: d.outcome for d in derivation.decisions}


def _reached(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b'{"reached": true}']


def test_a_member_gate_keeps_its_call_open_whatever_admin_only_refinements_list_it():
    outcomes = _outcomes(derive(policy_service.list_rules()))
    # svc:things:index:all_projects is admin-only and lists GET /things too.
    assert outcomes["GET /things"] == "keep"
    # svc:thing-attributes is admin-only and lists both; the member rules gate them.
    assert outcomes["GET /things/*"] == "keep"
    assert outcomes["GET /things/detail"] == "keep"


def test_a_reader_rule_listing_a_write_among_its_reads_does_not_open_the_admin_write():
    derived = derive(policy_service.list_rules())
    decisions = {d.operation.text: d for d in derived.decisions}
    assert decisions["POST /things"].outcome == "cull"
    assert decisions["POST /things"].gates == (("svc:thing-manage:create", "admin"),)
    assert "svc:thing-specs:index also lists reads" in decisions["POST /things"].reason
    assert decisions["PUT /things/*"].outcome == "cull"
    assert decisions["GET /things/*/specs"].outcome == "keep"


def test_placeholders_named_differently_are_one_path():
    derived = derive(policy_service.list_rules())
    shows = [d for d in derived.decisions if d.operation.method == "GET" and d.operation.path == "/things/*"]
    assert len(shows) == 1
    assert set(shows[0].listed_by) == {"svc:things:show", "svc:thing-attributes"}


def test_actions_are_told_apart_by_the_body_key_and_one_rule_holds_a_paths_admin_keys():
    derived = derive(policy_service.list_rules())
    outcomes = _outcomes(derived)
    assert outcomes["POST /things/*/action (start)"] == "keep"
    assert outcomes["POST /things/*/action (purge)"] == "cull"
    assert "POST /things/*/action (purge,reset-state)" in derived.rule_lines()
    assert not any(line.startswith("POST /things/*/action") and "start" in line for line in derived.rule_lines())


def test_an_operation_nobody_may_call_is_culled():
    decisions = {d.operation.text: d for d in derive(policy_service.list_rules()).decisions}
    assert decisions["DELETE /things/*/history"].gates == (("svc:things:retired", "nobody"),)
    assert decisions["DELETE /things/*/history"].culled


def test_an_admin_template_covering_a_members_path_is_reported_undecided_and_culled_until_declared():
    derived = derive(policy_service.list_rules())
    (undecided,) = derived.undecided
    assert undecided.operation.text == "GET /hosts/*"
    assert "GET /hosts/mine" in undecided.reason
    assert undecided.culled
    assert "GET /hosts/*" in derived.rule_lines()
    assert "undecided, culled until declared member calls (1)" in derived.report()
    declared = derive(policy_service.list_rules(), member_calls=[parse_operation_line("GET /hosts/{name}")])
    assert not declared.undecided[0].culled
    assert "GET /hosts/*" not in declared.rule_lines()
    assert declared.unused_member_calls == []


def test_the_callers_roles_are_the_deployments():
    # A cloud whose members hold "_member_" (an old Keystone default) and no reader role.
    derived = derive(
        policy_service.list_rules(), personas=Personas(admin=("admin",), member=("_member_",), reader=("_member_",))
    )
    # Then no rule lets "members" in: every documented operation is culled, none is guessed open.
    assert all(d.culled for d in derived.decisions)


def test_the_deployments_policy_file_opens_and_closes_calls(tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"svc:thing-manage:create": "role:member"\n"svc:things:start": "!"\n')
    derived = derive(policy_service.list_rules(), policy_file=str(policy_file))
    outcomes = _outcomes(derived)
    assert outcomes["POST /things"] == "keep"
    assert outcomes["POST /things/*/action (start)"] == "cull"
    assert sorted((op.text, before, after) for op, before, after in derived.overridden) == [
        ("POST /things", "cull", "keep"),
        ("POST /things/*/action (start)", "keep", "cull"),
    ]


def test_a_policy_file_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"svc:thing-manage:create": [unclosed\n')
    with pytest.raises(PolicyError, match="policy file could not be read"):
        derive(policy_service.list_rules(), policy_file=str(policy_file))


def test_operations_are_parsed_by_shape():
    assert parse_operation("get", "/os-quota-sets/{project_id}?usage=True").text == "GET /os-quota-sets/*"
    assert parse_operation("POST", "/servers/{server_id}/action (os-migrateLive)").action == "os-migrateLive"
    with pytest.raises(PolicyError, match="not an operation"):
        parse_operation_line("/things without a method")


def test_the_filter_culls_the_derived_admin_calls_and_passes_the_members(registered):
    public = TestApp(AdminCull(_reached, {"policy_namespace": registered, "cull_status": "403"}))
    for prefix in ("/v2.1", "/v2.1/acme", "/v2.1/ACME/"):
        assert public.post_json(prefix + "/things", {"thing": {}}, status=403).json["errors"][0]["code"] == (
            "tenancy.admin-call"
        )
        assert public.put_json(prefix + "/things/7", {}, status=403)
        assert public.delete(prefix + "/services/1", status=403)
        assert public.get(prefix + "/things").json == {"reached": True}
        assert public.get(prefix + "/things/7").json == {"reached": True}
        assert public.get(prefix + "/things/7/specs").json == {"reached": True}
        assert public.post_json(prefix + "/things/7/action", {"start": None}).json == {"reached": True}
        public.post_json(prefix + "/things/7/action", {"purge": None}, status=403)
        public.post_json(prefix + "/things/7/action", {"reset-state": {"state": "ok"}}, status=403)
    # The default rules still hold beside the derived ones.
    public.put("/v2.1/acme", status=403)


def test_hand_written_rules_add_to_the_derived_ones(registered):
    public = TestApp(AdminCull(_reached, {"policy_namespace": registered, "rules": "GET /things/*/specs"}))
    public.get("/v2.1/things/7/specs", status=404)
    public.post_json("/v2.1/things", {}, status=404)
    assert public.get("/v2.1/things").json == {"reached": True}


def test_the_filter_logs_what_the_policy_file_changes_at_load(registered, tmp_path, caplog):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"svc:thing-manage:create": "role:member"\n"svc:things:show": "rule:context_is_admin"\n')
    with caplog.at_level(logging.INFO, logger="tenancy_mw.admin_cull"):
        app = AdminCull(_reached, {"policy_namespace": registered, "policy_file": str(policy_file)})
    assert "the policy file opens POST /things to members (cull by default): not culled" in caplog.text
    assert "the policy file closes GET /things/* to members (keep by default): culled" in caplog.text
    assert "GET /hosts/* is undecided, culled" in caplog.text
    opened = [r for r in caplog.records if "opens POST /things" in r.getMessage()]
    assert opened[0].levelno == logging.WARNING
    public = TestApp(app)
    assert public.post_json("/v2.1/things", {}).json == {"reached": True}
    public.get("/v2.1/things/7", status=404)


def test_a_namespace_nobody_registered_fails_at_load_naming_it(registered):
    with pytest.raises(ConfigError) as raised:
        AdminCull(_reached, {"policy_namespace": "no-such-service"})
    message = str(raised.value)
    assert "policy_namespace = 'no-such-service'" in message
    assert registered in message  # the registered ones are listed


def test_a_member_call_that_is_not_an_operation_fails_at_load(registered):
    with pytest.raises(ConfigError, match="is not an operation"):
        AdminCull(_reached, {"policy_namespace": registered, "policy_member_calls": "hosts/mine"})


def test_declared_member_calls_open_only_what_they_name(registered, caplog):
    with caplog.at_level(logging.WARNING, logger="tenancy_mw.admin_cull"):
        public = TestApp(
            AdminCull(
                _reached,
                {"policy_namespace": registered, "policy_member_calls": "GET /hosts/{host}\nGET /things/{id}"},
            )
        )
    assert public.get("/v2.1/hosts/mine").json == {"reached": True}
    public.post_json("/v2.1/things", {}, status=404)  # not named
    public.put_json("/v2.1/things/7", {}, status=404)
    assert "policy_member_calls names GET /things/*, which is not culled: ignored" in caplog.text


def test_a_declared_member_call_opens_a_decided_cull_and_says_so_at_load(registered, caplog):
    # Documentation can mislead: cinder lists only the admin-only group:access_group_types_specs on
    # GET /group_types/{group_type_id}, which members call (the rule only shows the group specs).
    with caplog.at_level(logging.WARNING, logger="tenancy_mw.admin_cull"):
        public = TestApp(AdminCull(_reached, {"policy_namespace": registered, "policy_member_calls": "POST /things"}))
    assert public.post_json("/v2.1/things", {}).json == {"reached": True}
    public.put_json("/v2.1/things/7", {}, status=404)
    (opened,) = [r for r in caplog.records if "opens POST /things" in r.getMessage()]
    assert opened.levelno == logging.WARNING
    assert "which the policy gives admins only (svc:thing-manage:create (admin) gates it" in opened.getMessage()


def test_the_manage_verb_prints_the_list_the_undecided_and_why(registered, capsys):
    assert main(["cull", "derive", "--namespace", registered]) == 0
    report = capsys.readouterr().out
    assert "## culled (6)" in report
    assert "POST /things " in report
    assert "svc:thing-manage:create (admin) gates it" in report
    assert "GET /hosts/*" in report.split("## undecided, culled until declared member calls (1)")[1]
    assert main(["cull", "derive", "--namespace", registered, "--format", "rules"]) == 0
    rules = capsys.readouterr().out.splitlines()
    assert rules == derive(policy_service.list_rules()).rule_lines()
    assert main(["cull", "derive", "--namespace", registered, "--format", "json", "--member-call", "GET /hosts/*"]) == 0
    document = json.loads(capsys.readouterr().out)
    hosts = next(d for d in document["decisions"] if d["operation"] == "GET /hosts/*")
    assert (hosts["outcome"], hosts["culled"], hosts["declared"]) == ("undecided", False, True)
    assert main(["cull", "derive", "--namespace", registered, "--format", "json", "--member-call", "GET /things"]) == 0
    assert json.loads(capsys.readouterr().out)["unused_member_calls"] == ["GET /things"]


def test_the_manage_verb_reads_the_services_config_for_its_policy_file(registered, tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text('"svc:services:delete": "role:member"\n')
    service_conf = tmp_path / "service.conf"
    service_conf.write_text("[oslo_policy]\npolicy_file = policy.yaml\n")
    assert main(["cull", "derive", "--namespace", registered, "--config-file", str(service_conf)]) == 0
    report = capsys.readouterr().out
    assert "## changed by the policy file (1)" in report
    assert "DELETE /services/*" in report.split("## changed by the policy file")[1]


def test_without_oslo_policy_the_verb_and_the_filter_name_the_extra():
    code = (
        "import sys; sys.modules['oslo_policy'] = None\n"
        "from tenancy_mw.manage import main\n"
        "from tenancy_mw.cull.filter import AdminCull\n"
        "from tenancy_mw.core.base import ConfigError\n"
        "status = main(['cull', 'derive', '--namespace', 'nova'])\n"
        "try:\n"
        "    AdminCull(None, {'policy_namespace': 'nova'})\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "needs oslo.policy (pip install 'tenancy_mw[policy]')" in done.stderr
    assert "needs oslo.policy (pip install 'tenancy_mw[policy]')" in done.stdout


def _documented(name, check, *operations):
    """A policy default listing *operations*: ``"METHOD /path"``, or ``(methods, path)`` as keystone writes them."""
    from oslo_policy import policy

    listed = [
        {"method": op.split(" ", 1)[0], "path": op.split(" ", 1)[1]}
        if isinstance(op, str)
        else {"method": op[0], "path": op[1]}
        for op in operations
    ]
    return policy.DocumentedRuleDefault(name, check, "Test rule %s." % name, listed)


def _admin_rule():
    from oslo_policy import policy

    return policy.RuleDefault("context_is_admin", policy_service.ADMIN)


def test_an_operation_documented_with_a_list_of_methods_is_one_operation_per_method():
    rules = [
        _admin_rule(),
        _documented("svc:grants:list", "rule:context_is_admin", (["HEAD", "GET"], "/v3/system/users/{user_id}/roles")),
        _documented("svc:grants:create", "rule:context_is_admin", (["PUT"], "/v3/system/users/{user_id}/roles/{id}")),
    ]
    assert _outcomes(derive(rules)) == {
        "GET /v3/system/users/*/roles": "cull",
        "HEAD /v3/system/users/*/roles": "cull",
        "PUT /v3/system/users/*/roles/*": "cull",
    }
    with pytest.raises(PolicyError, match="rule svc:odd documents an operation that is not a method and a path"):
        derive([_documented("svc:odd", "rule:context_is_admin", (None, "/things"))])


def test_a_placeholder_inside_a_segment_varies_it_and_an_unwritable_path_is_a_policy_error():
    rules = [_admin_rule(), _documented("svc:exports", "rule:context_is_admin", "GET /things/{id}.json")]
    assert derive(rules).rule_lines() == ["GET /things/*"]
    with pytest.raises(PolicyError, match=r"rule svc:odd: operation GET /things/a\(b cannot be an admin_cull rule"):
        derive([_admin_rule(), _documented("svc:odd", "rule:context_is_admin", "GET /things/a(b")])


def test_an_admin_only_path_beside_a_members_action_on_another_template_keeps_its_keys():
    # The members' action is documented with the project in its path; the admin actions without.
    rules = [
        _admin_rule(),
        _documented("svc:servers:evacuate", "rule:context_is_admin", "POST /servers/{server_id}/action (evacuate)"),
        _documented("svc:servers:reboot", policy_service.MEMBER, "POST /{project_id}/servers/{id}/action (reboot)"),
    ]
    lines = derive(rules).rule_lines()
    assert lines == ["POST /servers/*/action (evacuate)"]
    public = TestApp(AdminCull(_reached, {"rules": "\n".join(lines)}))
    assert public.post_json("/v2.1/acme/servers/7/action", {"reboot": {}}).json == {"reached": True}
    public.post_json("/v2.1/acme/servers/7/action", {"evacuate": {}}, status=404)


def test_a_rule_refusing_members_for_want_of_a_target_field_leaves_its_call_undecided():
    # keystone's identity:get_user lets users read themselves: user_id:%(target.user.id)s.
    rules = [
        _admin_rule(),
        _documented("svc:users:get", "rule:context_is_admin or user_id:%(target.user.id)s", "GET /users/{user_id}"),
        _documented("svc:users:create", "rule:context_is_admin", "POST /users"),
    ]
    derived = derive(rules)
    decisions = {d.operation.text: d for d in derived.decisions}
    get_user = decisions["GET /users/*"]
    assert (get_user.outcome, get_user.culled, get_user.gates) == ("undecided", True, (("svc:users:get", "target"),))
    assert "for want of target.user.id in the target" in get_user.reason
    assert decisions["POST /users"].outcome == "cull"
    declared = derive(rules, member_calls=[parse_operation_line("GET /users/{id}")])
    assert declared.rule_lines() == ["POST /users"]


def test_a_policy_file_closing_a_rule_that_lists_other_calls_leaves_them_undecided(tmp_path):
    # nova's os-flavor-extra-specs:index is listed on the flavor reads, which check it only
    # to show or hide the extra specs.
    rules = [
        _admin_rule(),
        _documented(
            "svc:flavor-extra-specs:index",
            policy_service.READER,
            "GET /flavors/{flavor_id}",
            "GET /flavors/detail",
            "GET /flavors/{flavor_id}/os-extra_specs",
        ),
        _documented("svc:keypairs:index", policy_service.READER, "GET /os-keypairs"),
    ]
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"svc:flavor-extra-specs:index": "!"\n"svc:keypairs:index": "rule:context_is_admin"\n')
    derived = derive(rules, policy_file=str(policy_file))
    assert _outcomes(derived) == {
        "GET /flavors/*": "undecided",
        "GET /flavors/*/os-extra_specs": "undecided",
        "GET /flavors/detail": "undecided",
        "GET /os-keypairs": "cull",
    }
    assert all(d.culled for d in derived.decisions)
    assert "the policy file closes svc:flavor-extra-specs:index, which lists other calls too" in derived.report()
    declared = derive(
        rules,
        policy_file=str(policy_file),
        member_calls=[parse_operation_line("GET /flavors/{id}"), parse_operation_line("GET /flavors/detail")],
    )
    assert declared.rule_lines() == ["GET /flavors/*/os-extra_specs", "GET /os-keypairs"]


def test_a_policy_file_named_but_missing_is_an_error_naming_it(registered, tmp_path):
    missing = str(tmp_path / "no-such-policy.yaml")
    with pytest.raises(PolicyError, match="the policy file '.*no-such-policy.yaml' was not found"):
        derive(policy_service.list_rules(), policy_file=missing)
    with pytest.raises(ConfigError, match="no-such-policy.yaml' was not found"):
        AdminCull(_reached, {"policy_namespace": registered, "policy_file": missing})


def test_the_defaults_are_judged_without_any_policy_file_found_in_home_or_etc(tmp_path, monkeypatch):
    # oslo.config looks for a relative policy file in ~ and /etc: a stray one there is not the service's.
    (tmp_path / "policy.yaml").write_text('"svc:services:delete": "role:member"\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    derived = derive(policy_service.list_rules())
    assert _outcomes(derived)["DELETE /services/*"] == "cull"
    assert derived.overridden == []


def test_paste_check_reads_an_absolute_policy_file_and_leaves_a_relative_one_to_the_service(registered, tmp_path):
    from tenancy_mw.paste_deploy.filters import option_problems

    missing = str(tmp_path / "no-such-policy.yaml")
    (problem,) = option_problems(AdminCull, {"policy_namespace": registered, "policy_file": missing})
    assert "no-such-policy.yaml' was not found" in problem
    # Relative: the service finds it beside its configuration file (/etc/nova/policy.yaml), not this check.
    assert option_problems(AdminCull, {"policy_namespace": registered, "policy_file": "policy.yaml"}) == []
