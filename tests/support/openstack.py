"""Real OpenStack for the tests and the bench: Keystone, nova-api and cinder-api, unmodified.

The services come from PyPI (nova 34.0.0, keystone 30.0.0, cinder 29.0.0,
with keystonemiddleware, openstacksdk and python-openstackclient), pinned by
``openstack-constraints.txt``, in a virtualenv of their own: never the
library's.  That virtualenv is cached between runs on one machine
(``$TENANCY_MW_CACHE``, default ``~/.cache/tenancy_mw``), keyed by the
constraints, so a warm run reuses it and a cold one builds it
(``python -m tests.support.openstack venv``, which ``make test`` runs).

Each service runs under gunicorn on a free loopback port, configured by a
``gunicorn.conf.py`` in its working folder and no command-line options:
nova and Keystone hand ``sys.argv`` to oslo.config, which refuses
gunicorn's.  The library reaches the services' virtualenv as a build of the
checkout (``pip install --no-deps --target``) on ``PYTHONPATH``, so its
``egg:tenancy_mw#...`` entry points load as an operator's install would.

Usage::

    cloud = Cloud(workdir)                  # Keystone, bootstrapped, two member projects
    nova = cloud.nova("public", paste_text)  # nova-api serving that api-paste.ini
    token = cloud.token("alice")             # a real token of alice's project
    cloud.stop()

``python -m tests.support.openstack serve`` starts a cloud with nova's
filtered public and admin endpoints and prints how to reach them (for a
person trying things by hand).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.servers import Response, free_port, http_request, wait_for_port

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO_ROOT / "openstack-constraints.txt"
#: What the services' virtualenv holds (versions from CONSTRAINTS).
PACKAGES = (
    "nova==34.0.0",
    "keystone==30.0.0",
    "cinder==29.0.0",
    "keystonemiddleware",
    "openstacksdk",
    "python-openstackclient",
    "gunicorn",
    "pymemcache",
)
PASSWORD = "tenancy-mw-test-password"
REGION = "RegionOne"
#: The second region publishes the catalog's other layout (project id in the URL or not).
OTHER_REGION = "RegionTwo"


# --- the services' virtualenv -------------------------------------------------


def cache_root() -> Path:
    """Where cached virtualenvs live: ``$TENANCY_MW_CACHE`` or ``~/.cache/tenancy_mw``."""
    return Path(os.environ.get("TENANCY_MW_CACHE") or Path.home() / ".cache" / "tenancy_mw")


def venv_path() -> Path:
    """The cached virtualenv for today's constraints, packages and Python."""
    key = hashlib.sha256()
    key.update(CONSTRAINTS.read_bytes())
    key.update(" ".join(PACKAGES).encode())
    key.update(("%d.%d" % sys.version_info[:2]).encode())
    return cache_root() / ("openstack-" + key.hexdigest()[:16])


def ensure_venv(log=sys.stderr) -> Path:
    """The services' virtualenv, built once per machine and constraints (a lock keeps runs apart)."""
    path = venv_path()
    stamp = path / ".complete"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return path
        shutil.rmtree(path, ignore_errors=True)
        started = time.monotonic()
        print("building the OpenStack virtualenv %s (a minute or two, once)" % path, file=log, flush=True)
        python = getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([python, "-m", "venv", str(path)], check=True)
        pip = [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run(pip + ["-c", str(CONSTRAINTS), *PACKAGES], check=True)
        stamp.write_text("built in %.0f s\n" % (time.monotonic() - started))
        return path


def library_overlay(target: Path, venv: Path) -> Path:
    """A build of this checkout of tenancy_mw in *target*, for the services' ``PYTHONPATH``."""
    if not (target / "tenancy_mw").exists():
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
                str(target),
                str(REPO_ROOT),
            ],
            check=True,
            cwd=str(target.parent),
        )
    return target


# --- one service under gunicorn -------------------------------------------------


