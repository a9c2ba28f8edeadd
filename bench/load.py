"""The cost of every filter under real load: gunicorn serving, wrk driving, CPU time per request.

Run by ``make bench`` after the in-process table (or alone:
``.venv/bin/python bench/load.py``).  See the "Load run" section of
``bench/README.rst`` for the method and how to read the table.

Each row is one gunicorn (the same worker count and settings for every row)
serving a pipeline over the same trivial app: the bare app, oslo.middleware's
``RequestId`` alone, each tenancy_mw filter of the demo's public pipeline
alone, and that whole pipeline.  The filters' sections are read from
``examples/api-paste.ini``, so the rows run what the demo runs.  wrk, another
process, sends one request over loopback: a GET of a known tenant's server
list with a valid tag query and no client token, which every filter passes
through without a store call.  The number judged is the server's CPU time
per request (user + system time of the gunicorn master and its workers, from
``/proc/PID/stat``), because throughput on a shared machine says as much
about the neighbours as about the code.
"""

from __future__ import annotations

import argparse
import configparser
import http.client
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO_INI = REPO / "examples" / "api-paste.ini"
DEMO_SETTINGS = REPO / "examples" / "tenancy_mw_demo.conf"
#: The pipeline of the demo's public endpoint (127.0.0.1:8774).
PUBLIC_PIPELINE = "pipeline:main"
TENANT = "8f14e45fceea167a5a36dedd4bea2543"
#: A tenant's server list: known tenant (cached), no client token, a valid tag query.
TARGET = "/v2.1/%s/servers?tags=web,prod&limit=20" % TENANT
HEADERS = {"Accept": "application/json"}
APP_SECTION = "app:bench_trivial"
BARE = "bare app"
REQUEST_ID = "RequestId"
FULL = "public pipeline"
#: The goal: the full public pipeline adds at most this many times RequestId's CPU per request.
GOAL_RATIO = 2.0
#: The memory goal: a worker's RSS grows by less than this from request 1,000 to 100,000.
RSS_GOAL_BYTES = 5 * 1024 * 1024
#: Every row's server: the demo's worker count (examples/run-demo), gunicorn's default (sync) worker.
WORKERS = 2
# Ask the app for what it saw (a probe, before any timed request).
PROBE_HEADER = "X-Bench-Probe"
BODY = b'{"servers": []}'


# --- the app at the bottom of every row ---------------------------------------


def trivial_app(environ, start_response):
    """The wrapped service of every row: a constant answer, so the filters are what differs.

    Given the probe header, it answers what the filters left in ``environ``
    instead (checked once per row before timing, never timed).
    """
    if PROBE_HEADER_ENVIRON in environ:
        query = environ.get("tenancy.tag_query")
        seen = {
            "tenant_id": environ.get("tenancy.tenant_id"),
            "request_id": "openstack.request_id" in environ,
            "tags": sorted(query.tags) if query is not None else None,
        }
        body = json.dumps(seen).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "15")])
    return [BODY]


PROBE_HEADER_ENVIRON = "HTTP_" + PROBE_HEADER.upper().replace("-", "_")


def app_factory(global_conf, **local_conf):
    """``paste.app_factory`` of :func:`trivial_app`."""
    return trivial_app


# --- the rows -------------------------------------------------------------------


@dataclass
class Row:
    """One server of the table: a name and the paste pipeline it serves (filters, app last)."""

    name: str
    pipeline: list[str]
    #: Probe checks: environ facts the app must have seen (see :func:`trivial_app`).
    expect: dict = field(default_factory=dict)
    cpu_per_request: list[float] = field(default_factory=list)
    requests_per_second: list[float] = field(default_factory=list)
    requests: int = 0


def demo_config(path: Path = DEMO_INI) -> configparser.RawConfigParser:
    """The demo's paste config, uninterpolated (``%(here)s`` kept for the copy to resolve)."""
    config = configparser.RawConfigParser(interpolation=None)
    config.optionxform = str  # type: ignore[assignment,method-assign]  # paste option names are case sensitive
    config.read(path, encoding="utf-8")
    return config


def public_filters(config: configparser.RawConfigParser) -> list[str]:
    """The filter names of the demo's public pipeline, in order (its app left out)."""
    return config.get(PUBLIC_PIPELINE, "pipeline").split()[:-1]


