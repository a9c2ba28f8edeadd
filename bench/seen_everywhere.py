"""How long after a tenant ``DELETE`` every worker of every host refuses the tenant: ``tenant_admin``'s ``cache_ttl``.

.. code-block:: console

   .venv/bin/python bench/seen_everywhere.py                     # SQLite registry, cache_ttl 5, 2 hosts x 4 workers
   .venv/bin/python bench/seen_everywhere.py --memcached         # the same with state_memcached_servers
   .venv/bin/python bench/seen_everywhere.py --url postgresql+psycopg2://root@127.0.0.1/tenants_bench

Two "hosts": a gunicorn serving the public pipeline (``tenant_path``,
``tenant_admin`` with ``admin_api = false``) on 127.0.0.1 and another on
127.0.0.2, each with ``--workers`` sync workers, sharing one registry; a
third gunicorn (one worker, 127.0.0.1) serves the admin pipeline.  Each
round creates a tenant through the admin endpoint, then clients (``--clients``
per host, each a new connection per request, as gunicorn's sync workers
close them) ask ``GET /v2.1/{tenant}/servers`` of both hosts without
pause; every answer names the worker that gave it (``X-Worker-Pid``, from a
filter at the top of the pipeline).  Once every worker of both hosts has
served the tenant, the clients go on for a random part of ``cache_ttl``
(so the delete lands anywhere in the life of the workers' cache entries),
the tenant is deleted through the admin endpoint, and the clients go on
until every worker has refused it (``410``).

Measured from the moment the ``DELETE``'s ``204`` arrived, per round:

``everywhere``
    when the last worker gave its first refusal (its answer received): the
    time until the delete was seen everywhere, polling included;
``last served``
    when the last request that still got ``200`` had been sent: how long
    the deleted tenant was still served somewhere;
``after refusal``
    answers ``200`` a worker gave after it had refused the tenant once
    (must be 0).

The bound is ``cache_ttl``: a worker keeps a state at most ``cache_ttl``
seconds from the moment it began reading it, and that read began before
the delete committed.  With ``--memcached`` (``state_memcached_servers``)
it is the next request: ``last served`` is below 0 (no request sent after
the ``204`` was served).  ``tests/functional/test_tenant_state_everywhere.py``
asserts both bounds on SQLite, PostgreSQL and MariaDB through this module.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

PID_HEADER = "X-Worker-Pid"
#: A refusal of the tenant: deleted (410), or unknown (404, after a purge).
GONE = (404, 410)
HOSTS = ("127.0.0.1", "127.0.0.2")
BENCH = Path(__file__).resolve().parent

# --- what gunicorn serves -------------------------------------------------------


def worker_pid_filter_factory(global_conf, **local_conf):
    """``paste.filter_factory``: every answer carries ``X-Worker-Pid``, the pid of the worker that gave it."""

    def wrap(app):
        pid = ("X-Worker-Pid", str(os.getpid()))

        def with_pid(environ, start_response):
            return app(
                environ, lambda status, headers, exc_info=None: start_response(status, [*headers, pid], exc_info)
            )

        return with_pid

    return wrap


def ok_app_factory(global_conf, **local_conf):
    """``paste.app_factory``: the service, answering ``200`` and a tiny JSON body to anything."""

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    return app


PASTE = """
[pipeline:public]
pipeline = worker_pid tenant_path tenant_admin ok

[pipeline:admin]
pipeline = worker_pid tenant_path tenant_admin_api ok

[filter:worker_pid]
paste.filter_factory = seen_everywhere:worker_pid_filter_factory

[filter:tenant_path]
use = egg:tenancy_mw#tenant_path

[filter:tenant_admin]
use = egg:tenancy_mw#tenant_admin
connection = {url}
admin_api = false
cache_ttl = {cache_ttl}
state_memcached_servers = {servers}

[filter:tenant_admin_api]
use = egg:tenancy_mw#tenant_admin
connection = {url}
cache_ttl = {cache_ttl}
state_memcached_servers = {admin_servers}

[app:ok]
paste.app_factory = seen_everywhere:ok_app_factory
"""


def write_config(folder: Path, url: str, cache_ttl: float, servers: str = "", admin_servers: str | None = None) -> Path:
    """The paste config of the public pipeline ``public`` and the admin pipeline ``admin``.

    *servers* is the public pipeline's ``state_memcached_servers`` (empty:
    none), *admin_servers* the admin's (default: the same).
    """
    ini = folder / "seen-everywhere.ini"
    admin_servers = servers if admin_servers is None else admin_servers
    ini.write_text(
        PASTE.format(url=url.replace("%", "%%"), cache_ttl=cache_ttl, servers=servers, admin_servers=admin_servers),
        encoding="utf-8",
    )
    return ini


def server_env() -> dict:
    """What a gunicorn serving :func:`write_config`'s pipelines needs in its environment: this folder on the path."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(BENCH) + (os.pathsep + path if path else "")}


