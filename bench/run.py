"""Speed and memory of every tenancy_mw filter, next to oslo.middleware's ``RequestId``.

Run it with ``make bench`` (or ``.venv/bin/python bench/run.py``).  The speed
goals of the library live here and only here: timed assertions in the test
suite would fail on a busy machine, a ratio measured in one run would not.

Every filter is called in process, as a WSGI server calls it (no server, no
webtest), around a tiny app that answers at once.  Each row is one request
shape, timed in batches; the bare app's row is subtracted, so what is left
is the filter's own cost (its *overhead*), which is then divided by the
overhead of ``RequestId`` measured in the same run.  A ratio is what holds
from one machine to another; absolute nanoseconds do not.

See ``bench/README.rst`` for how to read the table and how to add a filter.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import re
import statistics
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from time import perf_counter_ns
from urllib.parse import unquote

from idempotency_cases import cases as idempotency_cases
from idempotency_cases import report_lines as idempotency_report_lines
from oslo_middleware.request_id import RequestId

from tenancy_mw.core.bodies import MAX_DEPTH
from tenancy_mw.cull.actions import ACTION_BODY_LIMIT, MAX_CONTAINERS
from tenancy_mw.cull.overrides import MAX_ESCAPES
from tenancy_mw.tags.filter import TagQueryFilter
from tenancy_mw.tenants.path_filter import TenantPath

try:
    from tenancy_mw.cull.filter import AdminCull
except ModuleNotFoundError as exc:
    # Only "the module is not written yet" is tolerated; a broken admin_cull
    # (an import error inside it) must fail the bench, not drop its rows.
    if exc.name != "tenancy_mw.cull.filter":
        raise
    AdminCull = None

#: nova 34's admin calls as admin_cull derives them from its policy defaults.
NOVA_POLICY_RULES = (Path(__file__).resolve().parent / "nova-policy-rules.txt").read_text()

#: The goal of a filter that looks at every request: at most this share of
#: what ``RequestId`` (a filter every OpenStack pipeline already runs) costs.
ONE_THIRD = 1 / 3

TENANT = "8f14e45fceea167a5a36dedd4bea2543"

# What a WSGI server (gunicorn) hands a filter for an API call of a client
# such as python-novaclient.  Copied for every request, as a server builds a
# fresh environ; RAW_URI is gunicorn's raw request target, which tenancy_mw
# prefers to the decoded PATH_INFO.
BASE_ENVIRON = {
    "REQUEST_METHOD": "GET",
    "SCRIPT_NAME": "",
    "PATH_INFO": "/",
    "RAW_URI": "/",
    "QUERY_STRING": "",
    "SERVER_NAME": "compute.example.com",
    "SERVER_PORT": "8774",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "REMOTE_ADDR": "203.0.113.7",
    "REMOTE_PORT": "53124",
    "SERVER_SOFTWARE": "gunicorn/23.0.0",
    "HTTP_HOST": "compute.example.com:8774",
    "HTTP_ACCEPT": "application/json",
    "HTTP_ACCEPT_ENCODING": "gzip, deflate",
    "HTTP_CONNECTION": "keep-alive",
    "HTTP_USER_AGENT": "python-novaclient keystoneauth1/5.8.0 python-requests/2.32.3 CPython/3.11.7",
    "HTTP_X_AUTH_TOKEN": "gAAAAABnQx3k" + "Zq7vR2mT9yL4wP1sN8cB5dF0hJ6kX3aE" * 5,
    "HTTP_X_OPENSTACK_NOVA_API_VERSION": "2.90",
    "wsgi.version": (1, 0),
    "wsgi.url_scheme": "http",
    "wsgi.input": None,  # a fresh BytesIO per request, see _serve
    "wsgi.errors": sys.stderr,
    "wsgi.multithread": False,
    "wsgi.multiprocess": True,
    "wsgi.run_once": False,
    "wsgi.input_terminated": True,
}

BODY = [b'{"servers": []}']


def bare_app(environ, start_response):
    """The wrapped service, reduced to nothing, so only the filters are measured."""
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "15")])
    return BODY


def _write(data):
    """The ``write`` callable a server's ``start_response`` returns; never used here."""


