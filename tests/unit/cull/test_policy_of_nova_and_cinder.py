"""admin_cull's derivation on nova 34.0.0's and cinder 29.0.0's own policy defaults, unmodified.

Run with the services' Python (:mod:`tests.support.policy_derived`): the
cases the issue names, and the listings the docs and the bench carry,
checked against what the library prints today.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.policy_derived import derivation, derived_rules, report

REPO = Path(__file__).resolve().parents[3]


def _by_operation(venv, service: str) -> dict[str, dict]:
    return {d["operation"]: d for d in derivation(venv, service)["decisions"]}


def test_sub_check_rules_do_not_cull_the_calls_they_refine(openstack_venv):
    nova = _by_operation(openstack_venv, "nova")
    # os_compute_api:servers:index:get_all_tenants (admin) lists GET /servers, as servers:index (member) does.
    assert nova["GET /servers"]["outcome"] == "keep"
    assert "os_compute_api:servers:index:get_all_tenants" in nova["GET /servers"]["listed_by"]
    # servers:create:forced_host, zero_disk_flavor, requested_destination and network:attach_external_network.
    assert nova["POST /servers"]["outcome"] == "keep"
    assert {g["rule"] for g in nova["POST /servers"]["gates"]} >= {"os_compute_api:servers:create"}


def test_a_reader_rule_listing_an_admin_write_does_not_open_it(openstack_venv):
    nova = _by_operation(openstack_venv, "nova")
    create = nova["POST /flavors"]
    assert "os_compute_api:os-flavor-extra-specs:index" in create["listed_by"]
    assert (create["outcome"], [g["rule"] for g in create["gates"]]) == (
        "cull",
        ["os_compute_api:os-flavor-manage:create"],
    )
    assert nova["PUT /flavors/*"]["outcome"] == "cull"
    cinder = _by_operation(openstack_venv, "cinder")
    assert cinder["POST /types"]["outcome"] == "cull"  # volume_type_access lists it among reads


def test_placeholders_named_differently_are_one_operation(openstack_venv):
    nova = _by_operation(openstack_venv, "nova")
    # /servers/{id} (os-extended-server-attributes) and /servers/{server_id} (servers:show).
    show = nova["GET /servers/*"]
    assert {"os_compute_api:servers:show", "os_compute_api:os-extended-server-attributes"} <= set(show["listed_by"])
    assert show["outcome"] == "keep"


def test_actions_are_culled_by_their_body_key_and_the_members_actions_are_not(openstack_venv):
    nova = _by_operation(openstack_venv, "nova")
    culled = {d["action"] for d in nova.values() if d["path"] == "/servers/*/action" and d["culled"]}
    assert culled == {"evacuate", "injectNetworkInfo", "migrate", "os-migrateLive", "os-resetState", "shelveOffload"}
    kept = {d["action"] for d in nova.values() if d["path"] == "/servers/*/action" and not d["culled"]}
    assert {"createImage", "reboot", "os-start", "os-stop", "unshelve", "unlock"} <= kept
    flavor_actions = {d["action"] for d in nova.values() if d["path"] == "/flavors/*/action" and d["culled"]}
    assert flavor_actions == {"addTenantAccess", "removeTenantAccess"}
    # Every documented flavor action is an admin call: the path is culled whatever the body.
    assert "POST /flavors/*/action" in derived_rules(openstack_venv, "nova")
    assert (
        "POST /servers/*/action (evacuate,injectNetworkInfo,migrate,os-migrateLive,os-resetState,shelveOffload)"
        in derived_rules(openstack_venv, "nova")
    )


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_nothing_is_left_undecided_with_the_defaults(openstack_venv, service):
    decisions = derivation(openstack_venv, service)["decisions"]
    assert [d["operation"] for d in decisions if d["outcome"] == "undecided"] == []
    # Every documented operation is decided one way or the other, and many both ways.
    outcomes = [d["outcome"] for d in decisions]
    assert outcomes.count("cull") > 50
    assert outcomes.count("keep") > 80


def test_the_docs_show_what_the_verb_prints_for_nova_today(openstack_venv):
    shown = (REPO / "doc" / "nova-policy-derived.txt").read_text()
    assert shown == report(openstack_venv, "nova"), (
        "regenerate doc/nova-policy-derived.txt: tenancy-mw-manage cull derive --namespace nova"
    )


def test_the_bench_times_the_rules_nova_derives_today(openstack_venv):
    benched = (REPO / "bench" / "nova-policy-rules.txt").read_text().splitlines()
    assert benched == derived_rules(openstack_venv, "nova"), (
        "regenerate bench/nova-policy-rules.txt: tenancy-mw-manage cull derive --namespace nova --format rules"
    )


def _closing_flavor_extra_specs(tmp_path) -> str:
    # A deployment hiding flavors' extra specs from members, and their keypair list.
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        '"os_compute_api:os-flavor-extra-specs:index": "rule:context_is_admin"\n'
        '"os_compute_api:os-keypairs:index": "rule:context_is_admin"\n'
    )
    return str(policy_file)


def test_a_policy_file_hiding_flavor_extra_specs_leaves_the_flavor_reads_undecided(openstack_venv, tmp_path):
    policy_file = _closing_flavor_extra_specs(tmp_path)
    derived = derivation(openstack_venv, "nova", "--policy-file", policy_file)
    decisions = {d["operation"]: d for d in derived["decisions"]}
    # nova's flavor show and detail check the rule with fatal=False, to leave the extra specs out:
    # members still read flavors.  Culled, as the library cannot tell, but reported.
    for read in ("GET /flavors/*", "GET /flavors/detail"):
        assert (decisions[read]["outcome"], decisions[read]["culled"]) == ("undecided", True)
        assert "closes os_compute_api:os-flavor-extra-specs:index, which lists other calls" in decisions[read]["reason"]
    # A rule listing one call only gates it: closed, it is culled.
    assert decisions["GET /os-keypairs"]["outcome"] == "cull"
    declared = derivation(
        openstack_venv,
        "nova",
        "--policy-file",
        policy_file,
        "--member-call",
        "GET /flavors/{flavor_id}",
        "--member-call",
        "GET /flavors/detail",
    )
    assert "GET /flavors/*" not in declared["rules"]
    assert "GET /flavors/detail" not in declared["rules"]
    assert "GET /flavors/*/os-extra_specs" in declared["rules"]


def test_keystones_policy_with_its_method_lists_and_owner_checks_is_derived(openstack_venv):
    decisions = {d["operation"]: d for d in derivation(openstack_venv, "keystone")["decisions"]}
    # keystone documents {"method": ["HEAD", "GET"], ...}: one operation per method.
    assert {"GET /v3/system/users/*/roles", "HEAD /v3/system/users/*/roles"} <= set(decisions)
    # identity:get_user lets a user read their own record (user_id:%(target.user.id)s): a member's
    # call that the caller's own project cannot show, so it is undecided, not decided admin.
    get_user = decisions["GET /v3/users/*"]
    assert (get_user["outcome"], get_user["culled"]) == ("undecided", True)
    assert "target.user.id" in get_user["reason"]
    assert decisions["POST /v3/users"]["outcome"] == "cull"
