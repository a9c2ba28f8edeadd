"""``admin_cull`` rules derived from a service's own policy defaults.

OpenStack services declare, in code, every operation they serve and who may
call it: each ``oslo_policy.policy.DocumentedRuleDefault`` lists its
``operations`` (method and path template) and carries a default check
string, registered under the ``oslo.policy.policies`` entry point (nova's
``nova``, cinder's ``cinder``).  :func:`derive` turns them into
``admin_cull`` rules, so the list of admin calls follows the service's next
release and the deployment's own policy file instead of drifting.

How an operation is judged
    Not by reading check strings: oslo.policy itself is asked whether three
    callers of one project may call each rule: an admin, a member and a
    reader (:class:`Personas`, the roles of each are options), with their
    own project and user as the target.  A rule is ``member`` when the
    member or the reader passes, ``target`` when both are refused only for
    want of a target field the service fills in (keystone's
    ``user_id:%(target.user.id)s``), ``admin`` when only the admin passes,
    ``nobody`` when none does (``"!"``, or a policy file that closes it).

Which rule gates an operation
    Several rules may list one operation, and they need not agree: nova's
    admin-only ``servers:index:get_all_tenants`` lists ``GET /servers`` as
    its member rule ``servers:index`` does, while the reader rule
    ``os-flavor-extra-specs:index`` lists ``POST /flavors`` beside the
    admin-only ``os-flavor-manage:create``.  The rules that decide the
    operation are found in two steps, each reported:

    1. *For a write, rules that also list reads are left out* when some
       rule lists the write without reads: they decide what the answer
       shows (``os-flavor-extra-specs:index`` on ``POST /flavors``).
    2. *Sub-checks are left out*: a rule whose name, after its first
       segment, holds another listing rule's name segments in order
       (``compute:servers:create:requested_destination`` refines
       ``os_compute_api:servers:create``; ``server:topology:host:index``
       refines ``server:topology:index``).  A service checks those inside
       the call to widen or narrow what it does, not to let it happen.

    Of the rules left, one ``member`` rule keeps the operation (an
    admin-only rule beside it is a flag, a field or a filter the service
    checks inside the call); else a ``target`` rule leaves it
    **undecided**; else it is culled.

Undecided operations
    Culled, never guessed open, and reported, until the operator names
    them in ``policy_member_calls``: those a ``target`` rule gates; those
    whose culling rule would also cull a members' call (a template over a
    literal path); and those the deployment's policy file closes through a
    rule that lists other calls too (nova's flavor reads, when the file
    hides ``os-flavor-extra-specs:index``: the rule decides only what
    their answer shows).  A decided call named there is not culled either
    (logged at load): documentation can mislead, as cinder's lists only an
    admin-only attribute rule on ``GET /group_types/{group_type_id}``.

Paths are compared by shape
    ``/servers/{id}`` and ``/servers/{server_id}`` are one path: every
    placeholder is ``*``.  A query (``?usage=True``) is dropped.  An action
    operation (``POST /servers/{server_id}/action (os-migrateLive)``) keeps
    its action key: the derived rule matches the JSON body's key
    (``POST /servers/*/action (evacuate,migrate,os-migrateLive)``).

Example, with rules written here rather than read from a service::

    >>> from oslo_policy import policy
    >>> rules = [
    ...     policy.RuleDefault("admin", "role:admin"),
    ...     policy.DocumentedRuleDefault("svc:things:list", "role:reader", "List.",
    ...                                  [{"method": "GET", "path": "/things"}]),
    ...     policy.DocumentedRuleDefault("svc:things:list:all_projects", "rule:admin", "Everyone's.",
    ...                                  [{"method": "GET", "path": "/things"}]),
    ...     policy.DocumentedRuleDefault("svc:things:purge", "rule:admin", "Purge.",
    ...                                  [{"method": "POST", "path": "/things/{thing_id}/action (purge)"}]),
    ...     policy.DocumentedRuleDefault("svc:things:start", "role:member", "Start.",
    ...                                  [{"method": "POST", "path": "/things/{id}/action (start)"}]),
    ... ]
    >>> derived = derive(rules)
    >>> derived.rule_lines()
    ['POST /things/*/action (purge)']
    >>> [(d.operation.text, d.outcome) for d in derived.decisions]
    [('GET /things', 'keep'), ('POST /things/*/action (purge)', 'cull'), ('POST /things/*/action (start)', 'keep')]
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "POLICY_ENTRY_POINT_GROUP",
    "Decision",
    "Derivation",
    "Operation",
    "Personas",
    "PolicyError",
    "Verdict",
    "decide",
    "derive",
    "derive_from_options",
    "log_derivation",
    "parse_operation_line",
    "load_policy_rules",
    "parse_operation",
]

#: The entry point group services register their policy defaults under.
POLICY_ENTRY_POINT_GROUP = "oslo.policy.policies"

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_ACTION = re.compile(r"^(?P<path>.*?)\s*\((?P<action>[^()]*)\)\s*$")
# The project and user of the three callers oslo.policy is asked about.
_PROJECT = "tenancy-mw-policy-project"
_USER = "tenancy-mw-policy-user"


class PolicyError(ValueError):
    """Policy defaults that cannot be read or judged; the message says which and why."""


@dataclasses.dataclass(frozen=True, order=True)
class Operation:
    """One documented operation, compared by shape.

    :ivar method: upper-case HTTP method.
    :ivar shape: the path's segments, each placeholder ``*``, the query dropped.
    :ivar action: the body's action key (``os-migrateLive``), or ``None``.
    """

    method: str
    shape: tuple[str, ...]
    action: str | None = None

    @property
    def path(self) -> str:
        """The shape as a path: ``/servers/*/action``."""
        return "/" + "/".join(self.shape)

    @property
    def text(self) -> str:
        """``METHOD /shape`` with `` (action)`` when it has one."""
        text = "%s %s" % (self.method, self.path)
        return text + " (%s)" % self.action if self.action else text


def parse_operation(method: str, path: str) -> Operation:
    """The :class:`Operation` a policy default documents.

    >>> parse_operation("post", "/servers/{server_id}/action (os-migrateLive)").text
    'POST /servers/*/action (os-migrateLive)'
    >>> parse_operation("GET", "/os-quota-sets/{project_id}?usage=True").text
    'GET /os-quota-sets/*'
    >>> parse_operation("GET", "/images/{image_id}.json").text  # a placeholder in a segment: it varies
    'GET /images/*'
    """
    action = None
    found = _ACTION.match(path)
    if found:
        path, action = found.group("path"), found.group("action").strip() or None
    path = path.split("?", 1)[0]
    shape = tuple("*" if _PLACEHOLDER.search(s) else s for s in path.strip().strip("/").split("/") if s)
    if not method.strip() or not shape:
        raise PolicyError("operation %s %r has no method or no path" % (method, path))
    operation = Operation(method.strip().upper(), shape, action)
    _check_rule(operation)
    return operation


def _check_rule(operation: Operation) -> None:
    """Raise :class:`PolicyError` when *operation* cannot be written as an ``admin_cull`` rule."""
    from tenancy_mw.cull.rules import RuleError, parse_rule

    try:
        parse_rule(operation.text)
    except RuleError as exc:
        raise PolicyError("operation %s cannot be an admin_cull rule: %s" % (operation.text, exc)) from None


def parse_operation_line(line: str) -> Operation:
    """An operation written as the derivation prints it: ``METHOD /path`` or ``METHOD /path (action)``.

    >>> parse_operation_line("PUT /servers/{server_id}/os-volume_attachments/{id}").text
    'PUT /servers/*/os-volume_attachments/*'
    """
    parts = line.strip().split(None, 1)
    if len(parts) != 2 or not parts[1].startswith("/"):
        raise PolicyError("%r is not an operation: write METHOD /path or METHOD /path (action)" % line)
    return parse_operation(parts[0], parts[1])


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Who may call one policy rule: oslo.policy's answers for the three callers.

    :ivar missing: the target fields the rule looked up, and the probe
        target lacked, while refusing the member and the reader
        (keystone's ``user_id:%(target.user.id)s``): with the service's own
        target they might pass.
    """

    admin: bool
    member: bool
    reader: bool
    missing: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """``member`` (a member or reader passes), ``target`` (refused for want of :attr:`missing`),
        ``admin`` (only the admin passes), or ``nobody``."""
        if self.member or self.reader:
            return "member"
        if self.missing:
            return "target"
        return "admin" if self.admin else "nobody"


