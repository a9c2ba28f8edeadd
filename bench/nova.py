"""The filters' cost inside real nova: nova-api's CPU per request with and without them.

Run by ``make bench`` after the load run (or alone: ``.venv/bin/python
bench/nova.py``).  See "Inside nova" in ``bench/README.rst``.

One run starts Keystone and two nova-api 34.0.0 servers of the same cloud
(:mod:`tests.support.openstack`), each under gunicorn with the same workers:
``nova`` serves nova's installed ``api-paste.ini`` unchanged, ``nova +
filters`` the same file after the library's recipe (``tenancy-mw-manage
paste add --service nova``, public endpoint, idempotency on memcached).
wrk, another process, sends one request shape at a time with a real
alice token over loopback:

- ``GET /v2.1/servers`` (no project id in the URL: the token's project is
  the tenant);
- ``POST /v2.1/os-keypairs``, a new keypair name and a new
  ``X-Client-Token`` for every request (every one runs in nova and is
  stored by ``idempotency``).

The number kept is the server's CPU time per request (user + system time
of the gunicorn master and its workers), the median over rounds that
take the servers in a new shuffled order each.  A third server, ``nova
again``, is a second unmodified nova: what it differs from the first is
the noise floor of the comparison (the ``control`` column).  The goal: the filters add
at most 2 % to nova's own CPU per request.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from load import children, cpu_seconds, minor_faults  # noqa: E402 - bench/ is this script's folder

from tests.support import memcached  # noqa: E402
from tests.support.openstack import Cloud, Service, apply_recipe, ensure_venv  # noqa: E402

#: The goal: the filters add at most this share to nova's own CPU per request.
GOAL_SHARE = 0.02
WORKERS = 2

# Every request of a keypair row gets its own keypair name and client token.
_LUA = """
local counter = 0
local prefix = "%(prefix)s"
request = function()
  counter = counter + 1
  local name = prefix .. "-" .. counter
  local headers = {}
  headers["X-Auth-Token"] = "%(token)s"
  headers["Content-Type"] = "application/json"
  headers["X-Client-Token"] = name
  return wrk.format("POST", "%(path)s", headers, '{"keypair": {"name": "' .. name .. '"}}')
end
"""
_LUA_GET = """
wrk.method = "GET"
wrk.headers["X-Auth-Token"] = "%(token)s"
wrk.headers["Accept"] = "application/json"
"""
_LUA_DONE = """
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK-JSON {"requests": %d, "duration_us": %d, "status": %d, "timeout": %d}\\n',
    summary.requests, summary.duration, e.status, e.timeout))
