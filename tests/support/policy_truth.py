"""The truth of a service's policy, judged by the service's own answers, and the public endpoint against it.

Every operation documented in a service's policy defaults (nova's,
cinder's: :func:`tests.support.openstack.policy_operations`) becomes a real
call (:mod:`tests.support.policy_calls`), sent on the ADMIN endpoint (no
``admin_cull``) with a member's token (alice, project alpha, her own
resources) and an admin's.  What the service answers decides:

- ``admin-only``: the member is refused (403) and the admin is not (not 401/403);
- ``member``: the member is not refused, and the answer tells (not the same
  400, 404 or 405 as the admin's, which the service gives before any
  policy check: no such route, resource or body);
- ``unanswerable``: anything else.

Then, on the PUBLIC endpoint (``admin_cull`` on), with fresh resources of
the same shape: every admin-only call, with the admin's token, must get the
cull's refusal in every URL layout, and be refused before any handler runs
(:func:`not_served`) when written with the tricks a lenient router or
parser might accept (path, method and body); none may change anything in
the service's databases.  Every member call must get the answer the admin
endpoint gave (same status, never the cull's), in both layouts.  The two
runs make the same calls in the same order on twin resources, so their
answers can be compared.

Usage::

    outcome = run(NOVA, cloud, public, admin)
    print(outcome.report(derived_verdicts(cloud.venv, "nova")))
    assert not outcome.failures(...)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tenancy_mw.paste_deploy.recipe import RECIPES
from tests.support.openstack import policy_operations
from tests.support.policy_calls import PEOPLE, Plan, lookup, placeholder_values, substitute
from tests.support.policy_derived import derivation

#: admin_cull's refusal in nova's and cinder's error shape (the recipe sets ``error_format = nova``).
CULLED = {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
#: The counts of each service's report, printed at the end of the test run (tests/openstack/conftest.py).
RESULTS: list[str] = []

ADMIN_ONLY, MEMBER, UNANSWERABLE = "admin-only", "member", "unanswerable"
#: How nova and cinder word a refusal for want of a role: their policy's (``PolicyNotAuthorized``), and
#: cinder's own checks of it (``NotAuthorized`` in a controller, ``AdminRequired`` in its database layer).
AUTHORIZATION_REFUSALS = (
    "Policy doesn't allow",
    "You are not authorized to perform this operation",
    "User does not have admin privileges",
)
#: Answers the service gives before any policy check (no such route, resource or body), and the
#: member's answers that therefore tell nothing when the admin gets the same.
REFUSED = (400, 404, 405)
#: How nova and cinder refuse a body no action of theirs reads (before any handler runs).
UNREAD_BODIES = ("There is no such action", "too many body keys", "Malformed request body", "cannot understand JSON")
#: How a path nothing routes is refused (404): the routers' words (the cull's are the same), and
#: tenant_path's for a first segment that is neither a project id nor a collection.
UNROUTED = ("The resource could not be found.", "is neither a tenant id of this service")
_PLACEHOLDER = re.compile(r"\{[^}]*\}")


# --- operations ---------------------------------------------------------------------------


def shape(path: str) -> str:
    """*path* with each placeholder (``{name}`` or ``*``) as ``{}``, no query, no trailing slash: one form per route."""
    path = _PLACEHOLDER.sub("{}", path.split("?")[0]).rstrip("/")
    return "/".join("{}" if segment == "*" else segment for segment in path.split("/")) or "/"


def split_action(documented: str) -> tuple[str, str | None]:
    """``"/servers/{id}/action (reboot)"`` -> ``("/servers/{id}/action", "reboot")``."""
    path, _, rest = " ".join(documented.split()).partition(" (")
    return path, (rest.rstrip(")") or None)


def route_key(method: str, documented: str) -> tuple[str, str]:
    """``(METHOD, "/shape/{} (action)")``: how a documented operation and a derived verdict are matched."""
    path, action = split_action(documented)
    return method.upper(), shape(path) + (" (%s)" % action if action else "")


@dataclass(frozen=True)
class Operation:
    """One call the service answers: a method, a route, and for an action route the body's key."""

    method: str
    #: The path template called (after :attr:`Plan.corrections`), placeholders named.
    path: str
    action: str | None
    #: ``"METHOD path"`` as the policy defaults document it (one or more forms).
    documented: tuple[str, ...]
    policies: tuple[str, ...]

    @property
    def label(self) -> str:
        """``"POST /servers/{}/action (os-migrateLive)"``: the key of the plan's tables."""
        return "%s %s%s" % (self.method, shape(self.path), " (%s)" % self.action if self.action else "")

    @property
    def title(self) -> str:
        """The operation as a person reads it, placeholders named."""
        return "%s %s%s" % (self.method, self.path, " (%s)" % self.action if self.action else "")

    def derived_keys(self) -> list[tuple[str, str]]:
        """The :func:`route_key` of each documented form."""
        return sorted({route_key(*form.split(" ", 1)) for form in self.documented})


