"""A small service's oslo.policy defaults, with the shapes that make deriving admin calls hard.

Written for the tests after the cases nova 34 and cinder 29 show
(``doc/admin_cull.rst``): a member rule with an admin-only refinement, a
reader rule that lists an admin write among its reads, placeholders named
differently for one path, calls told apart by the body's action key, a rule
nobody may call, an admin-only attribute rule beside a member rule, and an
admin template that covers a members' literal path.

:func:`install` registers :func:`list_rules` under the
``oslo.policy.policies`` entry point group as :data:`NAMESPACE`, the way a
service's package does, through a ``.dist-info`` folder on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from oslo_policy import policy

#: The entry point name the defaults are registered under by :func:`install`.
NAMESPACE = "tenancy-mw-test-service"

ADMIN = "role:admin"
MEMBER = "role:member and project_id:%(project_id)s"
READER = "role:reader and project_id:%(project_id)s"


def _rule(name: str, check: str, *operations: str) -> policy.DocumentedRuleDefault:
    listed = [{"method": op.split(" ", 1)[0], "path": op.split(" ", 1)[1]} for op in operations]
    return policy.DocumentedRuleDefault(name, check, "Test rule %s." % name, listed, scope_types=["project"])


def list_rules() -> list[policy.RuleDefault]:
    """The test service's policy defaults (its ``oslo.policy.policies`` entry point)."""
    return [
        policy.RuleDefault("context_is_admin", ADMIN),
        # A member gate with an admin-only refinement of the same call.
        _rule("svc:things:index", READER, "GET /things"),
        _rule("svc:things:index:all_projects", "rule:context_is_admin", "GET /things"),
        # One path, placeholders named differently; an admin attribute rule beside it.
        _rule("svc:things:show", READER, "GET /things/{id}"),
        _rule("svc:thing-attributes", "rule:context_is_admin", "GET /things/{thing_id}", "GET /things/detail"),
        _rule("svc:things:detail", READER, "GET /things/detail"),
        # A reader rule listing the admin-only write among its reads: the write stays admin-only.
        _rule("svc:thing-specs:index", READER, "GET /things/{thing_id}/specs", "POST /things", "PUT /things/{id}"),
        _rule("svc:thing-manage:create", "rule:context_is_admin", "POST /things"),
        _rule("svc:thing-manage:update", "rule:context_is_admin", "PUT /things/{id}"),
        # Actions told apart by the body's key.
        _rule("svc:things:start", MEMBER, "POST /things/{thing_id}/action (start)"),
        _rule("svc:thing-admin:purge", "rule:context_is_admin", "POST /things/{thing_id}/action (purge)"),
        _rule("svc:thing-admin:reset", "rule:context_is_admin", "POST /things/{id}/action (reset-state)"),
        # Nobody may call it.
        _rule("svc:things:retired", "!", "DELETE /things/{id}/history"),
        # An admin template that covers a members' literal path.
        _rule("svc:hosts:show", "rule:context_is_admin", "GET /hosts/{host}"),
        _rule("svc:hosts:mine", READER, "GET /hosts/mine"),
        _rule("svc:services:delete", "rule:context_is_admin", "DELETE /services/{id}"),
    ]


def install(folder: Path) -> None:
    """Register :func:`list_rules` as :data:`NAMESPACE` through a dist-info in *folder*, put on ``sys.path``."""
    info = folder / "tenancy_mw_test_service-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tenancy-mw-test-service\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[oslo.policy.policies]\n%s = tests.support.policy_service:list_rules\n" % NAMESPACE
    )
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