def default_rows(filters: list[str]) -> list[Row]:
    """Bare app, ``RequestId`` alone, each tenancy_mw filter alone, the whole public pipeline."""
    app = APP_SECTION.split(":", 1)[1]
    rows = [Row(BARE, [app])]
    for name in filters:
        rows.append(Row(REQUEST_ID if name == "request_id" else name, [name, app]))
    rows.append(Row(FULL, filters + [app], expect={"tenant_id": TENANT, "request_id": True, "tags": ["prod", "web"]}))
    return rows


def _pipeline_section(row: Row) -> str:
    return "pipeline:bench_" + re.sub(r"\W", "_", row.name)


def write_config(folder: Path, rows: list[Row], extra_sections: dict[str, dict[str, str]] | None = None) -> Path:
    """The demo's ``[DEFAULT]`` and filter sections, the trivial app and a pipeline per row, in *folder*."""
    demo = demo_config()
    config = configparser.RawConfigParser(interpolation=None)
    config.optionxform = str  # type: ignore[assignment,method-assign]
    for key, value in demo.defaults().items():
        config.set("DEFAULT", key, value)
    used = {name for row in rows for name in row.pipeline[:-1]}
    for name in sorted(used):
        section = "filter:" + name
        if extra_sections and section in extra_sections:
            continue
        config.add_section(section)
        for key, value in demo.items(section, raw=True):
            if key not in demo.defaults() or demo.get(section, key, raw=True) != demo.defaults()[key]:
                config.set(section, key, value)
    for section, options in (extra_sections or {}).items():
        config.add_section(section)
        for key, value in options.items():
            config.set(section, key, value)
    config.add_section(APP_SECTION)
    config.set(APP_SECTION, "paste.app_factory", "load:app_factory")
    for row in rows:
        section = _pipeline_section(row)
        config.add_section(section)
        config.set(section, "pipeline", " ".join(row.pipeline))
    path = folder / "load-paste.ini"
    with open(path, "w", encoding="utf-8") as handle:
        config.write(handle)
    return path


def prepare_state(folder: Path) -> None:
    """The demo's settings file beside the copy, and the ``state/`` it points at.

    The filters read their options from ``tenancy_mw_demo.conf`` (the paste
    ``[DEFAULT]``'s ``oslo_config_file``, ``%(here)s`` resolving to *folder*);
    its relative SQLite URLs are relative to the server's working folder,
    *folder* here.  The registry gets its tables and :data:`TENANT`; an sql
    idempotency store its table.
    """
    from tenancy_mw import migrations
    from tenancy_mw.tenants.registry import TenantRegistry

    (folder / "state").mkdir()
    shutil.copyfile(DEMO_SETTINGS, folder / DEMO_SETTINGS.name)
    # oslo.config files repeat a multi-valued option (id_resolver's resources).
    settings = configparser.RawConfigParser(interpolation=None, strict=False)
    settings.read(DEMO_SETTINGS, encoding="utf-8")

    def in_folder(url: str) -> str:
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url[len(prefix) :].startswith("/"):
            return prefix + str(folder / url[len(prefix) :])
        return url

    url = in_folder(settings.get("tenant_admin", "connection"))
    migrations.upgrade(url, ["tenants"])
    if settings.get("idempotency", "backend", fallback="memory") == "sql":
        migrations.upgrade(in_folder(settings.get("idempotency", "connection")), ["idempotency"])
    registry = TenantRegistry(url)
    try:
        registry.put(TENANT, {"tier": "gold"})
    finally:
        registry.close()


# --- servers and their CPU time -------------------------------------------------


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def children(pid: int) -> list[int]:
    """The processes whose parent is *pid* (gunicorn's workers of master *pid*)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(int(entry))
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` from field 3 on (state, ppid, ...); the command name may hold spaces."""
    with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
        text = handle.read()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time *pid* has used so far (``utime`` + ``stime``, fields 14 and 15)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    """Minor page faults of *pid* so far (``minflt``, field 10 of ``/proc/PID/stat``)."""
    return int(_stat_fields(pid)[7])


def rss_bytes(pid: int) -> int:
    """Resident set size of *pid* (``VmRSS`` of ``/proc/PID/status``)."""
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS for pid %d" % pid)


