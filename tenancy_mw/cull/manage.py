"""``tenancy-mw-manage cull``: print the admin calls ``admin_cull`` derives from a service's policy.

``cull derive --namespace NAME [--config-file FILE ...] [--policy-file FILE] [--format report|rules|json]``
    Derive the rules as ``admin_cull`` with ``policy_namespace = NAME``
    does at load (:mod:`tenancy_mw.cull.policy`), and print them before
    anyone trusts them: ``report`` (the default) lists every culled
    operation with the rules that gate it, the undecided ones and why, and
    what the policy file changed; ``rules`` prints only the rule lines;
    ``json`` prints every decision.  ``--member-call OPERATION`` (repeated)
    declares an undecided operation a members' call, as
    ``policy_member_calls`` does; ``--admin-roles``, ``--member-roles`` and
    ``--reader-roles`` set the callers asked about.  Run it with the service's Python (its
    policy defaults must be importable) and its configuration file, whose
    ``[oslo_policy]`` section names the deployment's policy file.  Exit 1,
    with one line saying why, when the namespace is not registered, a
    configuration or policy file cannot be found or read, or a
    ``--member-call`` is not an operation.

    >>> import contextlib, io
    >>> from tenancy_mw.manage import main
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     status = main(["cull", "derive", "--namespace", "no-such-service"])
    >>> status, err.getvalue().startswith("tenancy-mw-manage: no policy defaults are registered as 'no-such-service'")
    (1, True)
"""

from __future__ import annotations

import argparse
import json
import types

from tenancy_mw.cull.filter import OPTS
from tenancy_mw.cull.policy import Derivation, PolicyError, derive_from_options

__all__ = ["register"]


def _default(name: str) -> list[str]:
    return next(opt.default for opt in OPTS if opt.dest == name)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``cull`` group to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("cull", help="print the admin calls admin_cull derives from a service's policy")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
    derive = verbs.add_parser("derive", help="print the rules derived from a service's policy defaults and file")
    derive.add_argument("--namespace", required=True, help="the service's oslo.policy.policies name (nova, cinder)")
    derive.add_argument(
        "--config-file",
        action="append",
        default=[],
        metavar="FILE",
        help="the service's configuration file (its [oslo_policy] section names the policy file); repeatable",
    )
    derive.add_argument("--policy-file", metavar="FILE", help="judge with this policy file instead")
    for persona in ("admin", "member", "reader"):
        name = "policy_%s_roles" % persona
        derive.add_argument(
            "--%s-roles" % persona,
            dest=name,
            default=",".join(_default(name)),
            metavar="ROLES",
            help="comma-separated roles of the %s asked about (default: %%(default)s)" % persona,
        )
    derive.add_argument(
        "--member-call",
        dest="policy_member_calls",
        action="append",
        default=[],
        metavar="OPERATION",
        help="an undecided operation that is a members' call here ('PUT /path/*'), as policy_member_calls",
    )
    derive.add_argument("--format", choices=["report", "rules", "json"], default="report")
    derive.set_defaults(func=_derive)


def _derive(args: argparse.Namespace) -> int:
    from tenancy_mw.manage import CommandError

    options = types.SimpleNamespace(
        policy_namespace=args.namespace,
        policy_file=args.policy_file,
        policy_member_calls=args.policy_member_calls,
        **{
            name: [role.strip() for role in getattr(args, name).split(",") if role.strip()]
            for name in ("policy_admin_roles", "policy_member_roles", "policy_reader_roles")
        },
    )
    try:
        derivation = derive_from_options(options, _service_conf(args.config_file))
    except PolicyError as exc:
        raise CommandError(str(exc)) from None
    if args.format == "rules":
        print("\n".join(derivation.rule_lines()))
    elif args.format == "json":
        print(json.dumps(_as_json(derivation), indent=1, sort_keys=True))
    else:
        print(derivation.report())
    return 0


def _service_conf(files: list[str]):
    """The service's configuration read from *files*, or ``None`` when none is given."""
    if not files:
        return None
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    try:
        conf([], project="tenancy_mw", default_config_files=files, default_config_dirs=[])
    except cfg.Error as exc:
        from tenancy_mw.manage import CommandError

        raise CommandError("cannot read %s: %s" % (", ".join(files), exc)) from None
    return conf


def _as_json(derivation: Derivation) -> dict:
    return {
        "namespace": derivation.namespace,
        "rules": derivation.rule_lines(),
        "decisions": [
            {
                "operation": d.operation.text,
                "method": d.operation.method,
                "path": d.operation.path,
                "action": d.operation.action,
                "outcome": d.outcome,
                "culled": d.culled,
                "declared": d.declared,
                "gates": [{"rule": name, "kind": kind} for name, kind in d.gates],
                "listed_by": list(d.listed_by),
                "reason": d.reason,
            }
            for d in derivation.decisions
        ],
        "overridden": [
            {"operation": op.text, "default": before, "effective": after} for op, before, after in derivation.overridden
        ],
        "unused_member_calls": [op.text for op in derivation.unused_member_calls],
    }