@dataclass
class Service:
    """A WSGI application of the services' virtualenv, served by gunicorn from *folder*."""

    name: str
    folder: Path
    wsgi_app: str
    env: dict
    venv: Path
    workers: int = 2
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def start(self, timeout: float = 120.0) -> None:
        """Start gunicorn and wait until the application answers."""
        (self.folder / "gunicorn.conf.py").write_text(
            textwrap.dedent(
                """\
                bind = "127.0.0.1:%d"
                workers = %d
                wsgi_app = %r
                timeout = 120
                graceful_timeout = 2
                control_socket_disable = True
                """
            )
            % (self.port, self.workers, self.wsgi_app)
        )
        log = open(self.folder / "gunicorn.log", "ab")  # noqa: SIM115 - the process keeps it
        self.process = subprocess.Popen(
            [str(self.venv / "bin" / "gunicorn")],
            cwd=str(self.folder),
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        try:
            wait_for_port(self.port, timeout=timeout, process=self.process)
            self._wait_answering(timeout)
        except RuntimeError:
            self.stop()
            raise RuntimeError("%s did not start:\n%s" % (self.name, self.log()[-6000:])) from None

    def _wait_answering(self, timeout: float) -> None:
        # gunicorn binds before its workers import the app: wait for a real answer.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError("exited")
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.request("GET", "/").status < 500:
                    return
            time.sleep(0.2)
        raise RuntimeError("no answer")

    def stop(self) -> None:
        """Stop gunicorn and its workers."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def log(self) -> str:
        path = self.folder / "gunicorn.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def request(
        self, method: str, target: str, headers: dict | None = None, body=None, timeout: float = 60.0
    ) -> Response:
        """Send *target* as given; *body* may be bytes or a JSON-able object."""
        headers = dict(headers or {})
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        return http_request(self.port, method, target, headers, body, timeout)


# --- the cloud --------------------------------------------------------------------


@dataclass
class Person:
    """A Keystone user with one role on one project."""

    name: str
    project: str
    role: str
    project_id: str = ""
    _token: tuple[str, float] | None = None


class Cloud:
    """Keystone with an admin, two member projects (alice's and bob's), and services on demand."""

    PEOPLE = (
        Person("admin", "admin", "admin"),
        Person("alice", "alpha", "member"),
        Person("bob", "beta", "member"),
    )

    def __init__(self, workdir: Path, venv: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.venv = venv or ensure_venv()
        self.overlay = library_overlay(self.workdir / "site", self.venv)
        self.services: list[Service] = []
        self.people = {p.name: Person(p.name, p.project, p.role) for p in self.PEOPLE}
        try:
            self.keystone = self._start_keystone()
            self._populate()
        except BaseException:
            self.stop()  # never leave a Keystone running behind a failed start
            raise

    # Keystone --------------------------------------------------------------------

    def env(self, **extra: str) -> dict:
        """The environment of the services' processes: the library on PYTHONPATH, nothing of ours else."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "PYTHON", "VIRTUAL_ENV"))}
        env.update(PYTHONPATH=str(self.overlay), PATH="%s:%s" % (self.venv / "bin", env.get("PATH", "")))
        env.update(extra)
        return env

    def manage(self, program: str, *args: str, folder: Path) -> None:
        """Run ``<program> --config-file <folder>/<conf> args`` of the services' virtualenv."""
        conf = folder / ("%s.conf" % program.split("-")[0])
        done = subprocess.run(
            [str(self.venv / "bin" / program), "--config-file", str(conf), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            cwd=str(folder),
        )
        if done.returncode:
            raise RuntimeError("%s %s failed:\n%s%s" % (program, " ".join(args), done.stdout, done.stderr[-4000:]))

    def _start_keystone(self) -> Service:
        folder = self.workdir / "keystone"
        folder.mkdir(exist_ok=True)
        service = Service(
            "keystone", folder, "keystone.wsgi.api:application", self.env(OS_KEYSTONE_CONFIG_DIR=str(folder)), self.venv
        )
        (folder / "keystone.conf").write_text(
            textwrap.dedent(
                """\
                [DEFAULT]
                log_file = {f}/keystone.log
                [database]
                connection = sqlite:///{f}/keystone.db
                [token]
                provider = fernet
                [fernet_tokens]
                key_repository = {f}/fernet-keys
                [fernet_receipts]
                key_repository = {f}/fernet-receipts
                [credential]
                key_repository = {f}/credential-keys
                [identity]
                # bcrypt's least cost: every login (the CLI's, each service's own) checks a
                # password, at the default cost 12 a quarter second of CPU or more each.
                password_hash_rounds = 4
                """
            ).format(f=folder)
        )
        user, group = _user_and_group()
        self.manage("keystone-manage", "db_sync", folder=folder)
        for verb in ("fernet_setup", "credential_setup"):
            self.manage("keystone-manage", verb, "--keystone-user", user, "--keystone-group", group, folder=folder)
        url = service.url + "/v3"
        self.manage(
            "keystone-manage",
            "bootstrap",
            "--bootstrap-password",
            PASSWORD,
            "--bootstrap-admin-url",
            url,
            "--bootstrap-internal-url",
            url,
            "--bootstrap-public-url",
            url,
            "--bootstrap-region-id",
            REGION,
            folder=folder,
        )
        self._launch(service)
        return service

    def _launch(self, service: Service) -> Service:
        self.services.append(service)
        service.start()
        return service

    def token(self, name: str) -> str:
        """A fresh-enough project-scoped token of person *name* (cached for ten minutes)."""
        person = self.people[name]
        if person._token is None or person._token[1] < time.monotonic():
            person._token = (self._authenticate(name, person.project), time.monotonic() + 600)
        return person._token[0]

    def _authenticate(self, user: str, project: str) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {"name": user, "domain": {"id": "default"}, "password": PASSWORD}},
                },
                "scope": {"project": {"name": project, "domain": {"id": "default"}}},
            }
        }
        resp = self.keystone.request("POST", "/v3/auth/tokens", body=body)
        if resp.status != 201:
            raise RuntimeError("Keystone refused %s: %s %s" % (user, resp.status, resp.body[:500]))
        return resp.headers["x-subject-token"]

    def identity(self, method: str, path: str, body=None) -> dict:
        """An admin call to Keystone's API; the JSON answer."""
        resp = self.keystone.request(method, "/v3" + path, {"X-Auth-Token": self.token("admin")}, body)
        if resp.status >= 300:
            raise RuntimeError("Keystone %s %s: %s %s" % (method, path, resp.status, resp.body[:500]))
        return resp.json() if resp.body else {}

    def _populate(self) -> None:
        roles = {r["name"]: r["id"] for r in self.identity("GET", "/roles")["roles"]}
        for name in ("member", "service"):
            if name not in roles:
                roles[name] = self.identity("POST", "/roles", {"role": {"name": name}})["role"]["id"]
        projects = {p["name"]: p["id"] for p in self.identity("GET", "/projects")["projects"]}
        for project in ("alpha", "beta", "service"):
            if project not in projects:
                created = self.identity("POST", "/projects", {"project": {"name": project, "domain_id": "default"}})
                projects[project] = created["project"]["id"]
        for person in self.people.values():
            person.project_id = projects[person.project]
            if person.name != "admin":
                self._user(person.name, projects[person.project], roles[person.role])
        # The catalog's second region needs Keystone too: clients look the identity service up in their region.
        identity = self.identity("GET", "/services?type=identity")["services"][0]["id"]
        self.identity("POST", "/regions", {"region": {"id": OTHER_REGION}})
        for interface in ("public", "internal", "admin"):
            endpoint = {
                "service_id": identity,
                "interface": interface,
                "url": self.keystone.url + "/v3",
                "region_id": OTHER_REGION,
            }
            self.identity("POST", "/endpoints", {"endpoint": endpoint})
        for service_user in ("nova", "cinder"):
            self._user(service_user, projects["service"], roles["admin"])
            self._user(service_user, projects["service"], roles["service"], create=False)

    def _user(self, name: str, project_id: str, role_id: str, create: bool = True) -> None:
        if create:
            user = {"name": name, "password": PASSWORD, "domain_id": "default", "default_project_id": project_id}
            user_id = self.identity("POST", "/users", {"user": user})["user"]["id"]
        else:
            user_id = self.identity("GET", "/users?name=%s" % name)["users"][0]["id"]
        self.identity("PUT", "/projects/%s/users/%s/roles/%s" % (project_id, user_id, role_id))

    def register(
        self, service_type: str, name: str, urls: dict[str, str], admin_urls: dict[str, str] | None = None
    ) -> None:
        """Add a service to the catalog: *urls* by region for the public and internal interfaces,
        *admin_urls* (default: *urls*) for the admin interface."""
        created = self.identity("POST", "/services", {"service": {"type": service_type, "name": name}})
        for interface, by_region in (("public", urls), ("internal", urls), ("admin", admin_urls or urls)):
            for region, url in by_region.items():
                endpoint = {
                    "service_id": created["service"]["id"],
                    "interface": interface,
                    "url": url,
                    "region_id": region,
                }
                self.identity("POST", "/endpoints", {"endpoint": endpoint})

    # nova and cinder ---------------------------------------------------------------

    def authtoken_section(self, user: str) -> str:
        """The ``[keystone_authtoken]`` section a service user needs here."""
        return textwrap.dedent(
            """\
            [keystone_authtoken]
            www_authenticate_uri = {url}
            auth_url = {url}
            auth_type = password
            username = {user}
            password = {password}
            project_name = service
            user_domain_id = default
            project_domain_id = default
            service_token_roles_required = true
            """
        ).format(url=self.keystone.url, user=user, password=PASSWORD)

    def nova_databases(self) -> Path:
        """nova's API, cell0 and cell1 databases (SQLite), made once for every nova-api of the cloud."""
        folder = self.workdir / "nova-db"
        if not (folder / "nova.conf").exists():
            folder.mkdir(exist_ok=True)
            (folder / "nova.conf").write_text(self._nova_conf(folder))
            self.manage("nova-manage", "api_db", "sync", folder=folder)
            self.manage(
                "nova-manage",
                "cell_v2",
                "map_cell0",
                "--database_connection",
                "sqlite:///%s/cell0.db" % folder,
                folder=folder,
            )
            self.manage("nova-manage", "cell_v2", "create_cell", "--name", "cell1", folder=folder)
            self.manage("nova-manage", "db", "sync", folder=folder)
        return folder

    def _nova_conf(self, db_folder: Path) -> str:
        return textwrap.dedent(
            """\
            [DEFAULT]
            transport_url = fake://
            # Nothing answers an RPC call here (no compute host): give up at once, on the
            # calls that wait long too (a host's enable, a live migration's checks).  The
            # fake transport waits exactly this long (0: not at all) before MessagingTimeout.
            rpc_response_timeout = 0
            long_rpc_timeout = 0
            use_stderr = true
            [api]
            auth_strategy = keystone
            [api_database]
            connection = sqlite:///{db}/nova_api.db
            [database]
            connection = sqlite:///{db}/cell1.db
            [oslo_concurrency]
            lock_path = {db}/locks
            [oslo_policy]
            enforce_scope = true
            enforce_new_defaults = true
            [wsgi]
            api_paste_config = api-paste.ini
            """
        ).format(db=db_folder) + self.authtoken_section("nova")

    def nova(
        self, name: str, paste: str, workers: int = 2, extra_conf: str = "", extra_path: Path | None = None
    ) -> Service:
        """A nova-api serving *paste* (the text of an api-paste.ini), sharing the cloud's databases.

        *extra_path*, a folder put on the server's ``PYTHONPATH`` after the library, holds
        modules that *paste* names (the nova bench's pass-through filter).
        """
        databases = self.nova_databases()
        folder = self.workdir / ("nova-" + name)
        folder.mkdir(exist_ok=True)
        (folder / "nova.conf").write_text(self._nova_conf(databases) + extra_conf)
        (folder / "api-paste.ini").write_text(paste)
        env = self.env(OS_NOVA_CONFIG_DIR=str(folder))
        if extra_path is not None:
            env["PYTHONPATH"] += os.pathsep + str(extra_path)
        return self._launch(
            Service("nova-" + name, folder, "nova.wsgi.osapi_compute:application", env, self.venv, workers=workers)
        )

    def cinder_database(self) -> Path:
        """cinder's database (SQLite), made once for every cinder-api of the cloud."""
        folder = self.workdir / "cinder-db"
        if not (folder / "cinder.conf").exists():
            folder.mkdir(exist_ok=True)
            (folder / "cinder.conf").write_text(self._cinder_conf(folder))
            self.manage("cinder-manage", "db", "sync", folder=folder)
        return folder

    def _cinder_conf(self, db_folder: Path) -> str:
        return textwrap.dedent(
            """\
            [DEFAULT]
            transport_url = fake://
            # Nothing answers an RPC call here (no volume service): give up at once.
            rpc_response_timeout = 0
            auth_strategy = keystone
            use_stderr = true
            state_path = {db}
            api_paste_config = api-paste.ini
            [database]
            connection = sqlite:///{db}/cinder.db
            [oslo_concurrency]
            lock_path = {db}/locks
            """
        ).format(db=db_folder) + self.authtoken_section("cinder")

    def cinder(self, name: str, paste: str, workers: int = 2, extra_conf: str = "") -> Service:
        """A cinder-api serving *paste*, sharing the cloud's cinder database."""
        database = self.cinder_database()
        folder = self.workdir / ("cinder-" + name)
        (folder / ".cinder").mkdir(parents=True, exist_ok=True)
        (folder / "api-paste.ini").write_text(paste)
        conf = self._cinder_conf(database).replace("api-paste.ini", str(folder / "api-paste.ini"))
        # cinder's WSGI entry point reads only oslo.config's default places, ~/.cinder/ first:
        # its HOME is its folder.
        (folder / ".cinder" / "cinder.conf").write_text(conf + extra_conf)
        env = self.env(HOME=str(folder))
        return self._launch(
            Service("cinder-" + name, folder, "cinder.wsgi.api:application", env, self.venv, workers=workers)
        )

    def installed_paste(self, service: str) -> str:
        """The api-paste.ini that *service*'s package installed, unmodified."""
        return (self.venv / "etc" / service / "api-paste.ini").read_text()

    def stop(self) -> None:
        """Stop every service of the cloud."""
        for service in reversed(self.services):
            service.stop()
        self.services.clear()