def operations(plan: Plan, rules: list[dict]) -> list[Operation]:
    """Every distinct call among *rules* (:func:`~tests.support.openstack.policy_operations`), in their order."""
    grouped: dict[tuple, dict] = {}
    for rule in rules:
        method, documented = rule["method"].upper(), " ".join(rule["path"].split())
        corrected = plan.corrections.get(" ".join(route_key(method, documented)))
        if corrected:
            method, called = corrected.split(" ", 1)
        else:
            called = documented
        path, action = split_action(called)
        path = path.split("?")[0].rstrip("/") or "/"
        entry = grouped.setdefault((method, shape(path), action), {"path": path, "documented": [], "policies": []})
        for key, value in (("documented", "%s %s" % (rule["method"].upper(), documented)), ("policies", rule["name"])):
            if value not in entry[key]:
                entry[key].append(value)
    return [
        Operation(method, entry["path"], action, tuple(entry["documented"]), tuple(entry["policies"]))
        for (method, _, action), entry in grouped.items()
    ]


def destructive(plan: Plan, op: Operation) -> bool:
    """Whether *op* deletes or ends the resource its path names."""
    return op.method == "DELETE" or op.action in plan.destructive_actions


def changes(plan: Plan, op: Operation) -> bool:
    """Whether *op* may change what its path names."""
    return op.method not in ("GET", "HEAD") or op.label in plan.own_labels


def own_kinds(plan: Plan, op: Operation) -> dict[str, str]:
    """The kinds *op* gets a fresh instance of (those of its path it changes: :attr:`Plan.own_kinds`),
    each with the pool it comes from."""
    if not changes(plan, op):
        return {}
    kinds = {name.split(".")[0] for _, name in placeholder_values(plan, op.path)}
    wanted = ("change", "end") if destructive(plan, op) or op.label in plan.own_labels else ("change",)
    aliases = plan.kind_aliases.get(op.label, {})
    return {k: aliases.get(k, k) for k in kinds if plan.own_kinds.get(k) in wanted}


def ordered(plan: Plan, ops: list[Operation]) -> list[Operation]:
    """Reads first, then the calls that change things, then the ones that delete."""
    return sorted(ops, key=lambda op: (changes(plan, op), destructive(plan, op)))


def needs(plan: Plan, ops: list[Operation]) -> Counter:
    """How many fresh instances of each kind each person's world must hold for *ops*."""
    found: Counter = Counter()
    for op in ops:
        for pool in own_kinds(plan, op).values():
            for person in PEOPLE:
                found[(person, pool)] += 1
    return found


# --- calls ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A request of one operation, before its URL prefix: path (with query), body, headers."""

    method: str
    path: str
    query: str
    body: object
    headers: dict


def build(plan: Plan, op: Operation, values: dict) -> Call:
    """*op* as a request, its placeholders and body filled from *values* (one person's world)."""
    path = op.path
    for text, name in placeholder_values(plan, op.path):
        path = path.replace(text, str(lookup(values, name)), 1)
    if op.action:
        body = {op.action: substitute(plan.actions.get(op.action), values)}
    elif op.label in plan.bodies:
        body = substitute(plan.bodies[op.label], values)
    else:
        body = {} if op.method in ("POST", "PUT") else None
    version = microversion(plan, op)
    headers = {"OpenStack-API-Version": "%s %s" % (plan.api_name, version)}
    if plan.service == "nova":
        headers["X-OpenStack-Nova-API-Version"] = version
    return Call(op.method, path, substitute(plan.queries.get(op.label, ""), values), body, headers)