end
"""


@dataclass
class Row:
    """One request shape on one server: CPU seconds per request of each round."""

    shape: str
    server: str
    cpu_per_request: list[float] = field(default_factory=list)
    faults_per_request: list[float] = field(default_factory=list)
    requests: int = 0


def server_cpu(service: Service) -> tuple[frozenset[int], float, int]:
    """The master and workers of *service*, their CPU seconds and minor page faults so far."""
    assert service.process is not None
    pids = [service.process.pid, *children(service.process.pid)]
    return frozenset(pids), sum(cpu_seconds(pid) for pid in pids), sum(minor_faults(pid) for pid in pids)


def run_wrk(service: Service, script: str, path: str, seconds: float, connections: int, folder: Path) -> int:
    """Drive *service* with the Lua *script* for *seconds*; the number of requests answered."""
    lua = folder / ("wrk-%d.lua" % random.randrange(1 << 30))
    lua.write_text(script + _LUA_DONE)
    command = [
        "wrk",
        "--threads",
        "1",
        "--connections",
        str(connections),
        "--duration",
        "%ds" % max(1, round(seconds)),
        "--timeout",
        "30s",
        "--script",
        str(lua),
        service.url + path,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, check=False)
    line = [text for text in proc.stdout.splitlines() if text.startswith("WRK-JSON ")]
    if proc.returncode != 0 or not line:
        raise RuntimeError("wrk failed (%s):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    summary = json.loads(line[0][len("WRK-JSON ") :])
    if summary["status"] or summary["timeout"] or not summary["requests"]:
        raise RuntimeError("wrk against %s saw errors: %r" % (service.name, summary))
    return summary["requests"]


def scripts(token: str) -> dict[str, tuple[str, str]]:
    """Per request shape: (the Lua script of a fresh round, the path)."""
    prefix = "bench-%d" % random.randrange(1 << 40)
    return {
        "GET /v2.1/servers": (_LUA_GET % {"token": token}, "/v2.1/servers"),
        "POST /v2.1/os-keypairs": (
            _LUA % {"token": token, "path": "/v2.1/os-keypairs", "prefix": prefix},
            "/v2.1/os-keypairs",
        ),
    }


def measure(rows: dict, servers: dict, token: str, rounds: int, seconds: float, connections: int, folder: Path) -> None:
    """*rounds* rounds; in each, every (shape, server) pair once, in a shuffled order."""
    pairs = list(rows)
    for _ in range(rounds):
        random.shuffle(pairs)
        for shape, name in pairs:
            script, path = scripts(token)[shape]
            service = servers[name]
            pids, before, faults_before = server_cpu(service)
            count = run_wrk(service, script, path, seconds, connections, folder)
            pids_after, after, faults_after = server_cpu(service)
            if pids != pids_after:
                raise RuntimeError("%s: a worker was replaced during the run" % name)
            row = rows[(shape, name)]
            row.cpu_per_request.append((after - before) / count)
            row.faults_per_request.append((faults_after - faults_before) / count)
            row.requests += count


#: An inert filter: it only calls the next application, through ``depth`` extra Python frames.
_INERT_FILTER_MODULE = """
def factory(global_conf, depth="0", **local):
    depth = int(depth)

    def wrap(app):
        def down(environ, start_response, left):
            if left:
                return down(environ, start_response, left - 1)
            return app(environ, start_response)

        def passthrough(environ, start_response):
            return down(environ, start_response, depth)

        return passthrough

    return wrap
"""
#: Frames the recipe's four filters hold open while nova serves ``GET /servers`` (admin_cull,
#: tenant_path and its token step, idempotency, tag_query); the pass-through holds as many.
RECIPE_FRAMES = 5


def passthrough_paste(installed: str, folder: Path, depth: int = RECIPE_FRAMES - 1) -> tuple[str, Path]:
    """*installed* with an inert filter where the recipe puts its four, and the folder of its module.

    The filter holds *depth* frames past its own open while the service runs.
    """
    modules = folder / "passthrough"
    modules.mkdir(exist_ok=True)
    (modules / "tenancy_bench_passthrough.py").write_text(_INERT_FILTER_MODULE)
    paste = installed.replace(" authtoken keystonecontext ", " authtoken passthrough keystonecontext ")
    if paste.count(" passthrough ") != 2:
        raise RuntimeError("nova's api-paste.ini changed: no 'authtoken keystonecontext' in its two keystone pipelines")
    paste += "\n[filter:passthrough]\npaste.filter_factory = tenancy_bench_passthrough:factory\ndepth = %d\n" % depth
    return paste, modules


def start(folder: Path, memcached_address: str) -> tuple[Cloud, dict[str, Service]]:
    """Keystone and the nova-api servers: nova's file, the recipe's, a pass-through's, nova's again."""
    cloud = Cloud(folder / "cloud", ensure_venv())
    installed = cloud.installed_paste("nova")
    settings = {
        "idempotency.backend": "memcached",
        "idempotency.memcached_servers": memcached_address,
        "idempotency.secret": "bench-secret",
    }
    filtered = apply_recipe("nova", "public", installed, folder, settings)
    passthrough, modules = passthrough_paste(installed, folder)
    # Every keypair request creates one for alice: lift nova's 100-per-user quota.
    unlimited = "[quota]\nkey_pairs = -1\n"
    servers = {
        "nova": cloud.nova("plain", installed, workers=WORKERS, extra_conf=unlimited),
        "nova + filters": cloud.nova("filtered", filtered, workers=WORKERS, extra_conf=unlimited),
        # The same stack depth with no work at all: what deepening nova's pipeline costs by itself.
        "nova + pass-through": cloud.nova(
            "passthrough", passthrough, workers=WORKERS, extra_conf=unlimited, extra_path=modules
        ),
        # The control: a second, identical unmodified nova.  What it differs from the first is the
        # noise floor of a comparison between two servers.
        "nova again": cloud.nova("again", installed, workers=WORKERS, extra_conf=unlimited),
    }
    return cloud, servers


def report(rows: dict) -> tuple[list[str], bool]:
    """The table's lines and whether every shape met the goal."""
    names = ("nova", "nova + filters", "nova + pass-through", "nova again")
    fmt = "%-24s %9s %9s %9s %9s %9s   %-17s %5s"
    lines = [
        fmt % ("request", "nova us", "filters", "added", "pass-thr", "control", "faults/req n|f|p", "goal"),
        "-" * 101,
    ]
    met = True
    for shape in dict.fromkeys(shape for shape, _ in rows):
        cpu = [statistics.median(rows[(shape, name)].cpu_per_request) for name in names]
        faults = [statistics.median(rows[(shape, name)].faults_per_request) for name in names]
        plain = cpu[0]
        share = (cpu[1] - plain) / plain
        ok = share <= GOAL_SHARE
        met = met and ok
        lines.append(
            fmt
            % (
                shape,
                "%.0f" % (plain * 1e6),
                "%.0f" % (cpu[1] * 1e6),
                "%+.2f %%" % (share * 100),
                "%+.2f %%" % ((cpu[2] - plain) / plain * 100),
                "%+.2f %%" % ((cpu[3] - plain) / plain * 100),
                "%.0f|%.0f|%.0f" % tuple(faults[:3]),
                "PASS" if ok else "MISS",
            )
        )
    return lines, met