@dataclasses.dataclass(frozen=True)
class Personas:
    """The roles of the three callers oslo.policy is asked about, all of one project.

    The defaults are Keystone's default roles with their implications (an
    admin is also a member and a reader).
    """

    admin: tuple[str, ...] = ("admin", "member", "reader")
    member: tuple[str, ...] = ("member", "reader")
    reader: tuple[str, ...] = ("reader",)

    def credentials(self) -> dict[str, dict[str, Any]]:
        """oslo.policy credentials of each caller, project-scoped, as keystonemiddleware gives them."""
        return {name: _credentials(roles, name == "admin") for name, roles in dataclasses.asdict(self).items()}


def _credentials(roles: Sequence[str], is_admin: bool) -> dict[str, Any]:
    return {
        "roles": list(roles),
        "project_id": _PROJECT,
        "tenant": _PROJECT,
        "user_id": _USER,
        "user": _USER,
        "is_admin": is_admin,
        "is_admin_project": True,
        "system_scope": None,
        "domain_id": None,
        "project_domain_id": "default",
        "user_domain_id": "default",
    }


@dataclasses.dataclass(frozen=True)
class Decision:
    """What :func:`decide` concluded for one operation, and why.

    :ivar outcome: ``cull``, ``keep`` or ``undecided`` (culled unless declared
        a member call).
    :ivar declared: the operator declared it a members' call
        (``policy_member_calls``): not culled, whatever the outcome.
    :ivar gates: the rules that decided it, each with its kind.
    :ivar listed_by: every rule listing the operation.
    :ivar reason: one sentence for the printed report.
    """

    operation: Operation
    outcome: str
    gates: tuple[tuple[str, str], ...]
    listed_by: tuple[str, ...]
    reason: str
    declared: bool = False

    @property
    def culled(self) -> bool:
        """Whether ``admin_cull`` culls it: decided ``cull`` or undecided, and not declared a members' call."""
        return self.outcome != "keep" and not self.declared