# --- the clients ---------------------------------------------------------------------


def request(
    host: str, port: int, method: str, target: str, body: bytes | None = None, timeout: float = 10.0
) -> tuple[int, dict]:
    """One request on a new connection: status and headers (lower-case names)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, target, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status, {name.lower(): value for name, value in response.getheaders()}
    finally:
        conn.close()


def wait_serving(host: str, port: int, timeout: float = 120.0) -> None:
    """Wait until a gunicorn that listens also answers: its workers load the pipeline after they start.

    A worker accepts connections only once it has loaded it, which on a busy
    machine may take longer than a client's timeout.
    """
    request(host, port, "GET", "/", timeout=timeout)


@dataclass(frozen=True)
class Answer:
    """One answer: which host and worker gave it, its status, when it was sent and received (monotonic)."""

    host: str
    pid: int
    status: int
    sent: float
    received: float


class Clients:
    """*per_host* threads per host asking ``GET /v2.1/{tenant}/servers`` without pause; every answer kept."""

    def __init__(self, hosts: list[tuple[str, int]], tenant: str, per_host: int = 4) -> None:
        self.target = "/v2.1/%s/servers" % tenant
        self.answers: list[Answer] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._ask, args=(host, port), daemon=True)
            for host, port in hosts
            for _ in range(per_host)
        ]

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _ask(self, host: str, port: int) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                status, headers = request(host, port, "GET", self.target, timeout=30)
            except OSError as exc:
                self.errors.append("%s:%d %s: %s" % (host, port, type(exc).__name__, exc))
                time.sleep(0.01)
                continue
            # list.append is atomic: the threads share the list without a lock.
            self.answers.append(Answer(host, int(headers.get(PID_HEADER.lower(), 0)), status, sent, time.monotonic()))

    def wait_until(self, done, timeout: float, what: str) -> None:
        """Let the clients run until ``done(answers)`` is true, or raise after *timeout* seconds."""
        deadline = time.monotonic() + timeout
        while not done(list(self.answers)):
            if time.monotonic() > deadline:
                raise TimeoutError("%s: not after %.0f s (errors: %s)" % (what, timeout, self.errors[-3:]))
            time.sleep(0.02)


def workers_of(answers: list[Answer], host: str, status=(200,), after: float = float("-inf")) -> set[int]:
    """The workers of *host* that gave an answer of *status* to a request sent after *after*."""
    return {a.pid for a in answers if a.host == host and a.status in status and a.sent > after}


# --- one round -----------------------------------------------------------------------


@dataclass
class Round:
    """What one delete showed; times in seconds from the ``DELETE``'s ``204`` (see the module documentation).

    ``workers``: each host's worker pids; ``first_refusals``: per
    ``host/pid``, when its first refusal arrived.
    """

    workers: dict[str, list[int]]
    everywhere: float
    last_served: float
    first_refusals: dict[str, float]
    served_after_refusal: int
    answers: int
    other_statuses: dict[str, int] = field(default_factory=dict)


def broken_bound(seen: Watched, bound: float, after=GONE) -> list[str]:
    """What breaks "the change is seen everywhere within *bound* seconds of its answer"; ``[]`` if nothing.

    Broken by a request sent later than *bound* after the change's answer
    that was not answered *after* (a deleted tenant still served), and
    unproven for a worker that no request sent after that moment reached.
    """
    late = [a for a in seen.answers if a.sent > seen.changed + bound]
    broken = [
        "%s/%d answered %d to a request sent %.3f s after the change" % (a.host, a.pid, a.status, a.sent - seen.changed)
        for a in late
        if a.status not in after
    ]
    for host, pids in seen.workers.items():
        asked = {a.pid for a in late if a.host == host}
        broken += ["%s/%d was not asked after %.3f s" % (host, pid, bound) for pid in pids if pid not in asked]
    return broken


@dataclass
class Watched:
    """What :func:`watch` saw: every answer, each host's workers, and when the change's answer arrived (monotonic)."""

    answers: list[Answer]
    workers: dict[str, list[int]]
    changed: float


def watch(
    hosts: list[tuple[str, int]],
    workers: int,
    tenant: str,
    change,
    before=(200,),
    after=GONE,
    per_host: int = 4,
    settle: float = 0.0,
    until: float = 0.0,
    timeout: float = 60.0,
) -> Watched:
    """Ask every worker about *tenant* until each answered *before*; make *change*; ask until each answers *after*.

    *change* is a callable that makes the change (an admin call, a purge)
    and raises if it fails; the clients go on *settle* seconds before it,
    and after it until every worker answered *after* and was asked again
    more than *until* seconds after the change (the bound to be checked),
    then 0.2 s more (so a worker that goes back to *before* would show).
    """
    with Clients(hosts, tenant, per_host) as clients:
        clients.wait_until(
            lambda seen: all(len(workers_of(seen, host, before)) >= workers for host, _ in hosts),
            timeout,
            "every worker answering %s for %s" % (before, tenant),
        )
        time.sleep(settle)
        change()
        changed = time.monotonic()
        asked = {host: workers_of(clients.answers, host, before) for host, _ in hosts}
        clients.wait_until(
            lambda seen: all(asked[host] <= workers_of(seen, host, after, changed) for host, _ in hosts),
            timeout,
            "every worker answering %s for %s" % (after, tenant),
        )
        clients.wait_until(
            lambda seen: all(asked[host] <= workers_of(seen, host, range(600), changed + until) for host, _ in hosts),
            timeout + until,
            "every worker asked %g s after the change" % until,
        )
        time.sleep(0.2)
    if clients.errors:
        raise RuntimeError("requests failed: %s" % clients.errors[:3])
    return Watched(list(clients.answers), {host: sorted(pids) for host, pids in asked.items()}, changed)


def admin_call(admin: tuple[str, int], method: str, tenant: str, expected: int, body: bytes | None = None):
    """A callable making one admin call on *tenant*; it raises unless the answer is *expected*."""

    def call() -> None:
        status, _ = request(*admin, method, "/v2.1/" + tenant, body)
        if status != expected:
            raise RuntimeError("%s of tenant %s answered %d, not %d" % (method, tenant, status, expected))

    return call


def measure_round(
    hosts: list[tuple[str, int]],
    admin: tuple[str, int],
    workers: int,
    per_host: int = 4,
    settle: float = 0.0,
    until: float = 0.0,
    timeout: float = 60.0,
) -> tuple[Round, Watched]:
    """Create a tenant, have every worker serve it, delete it, and watch until every worker refuses it.

    *settle* is how long the clients go on between "every worker served
    it" and the delete, *until* how long after it every worker is asked
    again at least (see :func:`watch`).  Returns the :class:`Round` and
    what was seen.
    """
    tenant = "seen-%s" % uuid.uuid4().hex[:12]
    admin_call(admin, "PUT", tenant, 201, b"{}")()
    seen = watch(
        hosts,
        workers,
        tenant,
        admin_call(admin, "DELETE", tenant, 204),
        per_host=per_host,
        settle=settle,
        until=until,
        timeout=timeout,
    )
    return summarize(seen.answers, seen.workers, seen.changed), seen


def summarize(answers: list[Answer], workers: dict[str, list[int]], deleted: float) -> Round:
    """The :class:`Round` of *answers*, the delete's ``204`` having arrived at *deleted*."""
    # When each worker's first refusal arrived.  A 200 counts against the
    # worker only if it was sent after that: requests sent close together
    # may be served in another order than they were sent (client threads
    # share the GIL between taking the time and connecting).
    refused_at: dict[str, float] = {}
    for answer in answers:
        if answer.status in GONE and answer.sent > deleted:
            name = "%s/%d" % (answer.host, answer.pid)
            refused_at[name] = min(refused_at.get(name, answer.received), answer.received)
    first = {name: received - deleted for name, received in refused_at.items()}
    served_after_refusal = 0
    others: dict[str, int] = {}
    for answer in answers:
        name = "%s/%d" % (answer.host, answer.pid)
        if answer.status == 200 and name in refused_at and answer.sent > refused_at[name]:
            served_after_refusal += 1
        elif answer.status not in GONE and answer.status != 200:
            others[str(answer.status)] = others.get(str(answer.status), 0) + 1
    served = [a.sent - deleted for a in answers if a.status == 200]
    return Round(
        workers=workers,
        everywhere=max(first.values()),
        last_served=max(served) if served else float("-inf"),
        first_refusals=first,
        served_after_refusal=served_after_refusal,
        answers=len(answers),
        other_statuses=others,
    )