def main(argv: list[str] | None = None) -> int:
    """Run the nova rows and print their table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per row, interleaved (default 5)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed run (default 10)")
    parser.add_argument("--connections", type=int, default=4, help="wrk's open connections (default 4)")
    parser.add_argument("--quick", action="store_true", help="one short round: checks the run works")
    parser.add_argument("--check", action="store_true", help="exit 1 when the goal is missed")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 1, 2.0
    if shutil.which("wrk") is None:
        print("nova run: wrk is missing (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="tenancy-nova-bench-"))
    started = time.monotonic()
    cache = memcached.MemcachedServer()
    cloud = None
    try:
        cloud, servers = start(folder, cache.address)
        token = cloud.token("alice")
        rows = {(shape, name): Row(shape, name) for shape in scripts(token) for name in servers}
        # Warm both: keystonemiddleware's token cache, nova's imports and DB connections.
        measure(rows, servers, token, 1, 1.0, args.connections, folder)
        for row in rows.values():
            row.cpu_per_request.clear()
            row.faults_per_request.clear()
            row.requests = 0
        measure(rows, servers, token, args.rounds, args.seconds, args.connections, folder)
    finally:
        if cloud is not None:
            cloud.stop()
        cache.stop()
    shutil.rmtree(folder, ignore_errors=True)
    lines, met = report(rows)
    print(
        "inside nova: nova-api 34.0.0 under gunicorn (%d sync workers), Keystone token, wrk 1 thread %d "
        "connections; %d rounds x %g s per row, medians of CPU (utime+stime of master and workers) per request; "
        "%.0f s" % (WORKERS, args.connections, args.rounds, args.seconds, time.monotonic() - started)
    )
    print()
    for line in lines:
        print(line)
    print()
    print(
        "goal: the filters add <= %g %% to nova's CPU per request: %s" % (GOAL_SHARE * 100, "PASS" if met else "MISS")
    )
    if args.json:
        out = [
            {
                "shape": r.shape,
                "server": r.server,
                "requests": r.requests,
                "cpu_us_per_request_rounds": [v * 1e6 for v in r.cpu_per_request],
                "minor_faults_per_request_rounds": r.faults_per_request,
            }
            for r in rows.values()
        ]
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