def _start_response(status, headers, exc_info=None):
    """A server's ``start_response`` minus the socket: in every row, so subtracted."""
    return _write


def target(raw_target: str, method: str = "GET") -> dict:
    """``environ`` overrides for a request line: ``RAW_URI``, ``PATH_INFO``, ``QUERY_STRING``, method.

    ``PATH_INFO`` is decoded the way a server decodes it (PEP 3333: bytes as
    latin-1), so it agrees with ``RAW_URI`` as it does behind gunicorn.
    """
    path, _, query = raw_target.partition("?")
    return {
        "REQUEST_METHOD": method,
        "RAW_URI": raw_target,
        "PATH_INFO": unquote(path, encoding="latin-1"),
        "QUERY_STRING": query,
    }


@dataclass
class Case:
    """One row of the table: a filter (or none) and the request it is timed on.

    :ivar name: the row's name, unique; also the key in ``--json`` output.
    :ivar filter: the name of the filter the row is about (its goal is per filter).
    :ivar wrap: builds the filter around an app: ``callable(app) -> app``.
    :ivar environ: overrides of :data:`BASE_ENVIRON` (see :func:`target`).
    :ivar body: the request body, a fresh ``wsgi.input`` per request.
    :ivar goal: the highest allowed overhead / ``RequestId`` overhead, or ``None``.
    :ivar reaches_app: checked once before timing, on the environ the app
        saw: proves the row times the path it claims (the pass-through one,
        not an error answer).  ``None``: only check the app was reached.
    :ivar max_overhead_ns: an absolute goal instead of a ratio, for the
        worst-case rows (the largest body or target a filter judges): the
        most its overhead may be, in nanoseconds.
    :ivar share: the share of the batch's requests this row makes (heavy
        rows make fewer; their time is still reported per request).
    """

    name: str
    filter: str
    wrap: Callable[[Callable], Callable]
    environ: dict = field(default_factory=dict)
    body: bytes = b""
    goal: float | None = None
    reaches_app: Callable[[dict], bool] | None = None
    max_overhead_ns: float | None = None
    share: float = 1.0

    def calls(self, calls: int) -> int:
        """Requests per batch for this row."""
        return max(1, int(calls * self.share))

    def template(self) -> dict:
        environ = dict(BASE_ENVIRON, **self.environ)
        if self.body:
            environ["CONTENT_LENGTH"] = str(len(self.body))
        return environ


def _has_tenant(tenant_id: str) -> Callable[[dict], bool]:
    return lambda seen: seen.get("tenancy.tenant_id") == tenant_id


def _no_tenant(seen: dict) -> bool:
    return "tenancy.tenant_id" not in seen


BARE = "bare app"
REQUEST_ID = "RequestId"
#: The absolute goal of the worst-case rows: no request costs a filter more.
WORST_CASE_NS = 5_000_000


