"""The demo's two pipelines under real gunicorn, as ``make demo`` serves them, on free ports.

``public`` is examples/api-paste.ini's ``main`` pipeline, ``admin`` its
``admin`` pipeline; both on one SQLite database, one tenant registry and two
cell databases, all files in a folder of the caller's (never examples/state/).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from tests.support.servers import GunicornServer

#: The endpoint roles and the api-paste.ini pipeline serving each.
PIPELINES = (("public", "main"), ("admin", "admin"))


def _wait_until_serving(server: GunicornServer, attempts: int = 6) -> None:
    """Wait until the pipeline answers (gunicorn listens before its workers have loaded the app)."""
    for attempt in range(attempts):
        try:
            response = server.request("GET", "/")
        except OSError:
            if attempt == attempts - 1:
                raise
            continue
        assert response.status == 200, (response.status, response.body)
        return


class DemoServers(dict):
    """The started pipelines by role (``servers["public"]``, ``servers.admin``) and what they run on."""

    def __init__(self, env: dict[str, str], database_url: str, registry_url: str) -> None:
        super().__init__()
        self.env = env
        self.database_url = database_url
        self.registry_url = registry_url

    @property
    def public(self) -> GunicornServer:
        return self["public"]

    @property
    def admin(self) -> GunicornServer:
        return self["admin"]

    def logs(self) -> str:
        """What every server wrote so far."""
        return "".join(server.log() for server in self.values())


@contextlib.contextmanager
def serve_demo(
    state_dir,
    workers: int = 2,
    environment: dict[str, str] | None = None,
    *,
    database_url: str | None = None,
    cache_ttl: float = 1.0,
) -> Iterator[DemoServers]:
    """Start both pipelines (``{"public": server, "admin": server}``); stop them on exit.

    *database_url* is the demo's database (a SQLite file in *state_dir* by
    default; see :func:`tests.support.databases.database_for`), *cache_ttl*
    the tenant cache's; *environment* adds to (or overrides) the servers'
    ``OS_<GROUP>__<OPTION>`` settings.  On a clean exit no server may have
    logged a traceback.
    """
    from tests.functional.conftest import DEMO_INI, EXAMPLES_DIR, demo_server_env, migrated_registry, sqlite_url

    database_url = database_url or sqlite_url(os.path.join(str(state_dir), "demo.sqlite"))
    registry_url = migrated_registry(database_url, state_dir)
    env = demo_server_env(database_url, registry_url, state_dir, cache_ttl)
    env.update(environment or {})
    servers = DemoServers(env, database_url, registry_url)
    try:
        for role, pipeline in PIPELINES:
            server = GunicornServer(
                DEMO_INI, name=pipeline, workers=workers, env=env, cwd=EXAMPLES_DIR, log_dir=state_dir
            )
            servers[role] = server
            server.start()
            _wait_until_serving(server)
        yield servers
        assert "Traceback" not in servers.logs()
    finally:
        for server in servers.values():
            server.stop()