class Server:
    """gunicorn serving one pipeline of the generated config on a free port of a loopback *host*."""

    def __init__(self, ini: Path, section: str, workers: int, log: Path, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = _free_port(host)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TENANCY_DEMO_")}
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                os.path.join(os.path.dirname(sys.executable), "gunicorn"),
                "--paste",
                "%s#%s" % (ini, section.split(":", 1)[1]),
                "--bind",
                "%s:%d" % (host, self.port),
                "--workers",
                str(workers),
                # The trivial app (this module) and the demo's factories.
                "--pythonpath",
                "%s,%s,%s" % (REPO / "bench", REPO / "examples", REPO),
                "--no-control-socket",
                "--graceful-timeout",
                "2",
            ],
            cwd=str(ini.parent),
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.log_path = log
        self.workers = workers

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until it listens and all its workers are up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gunicorn exited:\n" + self.log_path.read_text(errors="replace"))
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    if len(children(self.process.pid)) == self.workers:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(
            "gunicorn not ready after %.0f s:\n%s" % (timeout, self.log_path.read_text(errors="replace"))
        )

    def pids(self) -> list[int]:
        """The master and its workers."""
        return [self.process.pid, *children(self.process.pid)]

    def cpu(self) -> tuple[frozenset[int], float]:
        """The processes counted and their CPU seconds so far."""
        pids = self.pids()
        return frozenset(pids), sum(cpu_seconds(pid) for pid in pids)

    def get(self, headers: dict | None = None) -> tuple[int, bytes]:
        """One GET of :data:`TARGET`: status and body."""
        # A hang guard, not a time goal: under make test the server shares 2 cores with
        # other suites, and 10 s was seen to pass without an answer (niced, then).
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request("GET", TARGET, headers=dict(HEADERS, **(headers or {})))
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def probe(self) -> tuple[int, dict | None]:
        """One request with the probe header: status and what the app saw."""
        status, body = self.get({PROBE_HEADER: "1"})
        try:
            return status, json.loads(body)
        except ValueError:
            return status, {"body": body[:300].decode(errors="replace")}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


# --- wrk --------------------------------------------------------------------------