def _multipart_body(size: int) -> bytes:
    """A multipart form of many small parts (18,000 in 1 MiB), none of them _method."""
    part = b'--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n'
    body = part * ((size - 8) // len(part))
    return body + b"--zz--\r\n"


def _worst_action_body(size: int) -> bytes:
    """A member's action body of *size* bytes at most, the costliest admin_cull reads whole.

    As many arrays as it decodes (MAX_CONTAINERS), nested to MAX_DEPTH, then
    numbers to the size: every value the decoder makes.
    """
    nest = b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 2)
    nests = b",".join([nest] * ((MAX_CONTAINERS - 1) // (MAX_DEPTH - 2)))
    head, tail = b'{"reboot": [' + nests, b"]}"
    return head + b",1" * ((size - len(head) - len(tail)) // 2) + tail


#: The rows, in print order.  A new filter is one or a few entries here.
CASES = [
    Case(BARE, "-", lambda app: app, target("/v2.1/%s/servers/detail" % TENANT)),
    Case(
        REQUEST_ID,
        "oslo RequestId",
        lambda app: RequestId(app, {}),
        target("/v2.1/%s/servers/detail" % TENANT),
        reaches_app=lambda seen: "openstack.request_id" in seen,
    ),
    Case(
        "tenant_path match",
        "tenant_path",
        lambda app: TenantPath(app, {}),
        target("/v2.1/%s/servers/detail?limit=20" % TENANT),
        goal=ONE_THIRD,
        reaches_app=_has_tenant(TENANT),
    ),
    Case(
        "tenant_path version doc",
        "tenant_path",
        lambda app: TenantPath(app, {}),
        target("/v2.1/"),
        goal=ONE_THIRD,
        reaches_app=_no_tenant,
    ),
    Case(
        "tenant_path healthcheck",
        "tenant_path",
        lambda app: TenantPath(app, {}),
        target("/healthcheck"),
        goal=ONE_THIRD,
        reaches_app=_no_tenant,
    ),
    Case(
        "tenant_path encoded",
        "tenant_path",
        lambda app: TenantPath(app, {}),
        target("/v1.0/Bob's%20Tenant/widgets"),
        goal=ONE_THIRD,
        reaches_app=_has_tenant("Bob's Tenant"),
    ),
]

if AdminCull is not None:
    CASES += [
        Case(
            "admin_cull GET",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            target("/v2.1/%s/servers/detail?limit=20" % TENANT),
            goal=ONE_THIRD,
        ),
        Case(
            "admin_cull POST",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/v2.1/%s/servers" % TENANT, method="POST"), CONTENT_TYPE="application/json"),
            body=b'{"server": {"name": "web1", "imageRef": "70a599e0", "flavorRef": "1"}}',
            goal=ONE_THIRD,
        ),
        # A public DELETE: the tenant rule (PUT,DELETE /{version}/{tenant})
        # has no literal to pre-test, so this is the slowest pass-through.
        Case(
            "admin_cull DELETE",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            target("/v2.1/%s/servers/7c9e6679-7425-40de-944b-e07fc1f90ae7" % TENANT, method="DELETE"),
            goal=ONE_THIRD,
        ),
        # Worst cases: the largest form body admin_cull reads (FORM_BODY_LIMIT,
        # on a path that is admin for other methods, so the body is scanned
        # for _method) and the longest target it judges (max_target_length).
        # Goal: at most 5 ms each, whatever the client sends.
        Case(
            "admin_cull 1MiB form",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/v2.1/%s" % TENANT, method="POST"), CONTENT_TYPE="application/x-www-form-urlencoded"),
            body=b"a&" * (512 * 1024),
            max_overhead_ns=WORST_CASE_NS,
            share=0.002,
        ),
        Case(
            "admin_cull 1MiB multipart",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/v2.1/%s" % TENANT, method="POST"), CONTENT_TYPE="multipart/form-data; boundary=zz"),
            body=_multipart_body(1024 * 1024),
            max_overhead_ns=WORST_CASE_NS,
            share=0.002,
        ),
        # Second review of issue 6: a form of as many escapes of _method's
        # letters as are decoded (MAX_ESCAPES), a multipart _method part
        # before 1 MiB of lines, and a 256 KiB media type naming a version.
        Case(
            "admin_cull 1MiB escapes",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/v2.1/%s" % TENANT, method="POST"), CONTENT_TYPE="application/x-www-form-urlencoded"),
            body=(b"%6d" * MAX_ESCAPES + b"\n" * (1024 * 1024))[: 1024 * 1024],
            max_overhead_ns=WORST_CASE_NS,
            share=0.002,
        ),
        Case(
            "admin_cull 1MiB multipart _method",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/v2.1/%s" % TENANT, method="POST"), CONTENT_TYPE="multipart/form-data; boundary=zz"),
            body=(b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n' + b"\n-z" * 349_000
                  + b"\r\n\r\nGET\r\n--zz--\r\n"),
            max_overhead_ns=WORST_CASE_NS,
            share=0.002,
        ),
        Case(
            "admin_cull 256KiB Accept",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            dict(target("/acme/servers"), HTTP_ACCEPT=";" * (256 * 1024) + "version=2.1"),
            max_overhead_ns=WORST_CASE_NS,
            share=0.002,
        ),
        Case(
            "admin_cull 8KiB target",
            "admin_cull",
            lambda app: AdminCull(app, {}),
            target("/v2.1/%s/" % TENANT + ("%C3%A1" * 120 + "\\a;b/") * 10 + "?" + "a;" * 200),
            max_overhead_ns=WORST_CASE_NS,
            share=0.02,
        ),
        # nova's own admin calls, derived from its policy (52 rules, 4 keyed by the body's
        # action): the list the recipe gives the public endpoint.  The rules are nova 34's, as
        # `tenancy-mw-manage cull derive --namespace nova --format rules` prints them
        # (bench/nova-policy-rules.txt, which tests/openstack keeps equal to nova's output),
        # given as `rules`: deriving needs nova installed, and costs nothing per request.
        Case(
            "admin_cull nova policy GET",
            "admin_cull",
            lambda app: AdminCull(app, {"rules": NOVA_POLICY_RULES}),
            target("/v2.1/%s/servers/detail?limit=20" % TENANT),
            goal=ONE_THIRD,
        ),
        Case(
            "admin_cull nova policy DELETE",
            "admin_cull",
            lambda app: AdminCull(app, {"rules": NOVA_POLICY_RULES}),
            target("/v2.1/%s/servers/7c9e6679-7425-40de-944b-e07fc1f90ae7" % TENANT, method="DELETE"),
            goal=ONE_THIRD,
        ),
        # The one path whose body is read: a member's server action on the path of the keyed
        # rule (its JSON body parsed for its top-level key).  Measured, no goal: reading and
        # parsing the body alone (some 3 us: the read, a fresh stream for the app, the JSON
        # scan) is over half of what 1/3 of RequestId allows, the path's judging (the default
        # rules' .../action patterns, the keyed rule, and the GET-only default rule that makes
        # the filter look for a method override) as much again.
        Case(
            "admin_cull nova policy action",
            "admin_cull",
            lambda app: AdminCull(app, {"rules": NOVA_POLICY_RULES}),
            dict(
                target("/v2.1/%s/servers/7c9e6679-7425-40de-944b-e07fc1f90ae7/action" % TENANT, method="POST"),
                CONTENT_TYPE="application/json",
            ),
            body=b'{"reboot": {"type": "SOFT"}}',
        ),
        # Worst case of the body read: the largest body read (ACTION_BODY_LIMIT, the
        # max_action_body_size default) on the keyed path, a member's action with as many
        # arrays as are decoded (MAX_CONTAINERS) nested to the bound (MAX_DEPTH), then numbers.
        Case(
            "admin_cull 112KiB JSON action",
            "admin_cull",
            lambda app: AdminCull(app, {"rules": NOVA_POLICY_RULES}),
            dict(
                target("/v2.1/%s/servers/7c9e6679-7425-40de-944b-e07fc1f90ae7/action" % TENANT, method="POST"),
                CONTENT_TYPE="application/json",
            ),
            body=_worst_action_body(ACTION_BODY_LIMIT),
            max_overhead_ns=WORST_CASE_NS,
            share=0.0002,
        ),
        # The public pipeline of the README: the second filter reuses the
        # canonical path the first one cached in the environ.  No goal: it
        # is two filters; it shows what the cache saves.
        Case(
            "admin_cull+tenant_path",
            "pipeline",
            lambda app: AdminCull(TenantPath(app, {}), {}),
            target("/v2.1/%s/servers/detail?limit=20" % TENANT),
            reaches_app=_has_tenant(TENANT),
        ),
    ]

# id_resolver: its rows and its cells latency table live in bench/id_resolver_bench.py.
import id_resolver_bench  # noqa: E402 - bench/ is on sys.path when run.py runs

CASES += id_resolver_bench.cases(Case, target, ONE_THIRD)

# tenant_admin's rows: the public pipeline's tenant-state check (bench/tenant_admin_cases.py).
import tenant_admin_cases  # noqa: E402

CASES += tenant_admin_cases.cases(Case, target, TENANT, ONE_THIRD, _has_tenant)


# The idempotency filter's rows live in bench/idempotency_cases.py.
CASES += idempotency_cases(Case, target, ONE_THIRD, TENANT)


def _tag_query(expected_tags: int):
    """The check that the app got a TagQuery naming *expected_tags* tags in all."""
    def check(seen: dict) -> bool:
        query = seen["tenancy.tag_query"]
        return len(query.tags | query.tags_any | query.not_tags | query.not_tags_any) == expected_tags

    return check


# tag_query's rows: its parse cost.
CASES += [
    # Every list call pays this: no tag parameter, the fast path.
    Case(
        "tag_query no tags",
        "tag_query",
        lambda app: TagQueryFilter(app, {}),
        target("/v2.1/%s/servers/detail?limit=20&sort_key=name" % TENANT),
        goal=ONE_THIRD,
        reaches_app=_tag_query(0),
    ),
    # All four parameters, seven tags, one percent-encoded: the parse and
    # every check of every tag, work the service would otherwise do
    # itself: measured, no goal.
    Case(
        "tag_query 4 params",
        "tag_query",
        lambda app: TagQueryFilter(app, {}),
        target("/v2.1/%s/servers/detail?tags=web,prod&tags-any=eu-west,%%E2%%88%%91&not-tags=old"
               "&not-tags-any=db,cache&limit=20" % TENANT),
        reaches_app=_tag_query(7),
    ),
]


@dataclass
class Row:
    """A case built and measured."""

    case: Case
    app: Callable
    template: dict
    batches_ns: list[int] = field(default_factory=list)
    peak_bytes: float = 0.0
    retained_bytes: float = 0.0


def build(case: Case) -> Row:
    """Wrap :func:`bare_app` in the case's filter and check the row times what it claims."""
    seen = {}

    def recording_app(environ, start_response):
        seen.update(environ)
        return bare_app(environ, start_response)

    template = case.template()
    statuses = []
    probe = case.wrap(recording_app)
    environ = dict(template, **{"wsgi.input": BytesIO(case.body)})
    body = b"".join(probe(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    if not seen or not statuses[0].startswith("200"):
        raise SystemExit(
            "bench case %r did not reach the app: %s %r" % (case.name, statuses[0] if statuses else "-", body[:200])
        )
    if case.reaches_app is not None and not case.reaches_app(seen):
        raise SystemExit("bench case %r: the app did not see what the case is about" % case.name)
    return Row(case, case.wrap(bare_app), template)


def time_batch(row: Row, calls: int) -> int:
    """Nanoseconds for *calls* requests, served as a WSGI server serves them.

    The loop is written out (no helper call per request) so the harness
    cost stays small next to the filters; what remains of it is the same in
    every row and goes away in the subtraction.
    """
    app = row.app
    copy = row.template.copy
    body = row.case.body
    calls = row.case.calls(calls)
    start_response = _start_response
    start = perf_counter_ns()
    for _ in range(calls):
        environ = copy()
        environ["wsgi.input"] = BytesIO(body)
        result = app(environ, start_response)
        try:
            for _chunk in result:
                pass
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    return perf_counter_ns() - start


def measure_time(rows: list[Row], calls: int, repeats: int, seed: int = 0) -> None:
    """Time every row *repeats* times; the rows take turns in a new order each round.

    Interleaving spreads machine noise (another process, a CPU frequency
    change) over all rows alike instead of over whichever row ran at that
    moment.  A full ``gc.collect()`` before each batch starts every batch
    from the same heap; the collector stays on during the batch, since the
    collections a filter's allocations cause are part of its cost.
    """
    shuffle = random.Random(seed).shuffle
    for row in rows:
        time_batch(row, max(calls // 10, 10))  # warm-up: caches, specialised bytecode
    order = list(rows)
    for _ in range(repeats):
        shuffle(order)
        for row in order:
            gc.collect()
            row.batches_ns.append(time_batch(row, calls) * calls // row.case.calls(calls))


def _serve(app: Callable, template: dict, body: bytes) -> None:
    """One request, as in :func:`time_batch`; everything it made is freed on return."""
    environ = template.copy()
    environ["wsgi.input"] = BytesIO(body)
    result = app(environ, _start_response)
    try:
        for _chunk in result:
            pass
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()


def measure_memory(rows: list[Row], calls: int, warmup: int = 2_500) -> None:
    """Peak and retained bytes of one request, averaged over *calls* requests, per row.

    *Peak*: the most memory the request held at once above what was live
    before it (``tracemalloc`` peak, reset before each request); it is what
    each request in flight adds to a worker.  *Retained*: what was still
    allocated after the request returned and dropped every reference.  The
    cycle collector is off during this pass, so retained bytes are garbage
    left in reference cycles, a cache filling up, or a leak; it should be 0.

    The *warmup* requests, untraced, fill one-time caches and CPython's
    free lists first: a free list (up to 2000 tuples of each size) that is
    still filling shows as some 64 bytes "retained" per request although
    nothing leaks.  A separate pass from the timing: tracemalloc makes every
    allocation several times slower.
    """
    gc.collect()
    gc.disable()
    try:
        for row in rows:
            app, template, body = row.app, row.template, row.case.body
            row_calls = row.case.calls(calls)
            for _ in range(max(1, int(warmup * row.case.share))):
                _serve(app, template, body)
            tracemalloc.start()
            try:
                peak_total = retained_total = 0
                for _ in range(row_calls):
                    tracemalloc.reset_peak()
                    before = tracemalloc.get_traced_memory()[0]
                    _serve(app, template, body)
                    current, peak = tracemalloc.get_traced_memory()
                    peak_total += peak - before
                    retained_total += current - before
            finally:
                tracemalloc.stop()
            row.peak_bytes = peak_total / row_calls
            row.retained_bytes = retained_total / row_calls
            gc.collect()
    finally:
        gc.enable()


def results(rows: list[Row], calls: int) -> list[dict]:
    """Per-request numbers of every row, from the minimum batch of each.

    The minimum, not the median: noise only ever adds time, so the fastest
    batch is the one closest to the code's own cost.  Medians are kept in
    the JSON output for comparison.
    """
    per_request = {row.case.name: min(row.batches_ns) / calls for row in rows}
    bare = per_request[BARE]
    bare_peak = next(row.peak_bytes for row in rows if row.case.name == BARE)
    request_id = per_request[REQUEST_ID] - bare
    out = []
    for row in rows:
        case = row.case
        overhead = per_request[case.name] - bare
        ratio = overhead / request_id if request_id > 0 else float("nan")
        if case.max_overhead_ns is not None:
            verdict = "PASS" if overhead <= case.max_overhead_ns else "MISS"
        elif case.goal is None:
            verdict = "-"
        else:
            verdict = "PASS" if ratio <= case.goal else "MISS"
        out.append(
            {
                "name": case.name,
                "filter": case.filter,
                "method": row.template["REQUEST_METHOD"],
                "target": row.template["RAW_URI"],
                "total_ns": per_request[case.name],
                "median_ns": statistics.median(row.batches_ns) / calls,
                "overhead_ns": overhead,
                "ratio_to_request_id": ratio,
                "peak_bytes": row.peak_bytes,
                "peak_overhead_bytes": row.peak_bytes - bare_peak,
                "retained_bytes": row.retained_bytes,
                "goal_ratio": case.goal,
                "goal_max_overhead_ns": case.max_overhead_ns,
                "result": verdict,
            }
        )
    return out


def goal_lines(cases: list[Case]) -> list[str]:
    """One goal line per filter that has a goal."""
    goals = {}
    for case in cases:
        if case.goal is not None:
            goals.setdefault(case.filter, case.goal)
    lines = []
    for name, goal in goals.items():
        share = "1/3" if abs(goal - ONE_THIRD) < 1e-9 else "%.2f" % goal
        lines.append("goal %-12s overhead <= %s of RequestId's overhead" % (name + ":", share))
    worst = sorted({case.max_overhead_ns for case in cases if case.max_overhead_ns is not None})
    if worst:
        lines.append("goal worst cases: overhead <= %s ms (largest body or target judged)"
                     % ", ".join("%g" % (ns / 1e6) for ns in worst))
    return lines


def table(rows: list[dict]) -> str:
    """The results as fixed-width text."""
    head = ("case", "filter", "ns/req", "overhead", "xRequestId", "peak B", "+B/bare", "retain B", "goal")
    fmt = "%-24s %-15s %9s %9s %10s %8s %8s %8s  %s"
    lines = [fmt % head, "-" * 104]
    for r in rows:
        is_base = r["name"] == BARE
        lines.append(
            fmt
            % (
                r["name"],
                r["filter"],
                "%.0f" % r["total_ns"],
                "-" if is_base else "%.0f" % r["overhead_ns"],
                "-" if is_base else "%.3f" % r["ratio_to_request_id"],
                "%.0f" % r["peak_bytes"],
                "-" if is_base else "%+.0f" % r["peak_overhead_bytes"],
                "%.0f" % r["retained_bytes"],
                r["result"],
            )
        )
    return "\n".join(lines)


def selected_cases(only: str | None) -> list[Case]:
    """Every case, or with *only* the bare app, RequestId and the cases whose name matches it."""
    if only is None:
        return list(CASES)
    pattern = re.compile(only)
    return [case for case in CASES if case.name in (BARE, REQUEST_ID) or pattern.search(case.name)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few iterations: checks the bench runs, numbers are rough")
    parser.add_argument("--check", action="store_true", help="exit 1 when a row misses its goal")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--calls", type=int, help="requests per timed batch (default 20000, --quick 300)")
    parser.add_argument("--repeats", type=int, help="timed batches per row (default 9, --quick 2)")
    parser.add_argument("--memory-calls", type=int, help="requests per row in the memory pass (default 2000)")
    parser.add_argument(
        "--only",
        metavar="REGEX",
        help="time only the rows whose name matches (the bare app and RequestId always run: the ratios need "
        "them); the id_resolver cells table and the idempotency report are left out, --check judges these rows",
    )
    args = parser.parse_args(argv)
    args.calls = args.calls or (300 if args.quick else 20_000)
    args.repeats = args.repeats or (2 if args.quick else 9)
    args.memory_calls = args.memory_calls or (50 if args.quick else 2_000)
    if min(args.calls, args.repeats, args.memory_calls) < 1:
        parser.error("--calls, --repeats and --memory-calls must be positive")
    if args.only is not None:
        try:
            re.compile(args.only)
        except re.error as exc:
            parser.error("--only %r is not a regular expression: %s" % (args.only, exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = [build(case) for case in selected_cases(args.only)]
    started = perf_counter_ns()
    measure_time(rows, args.calls, args.repeats)
    measure_memory(rows, args.memory_calls)
    elapsed = (perf_counter_ns() - started) / 1e9
    out = results(rows, args.calls)

    print("tenancy_mw bench: Python %s (%s), %s" % (platform.python_version(), platform.python_implementation(),
                                                     platform.platform()))
    print("machine %s, %s CPUs; %d batches x %d requests per row, minimum batch; memory over %d requests; %.1f s"
          % (platform.machine(), os.cpu_count(), args.repeats, args.calls, args.memory_calls, elapsed))
    if AdminCull is None:
        print("admin_cull: not importable yet, its rows are left out")
    for line in goal_lines(selected_cases(args.only)):
        print(line)
    print()
    print(table(out))
    print()
    misses = [r["name"] for r in out if r["result"] == "MISS"]
    cells_report = None
    if args.only is None:  # the reports beside the table belong to a whole run
        for line in idempotency_report_lines(BASE_ENVIRON, target, TENANT):
            print(line)
        for line in tenant_admin_cases.report_lines(BASE_ENVIRON, target, TENANT):
            print(line)
        cells_report = id_resolver_bench.cells_latency(quick=args.quick)
        print()
        print(id_resolver_bench.cells_table(cells_report))
        if cells_report["result"] == "MISS":
            misses.append("id_resolver across cells")
    if misses:
        print("\nMISS: %s" % ", ".join(misses))

    if args.json:
        report = {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "calls": args.calls,
            "repeats": args.repeats,
            "memory_calls": args.memory_calls,
            "statistic": "min",
            "seconds": elapsed,
            "rows": out,
            "id_resolver_cells": cells_report,
        }
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
