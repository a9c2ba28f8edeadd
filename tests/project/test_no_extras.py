"""The library as ``pip install tenancy_mw`` gives it: no extras, so no SQLAlchemy.

A fresh virtualenv (made anew by every run: nothing cached but pip's own
download cache) gets a copy of this checkout with a plain ``pip install``,
and PasteDeploy, which is not a requirement of the library (a service that
loads filters through paste has it already), to load the filters the way a
service does.  Then, in that virtualenv only: SQLAlchemy is absent; every
filter that needs no SQL loads through ``paste.deploy.loadapp`` and answers
a request; the options are listed and the config generator runs for every
namespace; ``tenancy-mw-manage`` runs, and its SQL verbs name the extra that
brings them.  A slow test (``SLOW_MODULES``): the install takes most of a
minute.
"""

from __future__ import annotations

import configparser
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import require
from tests.support import memcached

REPO = Path(__file__).resolve().parents[2]
#: What a copy of the checkout leaves out: virtualenvs, build outputs, caches.
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "cover", "state"
)
SQL_EXTRA_HINT = "pip install 'tenancy_mw[sql]'"

#: The service the filters wrap: it answers 201 to a POST, and shows the ``tenancy.*`` keys and its call count.
APP_MODULE = """
import json

CALLS = []


def app_factory(global_conf, **local_conf):
    def app(environ, start_response):
        CALLS.append(environ["PATH_INFO"])
        seen = {k: repr(v) for k, v in environ.items() if k.startswith("tenancy.")}
        body = json.dumps({"calls": len(CALLS), "environ": seen}).encode()
        status = "201 Created" if environ["REQUEST_METHOD"] == "POST" else "200 OK"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app
"""

#: Loads ``config:<argv[1]>`` with paste and sends it the requests of argv[2] (JSON); prints the answers as JSON.
SEND_SCRIPT = """
import io, json, sys
from wsgiref.util import setup_testing_defaults
from paste.deploy import loadapp

app = loadapp("config:" + sys.argv[1])
answers = []
for method, target, headers, body in json.loads(sys.argv[2]):
    path, _, query = target.partition("?")
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
               "wsgi.input": io.BytesIO(body.encode()), "CONTENT_LENGTH": str(len(body))}
    environ.update(("HTTP_" + k.upper().replace("-", "_"), v) for k, v in headers.items())
    setup_testing_defaults(environ)
    answer = {}
    def start_response(status, response_headers, exc_info=None):
        answer.update(status=int(status.split()[0]), headers=dict(response_headers))
    chunks = app(environ, start_response)
    answer["body"] = b"".join(chunks).decode()
    getattr(chunks, "close", lambda: None)()
    answers.append(answer)
print(json.dumps(answers))
"""


class BareVenv:
    """A virtualenv holding tenancy_mw without extras (and PasteDeploy); runs commands in it, never the checkout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "venv" / "bin"
        # Neither PYTHONPATH (the tests run with the checkout on it) nor the checkout as the working folder.
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess:
        """Run *program* of the virtualenv's ``bin`` with *args*, in the virtualenv's folder."""
        command = [str(self.bin / program), *args]
        return subprocess.run(command, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=120)

    def python(self, code: str) -> subprocess.CompletedProcess:
        """Run *code* with the virtualenv's Python."""
        return self.run("python", "-c", code)

    def send(self, filter_name: str, options: dict[str, str], requests: list[tuple]) -> list[dict]:
        """Load *filter_name* (``egg:tenancy_mw``) over the test app through paste; its answers to *requests*."""
        ini = self.root / ("%s.ini" % filter_name)
        ini.write_text(_paste_ini(filter_name, options))
        result = self.run("python", "-c", SEND_SCRIPT, str(ini), json.dumps(requests))
        assert result.returncode == 0, "%s did not load or answer without extras:\n%s" % (filter_name, result.stderr)
        answers = json.loads(result.stdout)
        for answer in answers:
            answer["json"] = json.loads(answer["body"])
        return answers