# done() prints wrk's own summary as JSON, for the requests and errors it counted.
_LUA_DONE = """
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK-JSON {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, '
    .. '"write": %d, "status": %d, "timeout": %d}\\n', summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


@dataclass
class WrkResult:
    """What one wrk run did, from its ``done()`` summary."""

    requests: int
    seconds: float
    errors: dict

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def wrk(port: int, folder: Path, seconds: float, connections: int) -> WrkResult:
    """Drive 127.0.0.1:*port* with :data:`TARGET` for *seconds*, from one wrk thread."""
    script = folder / "wrk.lua"
    if not script.exists():
        script.write_text(_LUA_DONE, encoding="ascii")
    # wrk takes whole seconds.
    command = ["wrk", "--threads", "1", "--connections", str(connections), "--duration", "%ds" % max(1, round(seconds))]
    for key, value in HEADERS.items():
        command += ["--header", "%s: %s" % (key, value)]
    command += ["--script", str(script), "http://127.0.0.1:%d%s" % (port, TARGET)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    match = re.search(r"^WRK-JSON (.*)$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or match is None:
        raise RuntimeError("wrk failed (%s):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    summary = json.loads(match.group(1))
    errors = {key: summary[key] for key in ("connect", "read", "write", "status", "timeout")}
    return WrkResult(summary["requests"], summary["duration_us"] / 1e6, errors)


# --- the runs ---------------------------------------------------------------------


def measure(server: Server, row: Row, folder: Path, seconds: float, connections: int) -> None:
    """One timed wrk run against *server*: its requests/s and server CPU seconds per request."""
    pids_before, cpu_before = server.cpu()
    result = wrk(server.port, folder, seconds, connections)
    pids_after, cpu_after = server.cpu()
    if pids_before != pids_after:
        raise RuntimeError("row %r: a gunicorn worker was replaced during the run; its CPU time is lost" % row.name)
    if result.errors["status"] or result.errors["timeout"] or not result.requests:
        raise RuntimeError("row %r: wrk saw errors %r over %d requests" % (row.name, result.errors, result.requests))
    row.cpu_per_request.append((cpu_after - cpu_before) / result.requests)
    row.requests_per_second.append(result.per_second)
    row.requests += result.requests


def check_probe(server: Server, row: Row) -> None:
    """The row serves the pass-through path it claims: 200 from the app, which saw what it expects."""
    status, seen = server.probe()
    if status != 200 or seen is None or "tenant_id" not in seen:
        raise RuntimeError("row %r: the request did not pass through to the app: %s %r" % (row.name, status, seen))
    for key, value in row.expect.items():
        if seen.get(key) != value:
            raise RuntimeError("row %r: the app saw %s=%r, not %r" % (row.name, key, seen.get(key), value))


def run_rows(
    rows: list[Row],
    ini: Path,
    folder: Path,
    rounds: int,
    seconds: float,
    connections: int,
    warmup: float,
    seed: int = 0,
) -> None:
    """Start a server per row, warm each, then *rounds* rounds of a wrk run per row, in a shuffled order each."""
    servers = {}
    try:
        for row in rows:
            servers[row.name] = Server(
                ini, _pipeline_section(row), WORKERS, folder / ("gunicorn-%d.log" % len(servers))
            )
        for row in rows:
            server = servers[row.name]
            server.wait_ready()
            check_probe(server, row)
            wrk(server.port, folder, warmup, connections)
        order = list(rows)
        shuffle = random.Random(seed).shuffle
        for _ in range(rounds):
            shuffle(order)
            for row in order:
                measure(servers[row.name], row, folder, seconds, connections)
    finally:
        for server in servers.values():
            server.stop()


def memory_check(ini: Path, folder: Path, first: int, total: int, connections: int) -> dict:
    """RSS of one worker serving the full public pipeline after about *first* and *total* requests.

    The first *first* requests are sent one by one (an exact count); wrk
    runs by time, not by count, so the rest are wrk runs sized from the
    rate seen until at least *total* are served; the count reached is
    reported.
    """
    server = Server(ini, _pipeline_section(Row(FULL, [])), 1, folder / "gunicorn-memory.log")
    try:
        server.wait_ready()
        (worker,) = children(server.process.pid)
        for _ in range(first):
            status, _body = server.get()
            if status != 200:
                raise RuntimeError("the memory check's request got %d" % status)
        rss_first = rss_bytes(worker)
        served, seconds = first, 0.0
        while served < total:
            rate = (served - first) / seconds if seconds else 1000.0
            result = wrk(server.port, folder, min(30.0, (total - served) / rate), connections)
            if result.errors["status"] or result.errors["timeout"]:
                raise RuntimeError("the memory check's wrk saw errors %r" % result.errors)
            served, seconds = served + result.requests, seconds + result.seconds
        rss_last = rss_bytes(worker)
        if children(server.process.pid) != [worker]:
            raise RuntimeError("the memory check's worker was replaced")
    finally:
        server.stop()
    growth = rss_last - rss_first
    return {
        "first_requests": first,
        "requests": served,
        "rss_first_bytes": rss_first,
        "rss_last_bytes": rss_last,
        "growth_bytes": growth,
        "goal_bytes": RSS_GOAL_BYTES,
        "result": "PASS" if growth < RSS_GOAL_BYTES else "MISS",
    }


# --- the table ----------------------------------------------------------------------


def results(rows: list[Row]) -> list[dict]:
    """Per row: medians over the rounds, CPU added over the bare app, ratio to RequestId's added CPU.

    "Added" is taken per round (the row minus the bare app of the same round)
    and then the median over rounds, so a noisy round moves both alike.
    """
    by_name = {row.name: row for row in rows}
    bare = by_name[BARE].cpu_per_request

    def added(row: Row) -> float:
        return statistics.median(mine - base for mine, base in zip(row.cpu_per_request, bare, strict=True))

    request_id = added(by_name[REQUEST_ID]) if REQUEST_ID in by_name else float("nan")
    out = []
    for row in rows:
        extra = added(row)
        out.append(
            {
                "name": row.name,
                "pipeline": row.pipeline,
                "requests": row.requests,
                "requests_per_second": statistics.median(row.requests_per_second),
                "cpu_us_per_request": statistics.median(row.cpu_per_request) * 1e6,
                "cpu_us_per_request_rounds": [value * 1e6 for value in row.cpu_per_request],
                "added_cpu_us": extra * 1e6,
                "ratio_to_request_id": extra / request_id if request_id > 0 else float("nan"),
            }
        )
    return out


#: The goal line's ratio when RequestId's own added CPU was not above zero.
NOT_MEASURED = "not measured (RequestId added no CPU over the bare app in this run: too short or too busy)"


def verdict(out: list[dict]) -> str | None:
    """PASS or MISS of the CPU goal, or ``None`` when the table has no full-pipeline row."""
    full = next((row for row in out if row["name"] == FULL), None)
    if full is None or not any(row["name"] == REQUEST_ID for row in out):
        return None
    return "PASS" if full["ratio_to_request_id"] <= GOAL_RATIO else "MISS"


def table(out: list[dict]) -> str:
    """The rows as fixed-width text."""
    fmt = "%-22s %9s %11s %11s %10s"
    lines = [fmt % ("row", "req/s", "CPU us/req", "added us", "xRequestId"), "-" * 67]
    for row in out:
        base = row["name"] == BARE
        lines.append(
            fmt
            % (
                row["name"],
                "%.0f" % row["requests_per_second"],
                "%.1f" % row["cpu_us_per_request"],
                "-" if base else "%.1f" % row["added_cpu_us"],
                "-" if base else "%.2f" % row["ratio_to_request_id"],
            )
        )
    return "\n".join(lines)


def report_lines(out: list[dict], memory: dict | None) -> Iterable[str]:
    """The goal lines under the table."""
    result = verdict(out)
    if result is not None:
        ratio = next(row for row in out if row["name"] == FULL)["ratio_to_request_id"]
        # No ratio when RequestId added no CPU over the bare app (a short or
        # busy run): say so rather than print "nan"; it cannot pass.
        shown = "%.2f x" % ratio if not math.isnan(ratio) else NOT_MEASURED
        yield "goal: public pipeline's added CPU/request <= %g x RequestId's: %s  %s" % (GOAL_RATIO, shown, result)
    if memory is not None:
        yield "goal: worker RSS growth from request %d to %d < %d MB: %+.2f MB (%.1f -> %.1f MB)  %s" % (
            memory["first_requests"],
            memory["requests"],
            memory["goal_bytes"] // (1024 * 1024),
            memory["growth_bytes"] / 2**20,
            memory["rss_first_bytes"] / 2**20,
            memory["rss_last_bytes"] / 2**20,
            memory["result"],
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds, not minutes: checks the run works")
    parser.add_argument("--rounds", type=int, help="timed wrk runs per row, interleaved (default 3, --quick 1)")
    parser.add_argument("--seconds", type=float, help="length of each timed wrk run (default 5, --quick 1)")
    parser.add_argument("--connections", type=int, default=4, help="wrk's open connections (default 4)")
    parser.add_argument("--memory-requests", type=int, help="requests of the memory check (default 100000)")
    parser.add_argument("--no-memory", action="store_true", help="leave the memory check out")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (1.0 if args.quick else 5.0)
    args.memory_requests = args.memory_requests or (2_000 if args.quick else 100_000)
    if args.rounds < 1 or args.seconds <= 0 or args.connections < 1 or args.memory_requests < 2:
        parser.error("--rounds, --seconds, --connections and --memory-requests must be positive")
    return args


def main(
    argv: list[str] | None = None,
    rows: list[Row] | None = None,
    extra_sections: dict[str, dict[str, str]] | None = None,
) -> int:
    """Run the load bench and print its table; *rows* and *extra_sections* replace the default rows."""
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        print("load run: wrk is missing (Debian: apt-get install wrk; make bench installs it as root)", file=sys.stderr)
        return 2
    filters = public_filters(demo_config())
    rows = rows if rows is not None else default_rows(filters)
    folder = Path(tempfile.mkdtemp(prefix="tenancy-load-"))
    started = time.monotonic()
    try:
        prepare_state(folder)
        # The memory check serves the full public pipeline, whichever rows are timed.
        full = [] if any(row.name == FULL for row in rows) else [Row(FULL, filters + [APP_SECTION.split(":", 1)[1]])]
        ini = write_config(folder, rows + full, extra_sections)
        warmup = min(1.0, args.seconds)
        run_rows(rows, ini, folder, args.rounds, args.seconds, args.connections, warmup)
        memory = None
        if not args.no_memory:
            first = max(1, args.memory_requests // 100)
            memory = memory_check(ini, folder, first, args.memory_requests, args.connections)
    except BaseException:
        print("load run failed; servers' logs kept in %s" % folder, file=sys.stderr)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    out = results(rows)
    load = os.getloadavg()
    print(
        "load run: gunicorn %d sync workers per row, wrk 1 thread %d connections over loopback, GET %s"
        % (WORKERS, args.connections, TARGET)
    )
    print(
        "%d rounds x %g s per row, medians; CPU = utime+stime of master and workers / requests; "
        "load average %.2f %.2f %.2f; %.0f s" % (args.rounds, args.seconds, *load, time.monotonic() - started)
    )
    print()
    print(table(out))
    print()
    lines = list(report_lines(out, memory))
    for line in lines:
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"rows": out, "memory": memory, "loadavg": load, "args": vars(args)}, handle, indent=2)
            handle.write("\n")
    missed = any(line.endswith("MISS") for line in lines)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