def _subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    items = iter(long)
    return all(any(part == item for item in items) for part in short)


def _refines(name: str, other: str) -> bool:
    """Whether rule *name* refines rule *other*: *other*'s name segments, after the first, in order in *name*'s."""
    mine, theirs = name.split(":")[1:], other.split(":")[1:]
    return bool(theirs) and len(mine) > len(theirs) and _subsequence(theirs, mine)


def decide(
    verdicts: Mapping[str, Verdict],
    operations: Mapping[str, Iterable[Operation]],
    member_calls: Iterable[Operation] = (),
) -> list[Decision]:
    """One :class:`Decision` per operation, sorted; pure (no oslo.policy).

    *verdicts* maps rule names to who may call them; *operations* maps rule
    names to the operations they list; *member_calls* are operations the
    operator declared members' calls (not culled, undecided or not: a
    policy documentation can mislead, as cinder's lists only an admin-only
    attribute rule on ``GET /group_types/{group_type_id}``).

    >>> ops = {"a:list": [parse_operation("GET", "/x")], "a:list:all": [parse_operation("GET", "/x")]}
    >>> who = {"a:list": Verdict(True, True, True), "a:list:all": Verdict(True, False, False)}
    >>> [(d.outcome, d.reason) for d in decide(who, ops)]
    [('keep', 'a:list (member) gates it; a:list:all refines a rule listing it')]
    """
    listing: dict[Operation, list[str]] = {}
    reads: set[str] = set()
    for name, listed in operations.items():
        for operation in set(listed):
            listing.setdefault(operation, []).append(name)
            if operation.method in _READS:
                reads.add(name)
    declared = set(member_calls)
    return [_decide_one(op, sorted(names), verdicts, reads, op in declared) for op, names in sorted(listing.items())]


