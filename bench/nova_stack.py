"""Where nova's extra CPU under the filters goes: CPython 3.11's stack chunks, measured in one process.

``.venv/bin/python bench/nova_stack.py [--requests 300] [--depths 0,1,2,3,5,10,20]``

Starts Keystone (:mod:`tests.support.openstack`), then, for each variant,
a fresh process of the services' virtualenv that loads nova's compute
API the way nova's WSGI entry point does, sends it ``GET /v2.1/servers``
with a real token in-process (no server, no sockets) and prints, per
request: user and system CPU time and minor page faults
(``getrusage``), and Python function calls (``cProfile``).  Variants:
nova's installed ``api-paste.ini``, the recipe's (``tenancy-mw-manage
paste add --service nova``), and an inert pass-through filter holding
``depth`` extra frames.  See "Inside nova" in ``bench/README.rst``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from nova import passthrough_paste  # noqa: E402 - bench/ is this script's folder

from tests.support.openstack import Cloud, apply_recipe, ensure_venv  # noqa: E402

#: Run in the services' virtualenv: load nova's app, serve REQUESTS calls, print one JSON line.
_CHILD = """
import cProfile, io, json, os, resource, sys, pstats
sys.argv = sys.argv[:1]
from nova.api.openstack import wsgi_app
app = wsgi_app.init_application("osapi_compute", "nova-api")
token, requests = os.environ["BENCH_TOKEN"], int(os.environ["BENCH_REQUESTS"])

def call():
    environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/v2.1/servers", "QUERY_STRING": "",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8774", "SERVER_PROTOCOL": "HTTP/1.1",
               "HTTP_HOST": "127.0.0.1:8774", "HTTP_X_AUTH_TOKEN": token, "HTTP_ACCEPT": "application/json",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""), "wsgi.errors": sys.stderr,
               "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0)}
    status = []
    b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    assert status[0].startswith("200"), status

for _ in range(100):
    call()
before = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(requests):
    call()
after = resource.getrusage(resource.RUSAGE_SELF)
profile = cProfile.Profile()
profile.enable()
for _ in range(50):
    call()
profile.disable()
print("BENCH-JSON " + json.dumps({
    "user_us": (after.ru_utime - before.ru_utime) / requests * 1e6,
    "sys_us": (after.ru_stime - before.ru_stime) / requests * 1e6,
    "minor_faults": (after.ru_minflt - before.ru_minflt) / requests,
    "python_calls": pstats.Stats(profile).total_calls / 50,
}))
"""


def measure(cloud: Cloud, name: str, paste: str, requests: int, extra_path: Path | None = None) -> dict:
    """One fresh process serving *paste*: its per-request numbers."""
    folder = cloud.workdir / ("stack-" + name)
    folder.mkdir(exist_ok=True)
    (folder / "nova.conf").write_text(cloud._nova_conf(cloud.nova_databases()))
    (folder / "api-paste.ini").write_text(paste)
    env = cloud.env(
        OS_NOVA_CONFIG_DIR=str(folder),
        BENCH_TOKEN=cloud.token("alice"),
        BENCH_REQUESTS=str(requests),
        PYTHONHASHSEED="0",
    )
    if extra_path is not None:
        env["PYTHONPATH"] += ":" + str(extra_path)
    done = subprocess.run(
        [str(cloud.venv / "bin" / "python"), "-c", _CHILD], env=env, capture_output=True, text=True, check=False
    )
    line = [text for text in done.stdout.splitlines() if text.startswith("BENCH-JSON ")]
    if done.returncode or not line:
        raise RuntimeError("%s failed:\n%s" % (name, done.stderr[-3000:]))
    return json.loads(line[0][len("BENCH-JSON ") :])


def main(argv: list[str] | None = None) -> int:
    """Measure every variant and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="timed requests per variant (default 300)")
    parser.add_argument("--depths", default="0,1,2,3,5,10,20", help="pass-through depths (default 0,1,2,3,5,10,20)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tenancy-nova-stack-") as tmp:
        folder = Path(tmp)
        cloud = Cloud(folder / "cloud", ensure_venv())
        try:
            installed = cloud.installed_paste("nova")
            settings = {"idempotency.backend": "memory", "idempotency.secret": "bench-secret"}
            variants = [
                ("nova", installed, None),
                ("nova + filters", apply_recipe("nova", "public", installed, folder, settings), None),
            ]
            for depth in (int(d) for d in args.depths.split(",")):
                paste, modules = passthrough_paste(installed, folder, depth)
                variants.append(("pass-through, %d frames" % (depth + 1), paste, modules))
            print("%-26s %9s %9s %12s %13s" % ("GET /v2.1/servers", "user us", "sys us", "faults/req", "py calls/req"))
            for number, (name, paste, extra) in enumerate(variants):
                row = measure(cloud, str(number), paste, args.requests, extra)
                print(
                    "%-26s %9.0f %9.0f %12.1f %13.0f"
                    % (name, row["user_us"], row["sys_us"], row["minor_faults"], row["python_calls"])
                )
        finally:
            cloud.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