def _paste_ini(filter_name: str, options: dict[str, str]) -> str:
    config = configparser.ConfigParser(interpolation=None)
    config["pipeline:main"] = {"pipeline": "%s app" % filter_name}
    config["filter:%s" % filter_name] = {"use": "egg:tenancy_mw#%s" % filter_name, **options}
    config["app:app"] = {"paste.app_factory": "bare_app:app_factory"}
    text = io.StringIO()
    config.write(text)
    return text.getvalue()


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> BareVenv:
    """A new virtualenv with ``pip install <copy of the checkout>`` and PasteDeploy, nothing else."""
    root = tmp_path_factory.mktemp("no-extras")
    checkout = root / "checkout"
    # A copy, so the build leaves nothing (build/, *.egg-info) in the working tree.
    shutil.copytree(REPO, checkout, ignore=_NOT_COPIED)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    venv = BareVenv(root)
    # PasteDeploy is not a requirement of the library: installed here for loading, as a service has it.
    installed = venv.run("python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                         str(checkout), "PasteDeploy")  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    (root / "bare_app.py").write_text(APP_MODULE)
    venv.env["PYTHONPATH"] = str(root)  # the test app only; the library comes from site-packages
    return venv


def test_sqlalchemy_is_not_installed(bare):
    result = bare.python("import tenancy_mw, sqlalchemy")
    assert result.returncode == 1
    assert "No module named 'sqlalchemy'" in result.stderr
    where = bare.python("import tenancy_mw; print(tenancy_mw.__file__)").stdout
    assert "site-packages" in where
    assert str(REPO) not in where


def test_tenant_path_loads_and_answers(bare):
    (answer,) = bare.send("tenant_path", {}, [("GET", "/v2.1/acme/servers", {}, "")])
    assert answer["status"] == 200
    assert answer["json"]["environ"]["tenancy.tenant_id"] == repr("acme")


def test_admin_cull_loads_and_answers(bare):
    culled, passed = bare.send(
        "admin_cull", {"cull_status": "403"}, [("PUT", "/v2.1/acme", {}, ""), ("GET", "/v2.1/acme/servers", {}, "")]
    )
    assert culled["status"] == 403
    assert passed["status"] == 200
    assert passed["json"]["calls"] == 1


def test_tag_query_loads_and_answers(bare):
    (answer,) = bare.send("tag_query", {}, [("GET", "/v2.1/acme/servers?tags=b,a", {}, "")])
    assert answer["status"] == 200
    assert "tenancy.tag_query" in answer["json"]["environ"]


def test_id_resolvers_parsers_work_and_its_cell_lookup_names_the_extra(bare):
    # The id parsers and the microversion gate are pure: they run here.
    parsed = bare.python(
        "from tenancy_mw.cells.ids import parse_resources\n"
        "(resource,) = parse_resources('/os-services/{id} services id uuid')\n"
        "print(resource.table, resource.id_index)\n"
    )
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.split() == ["services", "1"]
    # The filter looks ids up in the cells' databases: through paste (no lookup object to give)
    # it needs the sql extra, and says so when it loads.
    ini = bare.root / "id_resolver.ini"
    ini.write_text(
        _paste_ini("id_resolver", {"cells": "cell1=sqlite://", "resources": "/os-services/{id} services id uuid"})
    )
    loaded = bare.python("from paste.deploy import loadapp; loadapp('config:%s')" % ini)
    assert loaded.returncode != 0
    assert "pip install 'tenancy_mw[sql]'" in loaded.stderr


def _assert_replays(bare: BareVenv, options: dict[str, str]) -> None:
    post = ("POST", "/v2.1/servers", {"X-Client-Token": "retry-me", "Content-Type": "application/json"}, "{}")
    first, retry = bare.send("idempotency", {"shared_scope": "demo", **options}, [post, post])
    assert (first["status"], retry["status"]) == (201, 201)
    assert retry["headers"].get("Idempotent-Replayed") == "true"
    assert retry["json"]["calls"] == 1  # the service ran once


def test_idempotency_with_the_memory_backend(bare):
    _assert_replays(bare, {"backend": "memory"})


def test_idempotency_with_the_memcached_backend(bare):
    (server,) = memcached.start_servers(1, require)
    try:
        _assert_replays(bare, {"backend": "memcached", "memcached_servers": server.address, "secret": "s3cret" * 4})
    finally:
        server.stop()


def test_every_option_is_listed(bare):
    result = bare.python("import tenancy_mw.opts; print(len(tenancy_mw.opts.list_opts()))")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 6


def _opts_namespaces() -> list[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options.entry_points"]["oslo.config.opts"].strip().splitlines()
    return [line.split("=")[0].strip() for line in lines]


@pytest.mark.parametrize("namespace", _opts_namespaces())
def test_the_config_generator_runs(bare, namespace):
    result = bare.run("oslo-config-generator", "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    group = namespace.partition(".")[2]
    assert ("[%s]" % group if group else "[tenant_path]") in result.stdout
    assert "#error_format = " in result.stdout


def test_manage_runs_and_its_sql_verbs_name_the_extra(bare):
    helped = bare.run("tenancy-mw-manage", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "paste" in helped.stdout
    assert "db" in helped.stdout
    upgrade = bare.run("tenancy-mw-manage", "db", "upgrade", "--url", "sqlite:///%s" % (bare.root / "t.sqlite"))
    assert upgrade.returncode == 1
    assert SQL_EXTRA_HINT in upgrade.stderr
    assert "Traceback" not in upgrade.stderr
    assert upgrade.stderr.count("\n") == 1
    purge = bare.run("tenancy-mw-manage", "tenants", "purge")
    assert purge.returncode == 2
    assert SQL_EXTRA_HINT in purge.stderr


def test_manage_paste_verbs_run(bare):
    target = bare.root / "api-paste.ini"
    target.write_text(
        textwrap.dedent(
            """\
            [pipeline:main]
            pipeline = tenant_path app

            [filter:tenant_path]
            use = egg:tenancy_mw#tenant_path

            [app:app]
            paste.app_factory = bare_app:app_factory
            """
        )
    )
    checked = bare.run("tenancy-mw-manage", "paste", "check", str(target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