_READS = frozenset(("GET", "HEAD"))


def _decide_one(
    operation: Operation, names: list[str], verdicts: Mapping[str, Verdict], reads: set[str], declared: bool
) -> Decision:
    """Decide one operation from the rules listing it (see the module documentation)."""
    notes = []
    gating = names
    if operation.method not in _READS:
        # A rule that lists reads too decides what the write's answer shows
        # (nova's os-flavor-extra-specs:index lists POST /flavors), unless
        # no rule lists the write alone.
        writers = [n for n in gating if n not in reads]
        if writers and len(writers) < len(gating):
            notes.append("%s also list%s reads: what the answer shows" % _names_verb([n for n in gating if n in reads]))
            gating = writers
    refining = [n for n in gating if any(_refines(n, other) for other in gating if other != n)]
    if refining:
        notes.append("%s refine%s a rule listing it" % _names_verb(refining))
        gating = [n for n in gating if n not in refining]
    kinds = {verdicts[n].kind for n in gating}
    if "member" not in kinds and "target" in kinds:
        # A member might pass with the service's own target: not ours to guess.
        gates = tuple((n, verdicts[n].kind) for n in gating)
        for name in gating:
            if verdicts[name].kind == "target":
                notes.append(
                    "%s refuses members only for want of %s in the target, which the service fills"
                    % (name, ", ".join(verdicts[name].missing))
                )
        return Decision(operation, "undecided", gates, tuple(names), _reason(gates, notes), declared)
    if "member" in kinds:
        # Members make this call; an admin-only rule beside a member rule is
        # checked by the service inside the call (a flag, a field, a filter).
        gates = tuple((n, "member") for n in gating if verdicts[n].kind == "member")
        others = [n for n in gating if verdicts[n].kind != "member"]
        if others:
            notes.append("%s check%s part of it for admins" % _names_verb(others))
        return Decision(operation, "keep", gates, tuple(names), _reason(gates, notes))
    gates = tuple((n, verdicts[n].kind) for n in gating)
    return Decision(operation, "cull", gates, tuple(names), _reason(gates, notes), declared)


def _names_verb(names: Sequence[str]) -> tuple[str, str]:
    return ", ".join(names), "" if len(names) > 1 else "s"


def _reason(gates: Sequence[tuple[str, str]], notes: Sequence[str]) -> str:
    described = ", ".join("%s (%s)" % gate for gate in gates)
    return "; ".join(["%s gate%s it" % (described, "" if len(gates) > 1 else "s"), *notes])


