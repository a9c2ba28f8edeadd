"""Fuzzing the demo with schemathesis: state snapshots, the CLI run, the run's numbers.

- :class:`StateSnapshot` reads every table of the demo's SQLite files (the
  servers and their tags, the tenant registry, the two cells) into one
  comparable value, so a test can tell whether a request changed anything.
- :func:`run_schemathesis` runs ``schemathesis run`` against one endpoint's
  own document, bounded in examples and wall time, with
  :mod:`tests.support.fuzz_hooks` loaded: it counts every request and
  compares the snapshot before and after each refused one.
- :data:`RESULTS` collects each run's numbers; ``tests/functional/conftest.py``
  prints them at the end of the pytest run (``make test`` shows them).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field

from tests.conftest import REPO_ROOT

#: Tables a refused request may change, by design: the idempotency store keeps
#: the answer to a request retried with its token, a refusal included.
UNWATCHED_TABLES = frozenset({"tenancy_mw_idempotency"})

#: The checks run on every answer: no 5xx; status, Content-Type, headers and body as documented;
#: a 405's Allow naming the documented methods.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "allow_header_conformance",
)

#: Environment variables the hooks module reads (set by :func:`run_schemathesis`).
STATE_FILES_ENV = "DEMO_FUZZ_STATE_FILES"
LOG_ENV = "DEMO_FUZZ_LOG"
#: Values the demo holds, for the hooks to steer a share of the cases to (tests/support/fuzz_hooks.py).
REAL_VALUES_ENV = "DEMO_FUZZ_REAL_VALUES"


class StateSnapshot:
    """The rows of every table of some SQLite files, but :data:`UNWATCHED_TABLES`.

    >>> StateSnapshot([]).take()
    {}
    """

    def __init__(self, paths) -> None:
        self.paths = [str(path) for path in paths]

    def take(self) -> dict:
        """``{"file:table": sorted rows}`` now (read-only connections: the demo's writes are never blocked long)."""
        found = {}
        for path in self.paths:
            conn = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
            try:
                tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    if table in UNWATCHED_TABLES or table.startswith("sqlite_"):
                        continue
                    # The table names come from sqlite_master, not from a client.
                    rows = conn.execute('SELECT * FROM "%s"' % table).fetchall()  # noqa: S608
                    found["%s:%s" % (os.path.basename(path), table)] = sorted(rows, key=repr)
            finally:
                conn.close()
        return found

    @staticmethod
    def difference(before: dict, after: dict) -> list[str]:
        """The tables whose rows differ, each with how many rows left and arrived."""
        changed = []
        for table in sorted(set(before) | set(after)):
            old, new = before.get(table, []), after.get(table, [])
            if old != new:
                gone = [row for row in old if row not in new]
                came = [row for row in new if row not in old]
                changed.append(
                    "%s: %d row(s) removed %r, %d added %r" % (table, len(gone), gone[:2], len(came), came[:2])
                )
        return changed


@dataclass
class FuzzRun:
    """The numbers of one schemathesis run against one endpoint."""

    endpoint: str
    exit_code: int
    output: str
    #: ``(method, path template, status)`` of every request the run made.
    requests: list = field(default_factory=list)
    #: Refused requests (4xx) after which a watched table had changed: ``(request, changes)``.
    refused_changes: list = field(default_factory=list)
    #: The JSON report of schemathesis (``operations``, ``test_cases``, ``failures`` ...).
    report: dict = field(default_factory=dict)

    @property
    def operations(self) -> set:
        """The operations (``METHOD /template``) the run sent at least one request to."""
        return {"%s %s" % (method, path) for method, path, _ in self.requests}

    def never_served(self) -> set:
        """The operations (``"METHOD /template"``) no request of which was answered ``2xx``."""
        served = {"%s %s" % (method, path) for method, path, status in self.requests if 200 <= status < 300}
        return self.operations - served

    def statuses(self) -> dict:
        """How many answers of each status the run got."""
        counted: dict = {}
        for _, _, status in self.requests:
            counted[status] = counted.get(status, 0) + 1
        return dict(sorted(counted.items()))


#: Every run's numbers, printed at the end of the pytest run (tests/functional/conftest.py).
RESULTS: list[str] = []


def run_schemathesis(
    endpoint: str,
    base_url: str,
    state_files,
    work_dir,
    *,
    parameters: dict,
    max_examples: int,
    timeout: float,
    seed: int,
    checks: tuple = CHECKS,
    real_values: dict | None = None,
) -> FuzzRun:
    """``schemathesis run`` of *base_url*'s ``/openapi.json`` against *base_url*, every phase (stateful included).

    *parameters* fixes parameters everywhere (``{"path.project_id": "fuzz"}``: a tenant that
    exists); *max_examples* bounds each operation's cases and *timeout* the whole run
    (``subprocess.TimeoutExpired`` past it).  One worker, so requests never overlap and
    the hooks can tell what each refused one changed.  *real_values* (ids, tags, versions the
    demo holds) are what the hooks give about half the cases instead of the generated values.
    """
    work_dir = str(work_dir)
    config = os.path.join(work_dir, "schemathesis-%s.toml" % endpoint)
    with open(config, "w", encoding="utf-8") as out:
        out.write("[parameters]\n")
        for name, value in parameters.items():
            out.write("%s = %s\n" % (json.dumps(name), json.dumps(value)))
    log_path = os.path.join(work_dir, "requests-%s.jsonl" % endpoint)
    report_path = os.path.join(work_dir, "report-%s.json" % endpoint)
    for stale in (log_path, report_path):  # the hooks append: this run's requests only
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(
        os.environ,
        SCHEMATHESIS_HOOKS="tests.support.fuzz_hooks",
        PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **{
            STATE_FILES_ENV: json.dumps([str(path) for path in state_files]),
            LOG_ENV: log_path,
            REAL_VALUES_ENV: json.dumps(real_values or {}),
        },
    )
    command = [
        os.path.join(os.path.dirname(sys.executable), "schemathesis"),
        "--no-color",
        "--config-file",
        config,
        "run",
        base_url + "/openapi.json",
        "--url",
        base_url,
        "--workers",
        "1",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--checks",
        ",".join(checks),
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--request-timeout",
        "10",
        "--no-shrink",
        "--continue-on-failure",
        "--report",
        "json",
        "--report-json-path",
        report_path,
        "--warnings",
        "off",
    ]
    done = subprocess.run(command, cwd=work_dir, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    run = FuzzRun(endpoint, done.returncode, done.stdout + done.stderr)
    if os.path.exists(log_path):
        with open(log_path, encoding="utf-8") as log:
            for line in log:
                entry = json.loads(line)
                run.requests.append((entry["method"], entry["path"], entry["status"]))
                if entry.get("changed"):
                    run.refused_changes.append((entry["request"], entry["changed"]))
    if os.path.exists(report_path):
        with open(report_path, encoding="utf-8") as report:
            run.report = json.load(report)
    return run