def microversion(plan: Plan, op: Operation) -> str:
    """The microversion *op* is called with: by label, by action, by longest path prefix, else the default."""
    table = plan.microversions
    if op.label in table:
        return table[op.label]
    if op.action and "(%s)" % op.action in table:
        return table["(%s)" % op.action]
    prefixes = [p for p in table if p.startswith("/") and shape(op.path).startswith(p)]
    return table[max(prefixes, key=len)] if prefixes else plan.default_microversion


@dataclass(frozen=True)
class Answer:
    """What came back: the status, whether it is the cull's refusal, and a short excerpt."""

    status: int
    culled: bool
    excerpt: str

    def __str__(self) -> str:
        return "%d%s" % (self.status, " (the cull)" if self.culled else "")


def not_served(answer: Answer) -> bool:
    """Whether *answer* refuses a call before any handler of the service ran it.

    The cull's refusal; or the service's own for a path it does not route
    (404), a method it does not route (405), or a body no action of it reads (400).
    """
    if answer.culled or answer.status == 405:
        return True
    texts = {404: UNROUTED, 400: UNREAD_BODIES}.get(answer.status, ())
    return any(text in answer.excerpt for text in texts)


def answer_of(resp) -> Answer:
    """The :class:`Answer` of a :class:`~tests.support.servers.Response`."""
    try:
        body = resp.json() if resp.body else None
    except ValueError:
        body = None
    return Answer(resp.status, resp.status == 404 and body == CULLED, resp.body[:160].decode("utf-8", "replace"))


def send(endpoint, cloud, person: str, prefix: str, call: Call, **tweak) -> Answer:
    """Send *call* as *person* under URL *prefix*.

    *tweak* may override ``method``, ``target`` (the whole request target), ``raw`` (the body) and add ``headers``.
    """
    target = tweak.get("target") or prefix + call.path + call.query
    target = target.replace("{project}", cloud.people[person].project_id)
    headers = {"X-Auth-Token": cloud.token(person), "Accept": "application/json", **call.headers}
    headers.update(tweak.get("headers", {}))
    body = tweak.get("raw")
    if body is None and call.body is not None:
        body = json.dumps(call.body).encode()
    if body is not None:
        headers["Content-Type"] = "application/json"
    return answer_of(endpoint.request(tweak.get("method", call.method), target, headers, body))


# --- the truth --------------------------------------------------------------------------------


def verdict(member: Answer, admin: Answer | None) -> str:
    """``admin-only``, ``member`` or ``unanswerable`` (see the module's docstring).

    Only a refusal for want of a role makes a call admin-only: a 403 for another
    reason (a quota) says the policy let the member through, but not what the call does.
    *admin* may be None where the member's answer decides alone (:func:`member_decides`).
    """
    refused = member.status == 403 and any(text in member.excerpt for text in AUTHORIZATION_REFUSALS)
    if refused and admin is not None and admin.status not in (401, 403):
        return ADMIN_ONLY
    if member.status in (401, 403):
        return UNANSWERABLE
    if member.status in REFUSED and (admin is None or admin.status == member.status):
        return UNANSWERABLE
    return MEMBER


def member_decides(member: Answer) -> bool:
    """Whether the member's answer is a verdict whatever the admin's: served, or failed past the checks.

    The admin's call is then not made: one request fewer (and, where the service makes an RPC call, one
    MessagingTimeout fewer).
    """
    return member.status not in (401, 403, *REFUSED)


@dataclass
class Judged:
    """The truth of one operation: its verdict and the answers it rests on.

    ``member``: the member's answer in each layout (only the first when refused:
    a refusal changes nothing, and the public endpoint does not repeat it);
    ``admin``: None when the member's answer decides alone.
    """

    verdict: str
    member: list[Answer]
    admin: Answer | None