@dataclasses.dataclass
class Derivation:
    """The result of :func:`derive`: every decision, and what a policy file changed."""

    namespace: str
    decisions: list[Decision]
    #: (operation, outcome with the defaults alone, outcome with the policy file) where they differ.
    overridden: list[tuple[Operation, str, str]] = dataclasses.field(default_factory=list)
    #: Declared member calls that name no operation the derivation culls (ignored).
    unused_member_calls: list[Operation] = dataclasses.field(default_factory=list)

    @property
    def culled(self) -> list[Decision]:
        """The decisions ``admin_cull`` culls."""
        return [d for d in self.decisions if d.culled]

    @property
    def undecided(self) -> list[Decision]:
        """The decisions the policy leaves open, declared or not."""
        return [d for d in self.decisions if d.outcome == "undecided"]

    def rule_lines(self) -> list[str]:
        """The culled operations as ``admin_cull`` rule lines, action keys of one path in one rule.

        A path whose documented actions are all culled (nova's
        ``/os-aggregates/{id}/action``) is culled whatever the body says,
        so its body is never read: the keys matter only beside members' actions.
        """
        plain: set[str] = set()
        keyed: dict[tuple[str, str], set[str]] = {}
        for decision in self.culled:
            operation = decision.operation
            if operation.action:
                keyed.setdefault((operation.method, operation.path), set()).add(operation.action)
            else:
                plain.add("%s %s" % (operation.method, operation.path))
        from tenancy_mw.cull.rules import parse_rule

        # A members' action beside them (on this path, or on one the rule
        # also matches: it may start at any segment) keeps the keys.
        open_calls = [d.operation for d in self.decisions if not d.culled]
        lines = sorted(plain)
        for (method, path), keys in keyed.items():
            unkeyed = "%s %s" % (method, path)
            if any(_matches_a_request_for(parse_rule(unkeyed), op) for op in open_calls):
                lines.append("%s (%s)" % (unkeyed, ",".join(sorted(keys))))
            else:
                lines.append(unkeyed)
        return sorted(set(lines), key=_line_order)

    def report(self) -> str:
        """The printed list: culled, kept-as-declared and undecided operations, each with the rules and why."""
        lines = ["# %s: %d operations, %d culled" % (self.namespace, len(self.decisions), len(self.culled))]
        for title, chosen in (
            ("culled", [d for d in self.decisions if d.outcome == "cull" and not d.declared]),
            ("undecided, culled until declared member calls", [d for d in self.undecided if not d.declared]),
            ("declared member calls (not culled)", [d for d in self.decisions if d.declared]),
        ):
            lines.append("")
            lines.append("## %s (%d)" % (title, len(chosen)))
            lines += ["%-60s %s" % (d.operation.text, d.reason) for d in chosen]
        if self.overridden:
            lines += ["", "## changed by the policy file (%d)" % len(self.overridden)]
            lines += ["%-60s %s -> %s" % (op.text, before, after) for op, before, after in self.overridden]
        if self.unused_member_calls:
            lines += ["", "## declared member calls the derivation does not cull (ignored)"]
            lines += [op.text for op in self.unused_member_calls]
        return "\n".join(lines)


def _line_order(line: str) -> tuple[str, str]:
    method, rest = line.split(" ", 1)
    return rest, method


def load_policy_rules(namespace: str) -> list[Any]:
    """The policy defaults a service registers as *namespace* in ``oslo.policy.policies``.

    Raises :class:`PolicyError` naming the namespaces that are registered
    when *namespace* is not one of them.
    """
    from importlib.metadata import entry_points

    found = [entry for entry in entry_points(group=POLICY_ENTRY_POINT_GROUP) if entry.name == namespace]
    if not found:
        known = sorted({entry.name for entry in entry_points(group=POLICY_ENTRY_POINT_GROUP)})
        raise PolicyError(
            "no policy defaults are registered as %r (entry point group %s; registered here: %s)"
            % (namespace, POLICY_ENTRY_POINT_GROUP, ", ".join(known) or "none")
        )
    rules: list[Any] = []
    for entry in found:
        rules.extend(entry.load()())
    return rules