def apply_recipe(service: str, endpoint: str, installed: str, folder: Path, settings: dict[str, str]) -> str:
    """*installed* (a service's api-paste.ini) after the library's recipe, ``tenancy-mw-manage paste add``.

    Run as an operator runs it, the console command of the library's own
    virtualenv; *settings* become ``--set FILTER.OPTION=VALUE``.
    """
    source = folder / ("%s-installed-api-paste.ini" % service)
    source.write_text(installed)
    output = folder / ("%s-%s-api-paste.ini" % (service, endpoint))
    command = [
        sys.executable,
        "-m",
        "tenancy_mw.manage",
        "paste",
        "add",
        "--service",
        service,
        "--endpoint",
        endpoint,
        str(source),
        "--output",
        str(output),
    ]
    for key, value in settings.items():
        command += ["--set", "%s=%s" % (key, value)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError("tenancy-mw-manage paste add failed: %s" % done.stderr)
    return output.read_text()


#: The check strings that mean "admin only" in nova's and cinder's policy defaults.
ADMIN_ONLY_CHECKS = ("rule:context_is_admin", "role:admin", "is_admin:True", "rule:admin_api")

#: Policies whose operations are calls another policy governs: they decide only part of the
#: request or response, so their check string says nothing about who may make the call.
ATTRIBUTE_POLICIES = {
    # Lists POST /flavors and PUT /flavors/{id}, whose answers show extra specs; flavor-manage governs the calls.
    "nova": {"os_compute_api:os-flavor-extra-specs:index"},
    # Lists POST /types (whether a new type is public); type_create governs the call.  Shows group
    # specs in GET /group_types/{id}, which members may call (no policy checks it).
    "cinder": {"volume_extension:volume_type_access", "group:access_group_types_specs"},
}

_POLICY_SCRIPT = """
import json, sys, warnings
warnings.simplefilter("ignore")
policies = __import__(sys.argv[1] + ".policies", fromlist=["list_rules"])
admin = set(sys.argv[2:])
out = []
for rule in policies.list_rules():
    for op in getattr(rule, "operations", None) or ():
        out.append({"name": rule.name, "check_str": rule.check_str, "admin": rule.check_str in admin,
                    "method": op["method"], "path": op["path"]})
print(json.dumps(out))
"""


def policy_operations(venv: Path, service: str) -> list[dict]:
    """Every documented operation of *service*'s policy defaults (``nova.policies``), read from the package.

    Each is ``{"name", "check_str", "admin", "method", "path"}``; ``admin`` is
    true when the rule's default is admin-only (:data:`ADMIN_ONLY_CHECKS`).
    """
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _POLICY_SCRIPT, service, *ADMIN_ONLY_CHECKS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise RuntimeError("reading %s's policy defaults failed:\n%s" % (service, done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def admin_only_routes(venv: Path, service: str) -> list[tuple[str, str, str]]:
    """(policy name, method, path) of *service*'s admin-only calls that the route alone decides.

    Left out: operations whose method and path a non-admin rule documents
    too (nova's ``POST /servers`` with a forced host, ``/servers/{id}/action``
    with an admin action): the service tells those apart by the body or
    query, so a path rule cannot, and its own policy still refuses them;
    and :data:`ATTRIBUTE_POLICIES`.  The body action of a path (``... (os-resetState)``)
    is dropped: the path is what a route decides.
    """

    def route(op: dict) -> tuple[str, str]:
        # One shape for one route, whatever its placeholders are called ({id}, {server_id}).
        path = re.sub(r"\{[^}]*\}", "{}", op["path"].split(" (")[0].split("?")[0].rstrip("/"))
        return op["method"].upper(), path

    operations = [op for op in policy_operations(venv, service) if op["name"] not in ATTRIBUTE_POLICIES[service]]
    shared = {route(op) for op in operations if not op["admin"] and op["check_str"] != "!"}
    return sorted(
        {
            (op["name"], op["method"].upper(), op["path"].split(" (")[0])
            for op in operations
            if op["admin"] and route(op) not in shared
        }
    )


_ROUTES_SCRIPT = """import json, sys, warnings, tempfile, os
warnings.simplefilter("ignore")
service = sys.argv[1]
folder = tempfile.mkdtemp()
conf_file = os.path.join(folder, "service.conf")
with open(conf_file, "w") as handle:
    handle.write("[DEFAULT]\\ntransport_url = fake://\\n[database]\\nconnection = sqlite:///%s/db.sqlite\\n" % folder)
from oslo_config import cfg
if service == "nova":
    import nova.conf
    from nova import objects
    objects.register_all()
    cfg.CONF([], project="nova", default_config_files=[conf_file])
    from nova import rpc
    rpc.init(cfg.CONF)
    from nova.api.openstack import compute
    mapper = compute.APIRouterV21().map
else:
    from cinder.common import config  # noqa: F401
    from cinder import objects
    objects.register_all()
    cfg.CONF([], project="cinder", default_config_files=[conf_file])
    from cinder.db import migration
    migration.db_sync()
    from cinder import rpc
    rpc.init(cfg.CONF)
    from cinder.api.v3 import router
    mapper = router.APIRouter().map
tops = set()
for route in mapper.matchlist:
    first = route.routepath.lstrip("/").split("/")[0]
    if first and not first.startswith(("{", ":")):
        tops.add(first.split(".:(format)")[0].split("{")[0])
print(json.dumps(sorted(tops)))
"""


def top_level_names(venv: Path, service: str) -> list[str]:
    """The first literal segment of every route *service*'s API router serves without a project id.

    Read from the router nova (``APIRouterV21``) or cinder (``APIRouter``)
    builds, on a throw-away SQLite database and the fake RPC transport.
    """
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _ROUTES_SCRIPT, service], capture_output=True, text=True, timeout=300
    )
    if done.returncode:
        raise RuntimeError("reading %s's routes failed:\n%s" % (service, done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies (a killed test run leaves no server)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _user_and_group() -> tuple[str, str]:
    import grp
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def main(argv: list[str]) -> int:
    """``venv``: build the cached virtualenv; ``serve DIR``: a cloud with nova, until interrupted."""
    if argv[:1] == ["venv"]:
        print(ensure_venv())
        return 0
    if argv[:1] == ["serve"] and len(argv) == 2:
        cloud = Cloud(Path(argv[1]))
        nova = cloud.nova("plain", cloud.installed_paste("nova"))
        print("keystone %s\nnova %s\nadmin password %s" % (cloud.keystone.url, nova.url, PASSWORD), flush=True)
        try:
            signal.pause()
        finally:
            cloud.stop()
        return 0
    print("usage: python -m tests.support.openstack venv | serve DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