def judge(plan: Plan, cloud, endpoint, ops: list[Operation], world) -> dict[Operation, Judged]:
    """Each of *ops* tried on the admin endpoint by the member (every layout) and, where needed, the admin."""
    truth = {}
    for op in ops:
        kinds = own_kinds(plan, op)
        mine = build(plan, op, world.values_for(op.label, "alice", kinds))
        members = [send(endpoint, cloud, "alice", plan.member_layouts[0], mine)]
        admin = None
        if member_decides(members[0]):
            members += [send(endpoint, cloud, "alice", prefix, mine) for prefix in plan.member_layouts[1:]]
        else:
            theirs = build(plan, op, world.values_for(op.label, "admin", kinds))
            admin = send(endpoint, cloud, "admin", plan.admin_layouts[0], theirs)
            if members[0].status not in (401, 403):
                members += [send(endpoint, cloud, "alice", prefix, mine) for prefix in plan.member_layouts[1:]]
        truth[op] = Judged(verdict(members[0], admin), members, admin)
    return truth


# --- the public endpoint ----------------------------------------------------------------------


def database_state(paths: list[Path]) -> dict[str, str]:
    """A digest of every table of the SQLite files *paths*: ``"file:table" -> digest``."""
    state = {}
    for path in paths:
        with contextlib.closing(sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                rows = db.execute('SELECT * FROM "%s"' % table).fetchall()  # noqa: S608 - names from sqlite_master
                state["%s:%s" % (path.name, table)] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return state


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The tables whose digest differs from *before* to *after* (:func:`database_state`)."""
    return sorted(t for t in after if after[t] != before.get(t))


class DatabaseWatch:
    """Which tables of the service's SQLite databases changed since it last looked.

    SQLite's ``data_version`` tells at once whether another connection
    committed; only then are the tables read (:func:`database_state`).
    Close it (``with contextlib.closing(...)``) when done.
    """

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.connections = [sqlite3.connect("file:%s?mode=ro" % p, uri=True, timeout=30) for p in paths]
        self.versions = self._versions()
        self.state = database_state(paths)

    def _versions(self) -> list[int]:
        return [db.execute("PRAGMA data_version").fetchone()[0] for db in self.connections]

    def changes(self) -> list[str]:
        """``"file:table"`` of each table changed since the last call (or since the watch began)."""
        versions = self._versions()
        if versions == self.versions:
            return []
        self.versions = versions
        before, self.state = self.state, database_state(self.paths)
        return changed(before, self.state)

    def close(self) -> None:
        for db in self.connections:
            db.close()


def attempts(plan: Plan, op: Operation, call: Call, member_action: tuple[str, object] | None) -> list[tuple]:
    """``(name, expect_cull, tweak)``: every layout, then the path, method and body tricks.

    A layout must get the cull's exact refusal; a trick must be refused before
    any handler of the service ran it (:func:`not_served`): by the cull, or by
    the service when it does not read the trick as the call at all.
    """
    found = [(prefix, True, {"prefix": prefix}) for prefix in plan.admin_layouts]
    first = plan.admin_layouts[0]
    head, _, tail = call.path.lstrip("/").partition("/")
    for name, path in (
        ("upper-case segment", "/%s/%s" % (head.upper(), tail)),
        ("path parameter", call.path + ";x=1"),
        ("extension", call.path + ".json"),
        ("doubled slash", "/" + call.path),
    ):
        found.append((name, False, {"prefix": first, "target": first + path.rstrip("/") + call.query}))
    if op.method != "GET":
        found.append(
            (
                "GET + X-HTTP-Method-Override",
                False,
                {"prefix": first, "method": "GET", "headers": {"X-HTTP-Method-Override": op.method}},
            )
        )
    if op.action:
        value = json.dumps(call.body[op.action])
        key = json.dumps(op.action)
        escaped = '"\\u%04x%s"' % (ord(op.action[0]), op.action[1:])
        other = member_action or ("x", {})
        for name, raw in (
            ("action key upper-cased", "{%s: %s}" % (json.dumps(op.action.upper()), value)),
            ("member key first", "{%s: %s, %s: %s}" % (json.dumps(other[0]), json.dumps(other[1]), key, value)),
            ("action key twice", "{%s: %s, %s: %s}" % (key, value, key, value)),
            ("action key \\u-escaped", "{%s: %s}" % (escaped, value)),
        ):
            found.append((name, False, {"prefix": first, "raw": raw.encode()}))
    return found


def member_actions(plan: Plan, truth: dict[Operation, Judged]) -> dict[tuple[str, str], tuple[str, object]]:
    """For each action route, one action the truth calls a member's, with its body value (for a trick)."""
    found = {}
    for op, judged in truth.items():
        if op.action and judged.verdict == MEMBER:
            found.setdefault((op.method, shape(op.path)), (op.action, plan.actions.get(op.action)))
    return found


def check_admin_only(cloud, endpoint, op: Operation, call: Call, member_action, plan: Plan, watch) -> list[str]:
    """What went wrong when *op*, an admin-only call, was tried on the public endpoint every way."""
    wrong = []
    watch.changes()
    for name, expect_cull, tweak in attempts(plan, op, call, member_action):
        prefix = tweak.pop("prefix")
        got = send(endpoint, cloud, "admin", prefix, call, **tweak)
        touched = watch.changes()
        good = got.culled if expect_cull else not_served(got)
        if not good or touched:
            wrong.append("%s -> %s%s" % (name, got, " changing %s" % ", ".join(touched) if touched else ""))
    return wrong


def check_public(plan: Plan, cloud, endpoint, ops: list[Operation], truth: dict, world) -> dict[Operation, str]:
    """Each of *ops* on the public endpoint, as the truth says it must be answered; what went wrong, by op."""
    with contextlib.closing(DatabaseWatch(plan.databases(cloud))) as watch:
        return _check_public(plan, cloud, endpoint, ops, truth, world, watch)


def _check_public(plan: Plan, cloud, endpoint, ops: list[Operation], truth: dict, world, watch) -> dict:
    wrong = {}
    actions = member_actions(plan, truth)
    for op in ops:
        judged = truth[op]
        kinds = own_kinds(plan, op)
        if judged.verdict == MEMBER:
            call = build(plan, op, world.values_for(op.label, "alice", kinds))
            bad = []
            for prefix, expected in zip(plan.member_layouts, judged.member, strict=True):
                got = send(endpoint, cloud, "alice", prefix, call)
                if (got.status, got.culled) != (expected.status, expected.culled):
                    bad.append("%s -> %s, the admin endpoint %s" % (prefix, got, expected))
            if bad:
                wrong[op] = "member call answered otherwise: " + "; ".join(bad)
        elif judged.verdict == ADMIN_ONLY:
            call = build(plan, op, world.values_for(op.label, "admin", kinds))
            member_action = actions.get((op.method, shape(op.path)))
            bad = check_admin_only(cloud, endpoint, op, call, member_action, plan, watch)
            if bad:
                wrong[op] = "admin-only call not refused: " + "; ".join(bad)
    return wrong


# --- the derived list ---------------------------------------------------------------------


def derived_verdicts(venv: Path, service: str) -> dict[tuple[str, str], str]:
    """What the library derives from *service*'s policy: :func:`route_key` -> ``cull``, ``keep`` or ``undecided``.

    Asked of ``tenancy-mw-manage cull derive --namespace SERVICE --format json``
    with the service's Python (:func:`tests.support.policy_derived.derivation`),
    declaring the members' calls the recipe declares (``policy_member_calls``):
    what ``admin_cull`` derives on the public endpoint.  A declared call is ``keep``.
    """
    declared = [arg for call in RECIPES[service].member_calls for arg in ("--member-call", call)]
    decisions = derivation(venv, service, *declared)["decisions"]
    return {
        route_key(d["method"], d["path"] + (" (%s)" % d["action"] if d["action"] else "")): (
            "keep" if d["declared"] and not d["culled"] else d["outcome"]
        )
        for d in decisions
    }


def derived_of(op: Operation, derived: dict[tuple[str, str], str]) -> str:
    """The derived verdict of *op*: that of its documented forms (``absent`` if none, ``mixed`` if they differ)."""
    found = {derived[key] for key in op.derived_keys() if key in derived}
    return found.pop() if len(found) == 1 else ("mixed" if found else "absent")


# --- one service, start to end ----------------------------------------------------------------


@dataclass
class Outcome:
    """The truth of one service and what its public endpoint did."""

    service: str
    rules: int
    truth: dict[Operation, Judged]
    public: dict[Operation, str]
    seconds: dict[str, float] = field(default_factory=dict)

    def of(self, name: str) -> list[Operation]:
        """The operations whose verdict is *name*."""
        return [op for op, judged in self.truth.items() if judged.verdict == name]

    def disagreements(self, derived: dict | None) -> dict[Operation, str]:
        """Answerable operations the derived list judges otherwise than the truth: op -> derived verdict."""
        if derived is None:
            return {}
        wanted = {ADMIN_ONLY: "cull", MEMBER: "keep"}
        found = {}
        for op in self.of(ADMIN_ONLY) + self.of(MEMBER):
            got = derived_of(op, derived)
            if got != wanted[self.truth[op].verdict]:
                found[op] = got
        return found

    def failures(self, derived: dict | None) -> list[str]:
        """Everything that is not as the truth says, one line each."""
        lines = ["%s: %s" % (op.title, text) for op, text in self.public.items()]
        lines += [
            "%s: the derived list says %s, the service %s" % (op.title, got, self.truth[op].verdict)
            for op, got in self.disagreements(derived).items()
        ]
        return lines

    def report(self, derived: dict | None) -> str:
        """The counts, the unanswerable operations, the derived list's agreement and the failures."""
        ops, admin, member = len(self.truth), self.of(ADMIN_ONLY), self.of(MEMBER)
        unanswerable = self.of(UNANSWERABLE)
        lines = [
            "== %s: %d documented policy operations -> %d calls: %d admin-only, %d member, %d unanswerable =="
            % (self.service, self.rules, ops, len(admin), len(member), len(unanswerable)),
            "unanswerable (member's answer / admin's answer on the admin endpoint):",
        ]
        lines += [
            "  %s: %s / %s  %s"
            % (op.title, self.truth[op].member[0], self.truth[op].admin, self.truth[op].member[0].excerpt[:90])
            for op in unanswerable
        ]
        if derived is None:
            lines.append("derived list: not available (tenancy-mw-manage cull derive)")
        else:
            answerable = len(admin) + len(member)
            lines.append(
                "derived agrees with the truth on %d of %d answerable operations"
                % (answerable - len(self.disagreements(derived)), answerable)
            )
        culled = sum(1 for op in admin if op not in self.public)
        served = sum(1 for op in member if op not in self.public)
        lines.append(
            "public endpoint: %d of %d admin-only calls refused every way; %d of %d member calls served alike"
            % (culled, len(admin), served, len(member))
        )
        failures = self.failures(derived)
        lines.append("failures: %d" % len(failures))
        lines += ["  " + line for line in failures]
        lines.append("time: " + ", ".join("%s %.0f s" % item for item in self.seconds.items()))
        return "\n".join(lines)

    def table(self) -> str:
        """Every operation with its verdict and the answers behind it (for the report file)."""
        return "\n".join(
            "%-12s %-75s member %s, admin %s  [%s]"
            % (j.verdict, op.title, "/".join(str(a) for a in j.member), j.admin or "-", ", ".join(op.policies))
            for op, j in self.truth.items()
        )


def run(plan: Plan, cloud, public, admin) -> Outcome:
    """The truth of *plan*'s service on its *admin* endpoint, then its *public* endpoint checked against it."""
    clock = time.monotonic()
    rules = policy_operations(cloud.venv, plan.service)
    ops = ordered(plan, operations(plan, rules))
    wanted = needs(plan, ops)
    worlds = plan.make_worlds(cloud, admin, wanted, 2)
    seconds = {"resources": time.monotonic() - clock}
    clock = time.monotonic()
    truth = judge(plan, cloud, admin, ops, worlds[0])
    seconds["truth"] = time.monotonic() - clock
    clock = time.monotonic()
    public_wrong = check_public(plan, cloud, public, ops, truth, worlds[1])
    seconds["public endpoint"] = time.monotonic() - clock
    return Outcome(plan.service, len(rules), truth, public_wrong, seconds)