def derive(
    rules: Iterable[Any],
    *,
    namespace: str = "policy",
    conf: Any = None,
    policy_file: str | None = None,
    personas: Personas | None = None,
    member_calls: Iterable[Operation] = (),
) -> Derivation:
    """Decide every documented operation of *rules* (oslo.policy ``RuleDefault`` objects).

    With *conf* (an oslo.config ``ConfigOpts``, the service's), oslo.policy
    reads the deployment's policy file the way the service does (its
    ``[oslo_policy]`` section; *policy_file* names another file);
    :attr:`Derivation.overridden` lists what it changed against the
    defaults alone.
    """
    rules = list(rules)
    personas = personas or Personas()
    operations = _documented_operations(rules)
    if not operations:
        raise PolicyError("the policy defaults of %s document no operations" % namespace)
    member_calls = list(member_calls)
    # The service's configuration first: its Enforcer registers the
    # [oslo_policy] options the defaults-only judgement copies.
    effective = _judge(rules, operations, personas, conf, policy_file) if conf is not None or policy_file else None
    defaults = _judge(rules, operations, personas, None, None, like=conf)
    decisions = decide(defaults, operations, member_calls)
    overridden = []
    if effective is not None:
        before = {d.operation: d for d in decisions}
        declared = set(member_calls)
        decisions = [
            _closed_by_file(d, before[d.operation], defaults, operations, declared)
            for d in decide(effective, operations, member_calls)
        ]
        overridden = [
            (d.operation, before[d.operation].outcome, d.outcome)
            for d in decisions
            if before[d.operation].culled != d.culled
        ]
    decisions = _mark_conflicts(decisions, set(member_calls))
    not_kept = {d.operation for d in decisions if d.outcome != "keep"}
    unused = sorted(op for op in set(member_calls) if op not in not_kept)
    return Derivation(namespace, decisions, overridden, unused)


def _closed_by_file(
    decision: Decision,
    default: Decision,
    defaults: Mapping[str, Verdict],
    operations: Mapping[str, Iterable[Operation]],
    declared: set[Operation],
) -> Decision:
    """A call the policy file closes through a rule that lists other calls too becomes undecided.

    Such a rule may only decide what the call's answer shows: nova lists
    ``os-flavor-extra-specs:index`` on ``GET /flavors/{flavor_id}``, and a
    file closing the extra specs to members leaves them the flavor, without
    its extra specs.  Culled all the same, but reported, and the operator
    may declare it a members' call.
    """
    if decision.outcome != "cull" or default.outcome != "keep":
        return decision
    closed = [name for name, _ in decision.gates if defaults[name].kind == "member" and len(set(operations[name])) > 1]
    if not closed:
        return decision
    reason = (
        "the policy file closes %s, which list%s other calls too: it may decide only what this call's answer shows; %s"
        % (
            ", ".join(closed),
            "" if len(closed) > 1 else "s",
            decision.reason,
        )
    )
    return dataclasses.replace(decision, outcome="undecided", reason=reason, declared=decision.operation in declared)


def _mark_conflicts(decisions: list[Decision], declared: set[Operation]) -> list[Decision]:
    """Culled operations whose rule would also cull a members' call become undecided.

    A template placeholder matches any segment, so the rule for an admin
    call ``GET /things/*`` would cull a members' ``GET /things/mine``; and a
    rule may start at any segment, so ``POST /things`` culls
    ``POST /x/things`` too.  Each kept operation's path (placeholders
    filled, under a version, with and without a project) is judged by each
    culled operation's rule.
    """
    from tenancy_mw.cull.rules import parse_rule

    kept = [d.operation for d in decisions if not d.culled]
    marked = []
    for decision in decisions:
        operation = decision.operation
        if decision.outcome == "cull":
            rule = parse_rule("%s %s" % (operation.method, operation.path))
            hit = [k for k in kept if k != operation and _culls(rule, operation, k)]
            if hit:
                reason = "its rule would also cull the members' call%s %s; %s" % (
                    "s" if len(hit) > 1 else "",
                    ", ".join(k.text for k in hit),
                    decision.reason,
                )
                decision = dataclasses.replace(
                    decision, outcome="undecided", reason=reason, declared=operation in declared
                )
        marked.append(decision)
    return marked


def _culls(rule: Any, culled: Operation, kept: Operation) -> bool:
    """Whether *rule* (for *culled*) matches a request for the members' operation *kept*."""
    if culled.action and kept.action != culled.action:
        return False  # told apart by the body's key
    return _matches_a_request_for(rule, kept)