# --- the run -------------------------------------------------------------------------


def start_servers(ini: Path, folder: Path, workers: int) -> tuple[list, object]:
    """The public pipeline on each of :data:`HOSTS` with *workers* workers, and the admin one: started, ready."""
    from load import Server  # bench/load.py: gunicorn on a loopback address, ready when its workers are up

    public = [Server(ini, "pipeline:public", workers, folder / ("public-%s.log" % host), host=host) for host in HOSTS]
    admin = Server(ini, "pipeline:admin", 1, folder / "admin.log", host=HOSTS[0])
    for server in [*public, admin]:
        server.wait_ready()
        wait_serving(server.host, server.port)
    return public, admin


def registry_url(given: str | None, folder: Path) -> str:
    """*given*, its tables made, or a new SQLite file in *folder*."""
    from tenancy_mw import migrations

    url = given or "sqlite:///%s" % (folder / "tenants.sqlite")
    migrations.upgrade(url, ["tenants"])
    return url


def run(args: argparse.Namespace, folder: Path) -> list[Round]:
    """Start the servers and measure ``args.rounds`` deletes; the rounds' results."""
    servers = ""
    if args.memcached:
        from idempotency_cases import memcached_address  # a memcached of this run, stopped at exit

        servers = memcached_address() or ""
        if not servers:
            raise SystemExit("seen_everywhere: --memcached needs Debian's memcached")
    ini = write_config(folder, registry_url(args.url, folder), args.cache_ttl, servers)
    os.environ.update(server_env())
    public, admin = start_servers(ini, folder, args.workers)
    try:
        hosts = [(server.host, server.port) for server in public]
        # The delete lands anywhere in the life of the workers' cache entries (with memcached, it does not matter).
        return [
            measure_round(
                hosts,
                (admin.host, admin.port),
                args.workers,
                args.clients,
                random.uniform(0, 1.0 if args.memcached else args.cache_ttl),
            )[0]
            for _ in range(args.rounds)
        ]
    finally:
        for server in [*public, admin]:
            server.stop()


