"""How each documented policy operation of nova and cinder becomes a real call here.

:mod:`tests.support.policy_truth` tries every operation of a service's
policy defaults with a member's and an admin's token; this module holds
what that needs per service, as small tables:

- ``corrections``: documented paths no route serves, and the route the
  service really serves for them (cinder's ``PUT /types`` is
  ``PUT /types/{id}``);
- ``placeholders``: which resource fills a ``{placeholder}``, by its name or
  by the segment before it (``/servers/{id}`` -> the person's server);
- ``actions`` and ``bodies``: a minimal body valid for the service's schema
  (nova validates a body before its policy check); an action op sends
  ``{"<action>": actions.get(action)}``;
- ``microversions`` and ``queries``: what some operations need to be served;
- a :class:`World` maker: the resources, made through the admin endpoint
  (types, flavors, aggregates, ...) or, where no back end here could make
  them (servers, available volumes, backups), written by a small script of
  the service's own objects into the cloud's databases.

Every person (``alice``, a member of project alpha, and ``admin``) gets
resources of their own project.  An operation that changes a resource
named in its path works on an instance of its own (made for it), so that a
delete or a state change never takes away what a later call needs.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: Who the calls are made as: the member and the admin of :class:`tests.support.openstack.Cloud`.
PEOPLE = ("alice", "admin")
#: An id of nothing: what an operation gets where no resource of the kind can exist here.
ABSENT = "7e7f0000-0000-4000-8000-00000000abcd"
_PLACEHOLDER = re.compile(r"\{([^}]*)\}")


@dataclass
class World:
    """The resources one run of calls works on, by person.

    ``shared[person][kind]`` serves every call that leaves the resource as it
    is; ``pools[person][kind]`` holds fresh instances, taken one per
    operation that changes a resource of that kind (:meth:`values_for`).
    A resource is an id, or a dict whose ``id`` names it and whose other
    keys are ids that belong to it (a server's instance action request id).
    """

    shared: dict[str, dict[str, object]] = field(default_factory=lambda: {p: {} for p in PEOPLE})
    pools: dict[str, dict[str, list]] = field(default_factory=lambda: {p: {} for p in PEOPLE})
    _taken: dict[tuple, dict[str, object]] = field(default_factory=dict)

    def values_for(self, op_key: str, person: str, own: dict[str, str]) -> dict[str, object]:
        """*person*'s values for operation *op_key*: shared ones, and for each kind of *own* a fresh
        instance taken from the pool *own* names for it.

        The same operation gets the same values every time it is asked (each URL layout of one call).
        """
        found = self._taken.get((op_key, person))
        if found is None:
            found = dict(self.shared[person])
            for kind, pool_name in sorted(own.items()):
                pool = self.pools[person].get(pool_name)
                if not pool:
                    raise RuntimeError("no fresh %s left for %s %s" % (pool_name, person, op_key))
                found[kind] = pool.pop()
            self._taken[(op_key, person)] = found
        return found


def lookup(values: dict[str, object], name: str) -> object:
    """The value *name* names: ``kind`` (a resource's id) or ``kind.part`` (an id that belongs to it)."""
    kind, _, part = name.partition(".")
    value = values[kind]
    if part:
        return value[part]  # type: ignore[index]
    return value["id"] if isinstance(value, dict) else value


def substitute(template, values: dict[str, object]):
    """*template* (JSON-able) with each ``"{name}"`` string replaced by :func:`lookup`'s value.

    ``"{unique}"`` is a fresh name each time, for creates that refuse a name twice.
    """
    if isinstance(template, dict):
        return {k: substitute(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [substitute(v, values) for v in template]
    if not isinstance(template, str):
        return template

    def value(name: str) -> object:
        return "truth-" + uuid.uuid4().hex[:10] if name == "unique" else lookup(values, name)

    whole = _PLACEHOLDER.fullmatch(template)
    if whole:
        return value(whole.group(1))
    return _PLACEHOLDER.sub(lambda m: str(value(m.group(1))), template)


@dataclass(frozen=True)
class Plan:
    """What :mod:`tests.support.policy_truth` needs to call one service's operations."""

    service: str
    #: URL prefixes a member's call is tried under (``{project}``: the caller's project id).
    member_layouts: tuple[str, ...]
    #: URL prefixes an admin-only call must be culled under on the public endpoint.
    admin_layouts: tuple[str, ...]
    #: ``OpenStack-API-Version`` service name, and the microversion calls use unless :attr:`microversions` says.
    api_name: str
    default_microversion: str
    microversions: dict[str, str]
    #: A documented operation's label -> ``"METHOD /path/{name} (action)"`` the service really serves.
    corrections: dict[str, str]
    #: Placeholder name, or the path segment before it -> the value (:func:`lookup` name) that fills it.
    placeholders: dict[str, str]
    #: An action op's body value, by action name (``None`` when not listed).
    actions: dict[str, object]
    #: A body, by operation label (``"METHOD /shape/{} (action)"``); POST and PUT default to ``{}``.
    bodies: dict[str, object]
    queries: dict[str, str]
    #: Kinds an operation gets a fresh instance of: ``"change"``, when it changes it;
    #: ``"end"``, only when it deletes or ends it.
    own_kinds: dict[str, str]
    #: Operations whose fresh instance of a kind comes from another pool (a volume in use): label -> {kind: pool}.
    kind_aliases: dict[str, dict[str, str]]
    #: Actions that delete or end their resource (ordered last, like DELETE).
    destructive_actions: frozenset[str]
    #: Operations that get a fresh instance of every kind in their path, whatever their method
    #: (a GET that changes state; one that needs what the shared instance must not have).
    own_labels: frozenset[str]
    #: Makes the :class:`World` of each run: ``make_worlds(cloud, admin_endpoint, needs, count)``.
    make_worlds: Callable
    #: The service's databases (SQLite files), read to tell whether a call changed anything.
    databases: Callable


def placeholder_values(plan: Plan, template: str) -> list[tuple[str, str]]:
    """``(placeholder text, value name)`` of each placeholder of *template*, per :attr:`Plan.placeholders`."""
    found = []
    segments = template.strip("/").split("/")
    for index, segment in enumerate(segments):
        match = _PLACEHOLDER.fullmatch(segment)
        if not match:
            continue
        before = segments[index - 1] if index else ""
        name = plan.placeholders.get(match.group(1)) or plan.placeholders.get(before)
        if name is None:
            raise KeyError("no value for %s in %s (add it to the %s plan)" % (segment, template, plan.service))
        found.append((segment, name))
    return found


# --- scripts run in the services' virtualenv ------------------------------------------------


def run_script(venv: Path, script: str, config: Path, payload: dict, env: dict) -> object:
    """Run *script* with the services' Python, *config* as its argument and *payload* as JSON on stdin."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, str(config)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if done.returncode:
        raise RuntimeError("seeding failed:\n%s" % done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def user_ids(cloud) -> dict[str, str]:
    """Keystone user id of each of :data:`PEOPLE`."""
    return {name: cloud.identity("GET", "/users?name=%s" % name)["users"][0]["id"] for name in PEOPLE}


def made(resp, what: str) -> dict:
    """The JSON answer of a create that must have worked."""
    if resp.status >= 300:
        raise RuntimeError("making %s failed: %s %s" % (what, resp.status, resp.body[:500]))
    return resp.json() if resp.body else {}
