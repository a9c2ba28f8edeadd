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