def report(args: argparse.Namespace, rounds: list[Round]) -> list[str]:
    """The table: one line per round, then the worst of them."""
    lines = [
        "tenant DELETE seen everywhere: %d hosts x %d gunicorn workers, cache_ttl = %g s%s, %s registry; "
        "Python %s on %s, load average %.2f"
        % (
            len(HOSTS),
            args.workers,
            args.cache_ttl,
            ", state_memcached_servers" if args.memcached else "",
            (args.url or "sqlite").split(":", 1)[0],
            platform.python_version(),
            platform.machine(),
            os.getloadavg()[0],
        ),
        "round  everywhere  last served  worker median  after refusal  answers",
    ]
    for number, one in enumerate(rounds, 1):
        lines.append(
            "%5d  %8.3f s  %9.3f s  %11.3f s  %13d  %7d"
            % (
                number,
                one.everywhere,
                max(one.last_served, -1.0),
                statistics.median(one.first_refusals.values()),
                one.served_after_refusal,
                one.answers,
            )
        )
    worst = max(one.everywhere for one in rounds)
    served = max(one.last_served for one in rounds)
    bound = 0.0 if args.memcached else args.cache_ttl
    verdict = "PASS" if served <= bound and not any(one.served_after_refusal for one in rounds) else "MISS"
    lines.append(
        "worst: seen everywhere after %.3f s; last request served sent %s; bound %s  %s"
        % (
            worst,
            "%.3f s after the delete" % served if served > -1 else "before the delete",
            "the next request" if args.memcached else "cache_ttl = %g s" % args.cache_ttl,
            verdict,
        )
    )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the registry's SQLAlchemy URL (default: a new SQLite file)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers per host (default 4)")
    parser.add_argument("--clients", type=int, default=4, help="client threads per host (default 4)")
    parser.add_argument("--cache-ttl", type=float, default=5.0, help="tenant_admin's cache_ttl (default 5)")
    parser.add_argument("--rounds", type=int, default=5, help="deletes measured (default 5)")
    parser.add_argument("--memcached", action="store_true", help="share states through a memcached of this run")
    parser.add_argument("--json", metavar="FILE", help="also write the rounds as JSON to FILE")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.clients < 1 or args.rounds < 1 or args.cache_ttl < 0:
        parser.error("--workers, --clients and --rounds must be positive, --cache-ttl not negative")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print its table."""
    args = parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="tenancy-seen-"))
    try:
        rounds = run(args, folder)
    except BaseException:
        print("seen_everywhere failed; servers' logs kept in %s" % folder, file=sys.stderr)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    lines = report(args, rounds)
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(
                {"args": vars(args), "rounds": [asdict(one) for one in rounds], "verdict": lines[-1].split()[-1]},
                handle,
                indent=2,
            )
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