def _matches_a_request_for(rule: Any, operation: Operation) -> bool:
    """Whether *rule* matches *operation*'s path, placeholders filled, under a version, with and without a project."""
    from tenancy_mw.core.paths import DEFAULT_VERSION_PATTERN

    version_re = re.compile(DEFAULT_VERSION_PATTERN, re.IGNORECASE)  # re caches the compiled pattern
    filled = tuple("x0" if s == "*" else s for s in operation.shape)
    return any(
        rule.matches(prefix + filled, {operation.method}, version_re) for prefix in (("v2.1",), ("v2.1", "project0"))
    )


def _documented_operations(rules: Iterable[Any]) -> dict[str, list[Operation]]:
    documented: dict[str, list[Operation]] = {}
    for rule in rules:
        for operation in getattr(rule, "operations", None) or ():
            documented.setdefault(rule.name, []).extend(_rule_operations(rule.name, operation))
    return documented


def _rule_operations(name: str, operation: Mapping[str, Any]) -> list[Operation]:
    """The :class:`Operation` objects one documented operation of rule *name* stands for.

    oslo.policy takes any ``method``: keystone documents ``["HEAD", "GET"]``
    for one path, so a list (or ``"HEAD, GET"``) is one operation per method.
    """
    methods = operation.get("method")
    path = operation.get("path")
    if isinstance(methods, str):
        methods = methods.split(",")
    if (
        not isinstance(path, str)
        or not isinstance(methods, (list, tuple))
        or not all(isinstance(method, str) for method in methods)
    ):
        raise PolicyError("rule %s documents an operation that is not a method and a path: %r" % (name, operation))
    try:
        return [parse_operation(method, path) for method in methods]
    except PolicyError as exc:
        raise PolicyError("rule %s: %s" % (name, exc)) from None


def _judge(
    rules: list[Any],
    operations: Mapping[str, Any],
    personas: Personas,
    conf: Any,
    policy_file: str | None,
    like: Any = None,
) -> dict[str, Verdict]:
    """Ask oslo.policy, for each rule listing operations, whether each caller passes."""
    enforcer = _enforcer(rules, conf, policy_file, like)
    credentials = personas.credentials()
    verdicts = {}
    for name in operations:
        missing: set[str] = set()
        admin = _ask(enforcer, name, credentials["admin"], set())
        member = _ask(enforcer, name, credentials["member"], missing)
        reader = _ask(enforcer, name, credentials["reader"], missing)
        refused = not (member or reader)
        verdicts[name] = Verdict(admin, member, reader, tuple(sorted(missing)) if refused else ())
    return verdicts


class _ProbeTarget(dict):
    """The target oslo.policy is asked about, noting each field a check looked up and it lacks."""

    def __init__(self, missing: set[str]) -> None:
        super().__init__(project_id=_PROJECT, tenant_id=_PROJECT, user_id=_USER)
        self.missing = missing

    def __missing__(self, key: str) -> Any:
        self.missing.add(key)
        raise KeyError(key)


def _ask(enforcer: Any, name: str, credentials: Mapping[str, Any], missing: set[str]) -> bool:
    """Whether oslo.policy lets *credentials* call rule *name*; target fields it lacked are added to *missing*."""
    return bool(enforcer.enforce(name, _ProbeTarget(missing), dict(credentials)))


