"""schemathesis hooks of the demo's fuzzer (``SCHEMATHESIS_HOOKS=tests.support.fuzz_hooks``).

Loaded by ``schemathesis run`` in :func:`tests.support.fuzz.run_schemathesis`:
before each request it snapshots the demo's tables
(:class:`tests.support.fuzz.StateSnapshot`, files named by
``DEMO_FUZZ_STATE_FILES``); after it, it appends one JSON line to
``DEMO_FUZZ_LOG``: the operation, the status and, for a refused request
(``4xx``), every table it changed.  The run is one worker, so nothing else
writes between the two snapshots.  A case whose path is another documented
route's (``{id}`` = ``detail``) is left out: it is that route's case.
"""

from __future__ import annotations

import json
import os
import re
import zlib

import schemathesis

from tests.support.fuzz import LOG_ENV, REAL_VALUES_ENV, STATE_FILES_ENV, StateSnapshot

_SNAPSHOT = StateSnapshot(json.loads(os.environ.get(STATE_FILES_ENV, "[]")))
_before: dict = {}


def before_call(context, case, kwargs) -> None:
    """Snapshot the tables before the request goes out."""
    _before["state"] = _SNAPSHOT.take()


def after_call(context, case, response) -> None:
    """Log the request; for a refusal, what it changed (nothing, if the demo is right)."""
    status = response.status_code
    # The documented operation (its method and path template), not what a check sent (another method).
    entry = {"method": case.operation.method.upper(), "path": case.operation.path, "status": status}
    if 400 <= status < 500:
        entry["code"] = _error_code(response)
    if 400 <= status < 500 and "state" in _before:
        changed = StateSnapshot.difference(_before["state"], _SNAPSHOT.take())
        if changed:
            entry["changed"] = changed
            entry["request"] = "%s %s -> %d" % (response.request.method, response.request.url, status)
    _before.clear()
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def filter_path_parameters(context, path_parameters) -> bool:
    """Leave out a case whose path is another documented route's (``/os-hypervisors/detail`` for
    ``/os-hypervisors/{id}``): that request is a case of the other operation, checked there."""
    operation = context.operation
    if operation is None or not path_parameters:
        return True
    target = operation.path
    for name, value in path_parameters.items():
        target = target.replace("{%s}" % name, str(value))
    return target == operation.path or target not in _documented_paths(operation.schema)


def _documented_paths(schema) -> frozenset:
    found = _paths.get(id(schema))
    if found is None:
        found = _paths[id(schema)] = frozenset(schema.raw_schema.get("paths", {}))
    return found


_paths: dict = {}


# Steering: most generated cases (three in four) carry values the demo holds (a real server, service or
# hypervisor id, a tag it has, a microversion it serves), so the calls behind them are reached,
# not only refused.  Which cases: a deterministic function of the generated value (a hash); the
# run still varies a little (what earlier cases deleted, the servers' timing).
# DEMO_FUZZ_REAL_VALUES: {"path": {NAME or NAME@PATH-PART: [values]},
# "path_delete": {...} (a DELETE's own), "path_by_operation": {"METHOD /template": {...}},
# "header": {NAME: [values]}, "query": {NAME: [values]},
# "tenant_admin": TENANT,
# "not_steered": ["METHOD /template"]}: a call
# that would destroy what the others are steered to (deleting the seeded servers) is left alone.
_REAL = json.loads(os.environ.get(REAL_VALUES_ENV, "{}"))


def _pick(generated, choices: list):
    """One of *choices* for an empty value and about three other generated values in four (by their
    hash), else ``None``.  (Hypothesis's simplest value, ``""``, would otherwise be one fixed decision.)"""
    digest = zlib.crc32(repr(generated).encode("utf-8", "backslashreplace"))
    if not choices or (generated != "" and digest % 4 == 0):
        return None
    return choices[(digest >> 2) % len(choices)]


def map_path_parameters(context, path_parameters):
    """Real ids for most cases; the tenant admin calls on a tenant of their own (deleting
    the tenant every other call runs under would make the rest of the run depend on when)."""
    operation = context.operation
    if operation is None or not path_parameters:
        return path_parameters
    mapped = dict(path_parameters)
    if "%s %s" % (operation.method.upper(), operation.path) in _REAL.get("not_steered", []):
        return mapped
    # A DELETE takes its own values where there are (a tag of its own: the others' stays).
    call = "%s %s" % (operation.method.upper(), operation.path)
    real = dict(_REAL.get("path", {}))
    if operation.method.upper() == "DELETE":
        real.update(_REAL.get("path_delete", {}))
    real.update(_REAL.get("path_by_operation", {}).get(call, {}))  # this call's own, if any
    for name, value in path_parameters.items():
        # NAME, or NAME@PART where PART is in the operation's path: the longest PART that is.
        matching = [
            (len(key), values)
            for key, values in real.items()
            if key == name or (key.startswith(name + "@") and key.split("@", 1)[1] in operation.path)
        ]
        choices = max(matching, key=lambda found: found[0])[1] if matching else None
        picked = _pick(value, choices or [])
        if picked is not None:
            mapped[name] = picked
    tenant_admin = _REAL.get("tenant_admin")
    if (
        tenant_admin
        and "tenant_id" in mapped
        and re.fullmatch(r"/v2\.1/\{tenant_id\}(/action/restore)?", operation.path)
    ):
        mapped["tenant_id"] = tenant_admin
    return mapped


def _steered(values: dict, kind: str) -> dict:
    """*values* (a case's headers or query) with the demo's own value for most of those it has."""
    if not values:
        return values
    mapped = dict(values)
    for name, choices in _REAL.get(kind, {}).items():
        if name in mapped:
            picked = _pick(mapped[name], choices)
            if picked is not None:
                mapped[name] = picked
    return mapped


def map_headers(context, headers):
    """A version the demo serves for most cases that send the header."""
    return _steered(headers, "header")


def map_query(context, query):
    """A query parameter the demo holds a value for (a move's destination tenant) for most cases."""
    return _steered(query, "query")


def _error_code(response) -> str | None:
    """The error code of a refusal's JSON body (either shape), for the log."""
    try:
        body = response.json()
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("errors"), list) and body["errors"]:
        return body["errors"][0].get("code")
    fault = next(iter(body.values()), None) if isinstance(body, dict) and len(body) == 1 else None
    return fault.get("code") if isinstance(fault, dict) else None


# pytest --doctest-modules imports every module of tests/, this one too: the hooks are registered
# only in the `schemathesis run` that tests.support.fuzz starts (its environment names the log),
# never in the pytest process, whose own schemathesis calls they would break.
if LOG_ENV in os.environ:
    for _hook in (before_call, after_call, filter_path_parameters, map_path_parameters, map_headers, map_query):
        schemathesis.hook(_hook)
