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

import schemathesis

from tests.support.fuzz import LOG_ENV, STATE_FILES_ENV, StateSnapshot

_SNAPSHOT = StateSnapshot(json.loads(os.environ.get(STATE_FILES_ENV, "[]")))
_before: dict = {}


@schemathesis.hook
def before_call(context, case, kwargs) -> None:
    """Snapshot the tables before the request goes out."""
    _before["state"] = _SNAPSHOT.take()


@schemathesis.hook
def after_call(context, case, response) -> None:
    """Log the request; for a refusal, what it changed (nothing, if the demo is right)."""
    status = response.status_code
    # The documented operation (its method and path template), not what a check sent (another method).
    entry = {"method": case.operation.method.upper(), "path": case.operation.path, "status": status}
    if 400 <= status < 500 and "state" in _before:
        changed = StateSnapshot.difference(_before["state"], _SNAPSHOT.take())
        if changed:
            entry["changed"] = changed
            entry["request"] = "%s %s -> %d" % (response.request.method, response.request.url, status)
    _before.clear()
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


@schemathesis.hook
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