def _enforcer(rules: list[Any], conf: Any, policy_file: str | None, like: Any = None) -> Any:
    """An oslo.policy ``Enforcer`` with *rules* registered.

    Of *conf* (the service's configuration, so its policy file), or, with
    no *conf*, of no file at all, enforcing new defaults and scope as
    *like* (the service's configuration) does.
    """
    _require_oslo_policy()
    from oslo_config import cfg
    from oslo_policy import policy

    own = conf is None
    if own:
        conf = cfg.ConfigOpts()
        conf([], project="tenancy_mw_policy", default_config_files=[], default_config_dirs=[])
    # Without the service's configuration, the file named or none at all:
    # oslo.policy would otherwise look for policy.yaml and policy.d in ~ and /etc.
    enforcer = policy.Enforcer(conf, policy_file=policy_file or (os.devnull if own else None))
    if own:
        conf.set_override("policy_dirs", [], group="oslo_policy")
    if own and like is not None:
        # The settings that change how defaults are read (enforce_scope is gone from recent oslo.policy).
        for name in ("enforce_new_defaults", "enforce_scope"):
            if hasattr(conf.oslo_policy, name) and hasattr(like.oslo_policy, name):
                conf.set_override(name, getattr(like.oslo_policy, name), group="oslo_policy")
    enforcer.register_defaults(rules)
    try:
        enforcer.load_rules(force_reload=True)
    except Exception as exc:  # oslo.policy raises several types for a bad file
        raise PolicyError("the policy file could not be read: %s" % exc) from None
    if policy_file and not enforcer.policy_path:
        # oslo.policy only notes a missing file at debug level; one named here must be read.
        raise PolicyError(
            "the policy file %r was not found (an absolute path, or one in the service's configuration "
            "directories)" % policy_file
        )
    return enforcer


def derive_from_options(options: Any, conf: Any = None) -> Derivation:
    """:func:`derive` for the ``admin_cull`` options (``policy_namespace``, ``policy_file``, the roles...).

    *conf* is the configuration the filter reads (the service's, whose
    ``[oslo_policy]`` section names its policy file); an oslo.config object
    whose command line was never parsed is not used.
    """
    _require_oslo_policy()
    personas = Personas(
        tuple(options.policy_admin_roles), tuple(options.policy_member_roles), tuple(options.policy_reader_roles)
    )
    member_calls = [
        parse_operation_line(line) for text in options.policy_member_calls for line in text.splitlines() if line.strip()
    ]
    return derive(
        load_policy_rules(options.policy_namespace),
        namespace=options.policy_namespace,
        conf=conf if _parsed(conf) else None,
        policy_file=options.policy_file or None,
        personas=personas,
        member_calls=member_calls,
    )


def _require_oslo_policy() -> None:
    """Raise :class:`PolicyError` naming the extra when oslo.policy is not installed."""
    try:
        import oslo_policy  # noqa: F401
    except ImportError as exc:
        raise PolicyError(
            "deriving rules from policy needs oslo.policy (pip install 'tenancy_mw[policy]'): %s" % exc
        ) from None


def _parsed(conf: Any) -> bool:
    """Whether *conf* is an oslo.config object whose command line was parsed (it can find files)."""
    if conf is None:
        return False
    try:
        conf.find_file("tenancy-mw-probe")
    except Exception:  # NotInitializedError, and anything else that is not a usable configuration
        return False
    return True


def log_derivation(log: Any, derivation: Derivation) -> None:
    """Log what a derivation decided at load: a summary, and each policy-file change and undecided call."""
    log.info(
        "admin_cull: %d rules derived from %s's policy (%d of %d operations culled)",
        len(derivation.rule_lines()),
        derivation.namespace,
        len(derivation.culled),
        len(derivation.decisions),
    )
    culled = {d.operation for d in derivation.culled}
    for operation, before, _after in derivation.overridden:
        if operation in culled:
            log.info("admin_cull: the policy file closes %s to members (%s by default): culled", operation.text, before)
        else:
            log.warning(
                "admin_cull: the policy file opens %s to members (%s by default): not culled", operation.text, before
            )
    for decision in derivation.undecided:
        if not decision.declared:
            log.warning("admin_cull: %s is undecided, culled: %s", decision.operation.text, decision.reason)
    for decision in derivation.decisions:
        if decision.declared and decision.outcome == "cull":
            log.warning(
                "admin_cull: policy_member_calls opens %s, which the policy gives admins only (%s): not culled",
                decision.operation.text,
                decision.reason,
            )
    for operation in derivation.unused_member_calls:
        log.warning("admin_cull: policy_member_calls names %s, which is not culled: ignored", operation.text)
