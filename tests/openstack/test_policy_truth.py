"""admin_cull judged by the services' own answers (nova 34.0.0, cinder 29.0.0).

Every operation documented in the service's policy defaults is called on
the admin endpoint (no ``admin_cull``) with a member's token and an admin's:
what the service refuses the member and serves the admin is admin-only,
what it serves the member is a member's call (:mod:`tests.support.policy_truth`).
On the public endpoint, every admin-only call must be culled in every URL
layout and refused however it is written (path, method and body tricks),
changing nothing; every member call must be answered as on the admin
endpoint.  And the list the library derives from the policy
(``tenancy-mw-manage cull derive``) must cull every admin-only call and keep
every member call.  The report (its counts at the end of the run, the whole of it
with ``-s``, and in the test's folder with the whole table) counts the truth, the derived list's
agreement with it, and every failure.
"""

from __future__ import annotations

import time

import pytest

from tests.support.policy_plans import PLANS
from tests.support.policy_truth import ADMIN_ONLY, MEMBER, RESULTS, UNANSWERABLE, derived_verdicts, run


@pytest.fixture(scope="session")
def truth_endpoints(nova_endpoints, cinder_endpoints) -> dict:
    """Each service's (public, admin) endpoints.

    Both services are in the catalog whichever one is tested: nova's volume
    calls reach cinder through it, so nova answers them the same either way.
    """
    return {"nova": nova_endpoints[:2], "cinder": cinder_endpoints}


@pytest.mark.parametrize("service", ["nova", "cinder"])
def test_the_public_endpoint_culls_what_the_service_serves_only_an_admin(cloud, truth_endpoints, service, tmp_path):
    started = time.monotonic()
    public, admin = truth_endpoints[service]
    outcome = run(PLANS[service], cloud, public, admin)
    derived = derived_verdicts(cloud.venv, service)
    report = "%s\ntotal %.0f s" % (outcome.report(derived), time.monotonic() - started)
    print("\n" + report)
    # The counts, for the end of the run (tests/openstack/conftest.py).
    RESULTS.extend(line for line in report.splitlines() if line.startswith(("==", "derived", "public endpoint")))
    (tmp_path / ("policy-truth-%s.txt" % service)).write_text("%s\n\n%s\n" % (report, outcome.table()))
    # The truth is the service's own: most of what it documents is answerable here.
    assert len(outcome.of(ADMIN_ONLY)) > 40, report
    assert len(outcome.of(MEMBER)) > 60, report
    assert len(outcome.of(UNANSWERABLE)) <= len(outcome.truth) // 20, report
    assert outcome.failures(derived) == [], report
